"""Stage-to-stage transfers on the critical path of one non-interleaved 1F1B step, per
framework's pipeline engine (a count of one-micro-batch activation transfers; the caller
multiplies by the time of one).

Megatron-LM (``megatron/core/pipeline_parallel/schedules.py``, non-interleaved 1F1B): the
steady state pairs each stage's sends with its receives in one batched call
(``send_forward_recv_backward`` / ``send_backward_recv_forward``: ``batch_isend_irecv``),
so a slot carries two transfer times and the step

    n_megatron = 2 (m + pp - 1).

DeepSpeed's pipeline engine (deepspeedai/DeepSpeed ``deepspeed/runtime/pipe/schedule.py``
``TrainSchedule``, ``runtime/pipe/p2p.py``): ``2 (m + pp - 1)`` steps, even stages run
forwards on even steps and backwards on odd ones, odd stages the reverse; a forward step
issues ``SendGrad`` (of the previous step's micro-batch) then ``RecvActivation``, a
backward step ``RecvGrad`` then ``SendActivation`` (of the previous step's), each one a
*blocking* ``dist.send`` / ``dist.recv`` (``assert async_op == False``) that waits for
its partner.  An interior stage so pays four transfers per micro-batch in series with its
compute.  Replaying those instruction streams as a dependency graph (every compute and
transfer on one stream, a transfer starting when both ends reach it; the test
``tests/train/test_pipe_transfers.py`` carries the replay) gives, for any forward and
backward times, exactly

    n_deepspeed = 4 m + 2 pp - 8      (pp >= 3, m >= 2)
                = 2 m                 (pp = 2: each stage has one neighbour)
                = 2 (pp - 1)          (m = 1: one micro-batch down and back)

e.g. 1,022 transfers for MT-NLG's 240 micro-batches over 35 stages, against Megatron's
548.  Interleaving (``vpp > 1``) is Megatron-only; its warm-up / cool-down count stays
with the caller.
"""

from __future__ import annotations

import jax.numpy as jnp

from dse.spec.layout import FRAMEWORK_DEEPSPEED


def exposed_transfers(framework: int, m, pp, vpp):
    """Transfers of one micro-batch's activation (or gradient) on the step's critical
    path: the formulas of the module docstring; interleaved Megatron ``2 (pp-1) vpp``
    (only warm-up and cool-down are exposed); 0 without pipelining."""
    n = jnp.where(vpp > 1, 2.0 * (pp - 1.0) * vpp, 2.0 * (m + pp - 1.0))     # Megatron
    if int(framework) == FRAMEWORK_DEEPSPEED:
        blocking = jnp.where(pp == 2, 2.0 * m,
                             jnp.where(m <= 1, 2.0 * (pp - 1.0), 4.0 * m + 2.0 * pp - 8.0))
        n = jnp.where(vpp > 1, n, blocking)
    return jnp.where(pp > 1, n, 0.0)
