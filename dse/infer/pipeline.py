"""Pipeline-parallel serving iterations of TensorRT-LLM's PyTorch executor: the host work
of every stage rank is serial with its GPU pass.

**What the executor does with pp > 1** (``tensorrt_llm/_torch/pyexecutor/py_executor.py``,
the 1.0 line):

* the loop is chosen by the pipeline size, ``if self.dist.pp_size > 1: self.event_loop =
  self._executor_loop_pp`` ``else: ... self._executor_loop_overlap`` (``PyExecutor.__init__``):
  the overlap scheduler -- the CPU preparing iteration n+1 and post-processing n-1 while
  the GPU runs n, what makes a pp = 1 iteration ``max(GPU, host)``
  (:meth:`dse.infer.engines.EngineProfile.with_host_s`, ``host_overlap``) -- is never used
  with pipeline parallelism;
* ``_executor_loop_pp`` keeps ``num_micro_batches`` = pp micro-batches in flight (slot
  ``microbatch_id`` marches ``(id + 1) % num_micro_batches``); each loop iteration of every
  rank schedules one micro-batch (``_schedule``, the requests not in flight), runs its
  forward, then passes the previous micro-batch's sampled tokens along the rank chain
  ``(pp - 1) -> 0 -> 1 -> ... -> (pp - 2)`` as pickled host objects (``recv_object`` /
  ``isend_object``) and finalises the micro-batch whose tokens arrived
  (``_update_requests``, ``_handle_responses``, ``update_resources``);
* on every rank but the last, the forward is ``_forward_step_inter_pp``:
  ``self._forward_step(scheduled_batch)``; ``sampler_event.record()``;
  ``self._update_request_states(scheduled_batch)``; ``sampler_event.synchronize()`` --
  the host waits for its own stage's GPU pass (hidden states received, ``ceil(L/pp)``
  layers, hidden states sent: ``pp_recv`` / ``pp_send`` of ``hidden_states`` and
  ``residual`` through the NCCL communicator op on the compute stream,
  ``tensorrt_llm/_torch/models/modeling_utils.py`` ``forward_after_recv`` /
  ``forward_before_send``, ``tensorrt_llm/_torch/distributed/communicator.py`` ``PPComm``)
  before it does anything else.  Later revisions of the file drop that ``synchronize()``
  (the event is handed on in the ``SampleState`` instead); the 1.0 line has it.

So a rank's loop iteration is its host work for one micro-batch *then* its GPU pass,
never both at once; every rank steps at the pace of the slowest, and all ranks run the
same host work (every rank schedules, prepares its inputs and updates its copy of every
request's state).  One rank iteration per micro-batch, pp of them per pipeline iteration
(every running sequence advances one token):

    t_iter = pp * (t_stage(b / m) + h(b / m)),    h(n) = (c_pass + c_seq n) * host_scale

with ``m = min(b, pp)`` micro-batches (:func:`dse.infer.forward.micro_batches`),
``t_stage`` the stage pass of :func:`dse.infer.forward.stage_time` (its ``pp hand-off``
included) and ``h`` the engine's host time of a pass over ``b / m`` sequences
(:meth:`dse.infer.engines.EngineProfile.host_s`: the per-pass constant and the
per-sequence Python loops of ``_prepare_tp_inputs`` / ``TorchSampler.update_requests``,
the same constants as pp = 1, not refitted).  Against the overlapped ``max(pp t_stage,
h(b))`` this charges the host of every micro-batch on the critical path: each of the pp
passes adds ``c_pass + c_seq b / m``, so a pipeline iteration pays ``pp c_pass + c_seq b``
in series with the GPU -- the most where the stage pass is short (decode of short
contexts over many stages), nothing where the GPU time dominates (long prompts).

The sampled-token chain back to rank 0 has slack: the micro-batch scheduled at rank-0
iteration j is re-scheduled at iteration j + pp, its tokens being received at j + pp - 1
from the last rank's iteration j + 1, so it binds only if ``(pp - 1) t_rank`` were
shorter than the ``(pp - 1)`` stage passes of the pipeline's fill, which it is not; it
adds no term here.

Engines: the rule applies to the profiles whose pp = 1 overlap is the PyExecutor's
overlap loop (``host_overlap``: ``trtllm_pytorch``), and to SGLang's overlap scheduler
(``sglang_overlap``), which ``server_args.py`` switches off with ``pp_size > 1`` (from
0.4.10: ``if self.pp_size > 1: self.disable_overlap_schedule = True``).  The C++ executor
profiles already charge their host time in series (``gpu + host``) and are left as they are.
vLLM's async scheduling (``vllm_v1_async``) is off with pp > 1 in v0.14 (release notes:
"Excludes ... pipeline parallel"), which leaves the plain V1 engine: its PP batch queue
(``max_concurrent_batches`` = pp) runs one engine step per iteration, ``pp t_stage + h(b)``
in series, the ``vllm_v1`` formula (:func:`pipelined_iteration_s`).

Units: seconds, sequences.
"""

from __future__ import annotations

import jax.numpy as jnp

from dataclasses import replace

from dse.infer.engines import EngineProfile


def host_serial_with_pp(engine: EngineProfile) -> bool:
    """Whether ``engine`` runs a per-micro-batch host loop when pp > 1 (module docstring:
    the PyExecutor runs ``_executor_loop_pp`` instead of ``_executor_loop_overlap``;
    SGLang's PP loop likewise).  An engine with ``pp_serial_step`` (vLLM's async V1
    engine) instead falls back to one serial engine step per iteration."""
    return bool(engine.host_overlap) and not engine.pp_serial_step


def pipelined_iteration_s(engine: EngineProfile, stage_s, pp, sequences, micro,
                          host_scale=1.0):
    """Seconds of one pipeline iteration (every running sequence advances one token) of
    ``sequences`` running sequences in ``micro`` micro-batches over ``pp`` stages whose
    stage pass takes ``stage_s`` (module docstring):

    * pp = 1, or an engine without the PyExecutor overlap loop: ``with_host_s(pp stage_s,
      sequences)`` (unchanged: overlapped ``max`` or serial sum as the profile says);
    * pp > 1 on a ``host_overlap`` engine: ``pp (stage_s + h(sequences / micro))``;
    * pp > 1 on a ``pp_serial_step`` engine (vLLM's async V1): the serial
      ``pp stage_s + h(sequences)``.

    Scalars in, float out; traced ``pp`` / ``stage_s`` / ``sequences`` (the vectorized
    sweep) go through ``jnp.where``."""
    scalars = all(isinstance(v, (int, float)) for v in (stage_s, pp, sequences, micro))
    if not engine.host_overlap or (scalars and pp <= 1):
        return engine.with_host_s(stage_s * pp, sequences, host_scale)
    if host_serial_with_pp(engine):
        m = max(float(micro), 1.0) if scalars else jnp.maximum(micro * 1.0, 1.0)
        serial = pp * (stage_s + engine.host_s(sequences / m, host_scale))
    else:                                  # pp_serial_step: one serial engine step
        serial = replace(engine, host_overlap=False).with_host_s(stage_s * pp, sequences, host_scale)
    if scalars:
        return float(serial)
    return jnp.where(pp > 1, serial, engine.with_host_s(stage_s * pp, sequences, host_scale))
