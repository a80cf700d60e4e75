"""The pipeline engines' exposed transfers (dse.train.pipe_transfers) against a replay of
DeepSpeed's ``TrainSchedule`` instruction streams (deepspeedai/DeepSpeed
``deepspeed/runtime/pipe/schedule.py``: even stages forward on even steps, a forward step
``SendGrad(prev)`` then ``RecvActivation``, a backward step ``RecvGrad`` then
``SendActivation(prev)``; ``runtime/pipe/p2p.py``: every send / recv blocking).  The
replay is written from the schedule, independently of the closed form it checks."""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.spec.layout import FRAMEWORK_DEEPSPEED, FRAMEWORK_MEGATRON, Layout, Workload
from dse.train.pipe_transfers import exposed_transfers
from dse.train.step import train_step
from tests.helpers import a100, llama70b


def _stage_program(m, p, s):
    even = lambda x: x % 2 == 0

    def micro_batch(step):
        if even(step) and even(s):
            return step // 2 - s // 2, True
        if not even(step) and not even(s):
            return (step - 1) // 2 - s // 2, True
        if even(step):
            return step // 2 - p + (s + 1) // 2, False
        return (step - 1) // 2 - p + 1 + s // 2, False

    valid = lambda i: 0 <= i < m
    prev, prog = -1, []
    for step in range(2 * (m + p - 1)):
        i, fwd = micro_batch(step)
        if fwd:
            prog += [("send_grad", prev)] * (valid(prev) and s > 0)
            prog += [("recv_act", i)] * (valid(i) and s > 0)
            prog += [("F", i)] * valid(i)
        else:
            prog += [("recv_grad", i)] * (valid(i) and s < p - 1)
            prog += [("send_act", prev)] * (valid(prev) and s < p - 1)
            prog += [("B", i)] * valid(i)
        prev = i
    return prog


def _replay(m, p, t_f, t_b, t_x):
    """Step time of the schedule with blocking rendezvous transfers of ``t_x`` each."""
    partner = {"send_act": (1, "recv_act"), "recv_act": (-1, "send_act"),
               "send_grad": (-1, "recv_grad"), "recv_grad": (1, "send_grad")}
    prog = [_stage_program(m, p, s) for s in range(p)]
    pc, t = [0] * p, [0.0] * p
    while any(pc[s] < len(prog[s]) for s in range(p)):
        moved = False
        for s in range(p):
            while pc[s] < len(prog[s]):
                op, i = prog[s][pc[s]]
                if op in ("F", "B"):
                    t[s] += t_f if op == "F" else t_b
                    pc[s] += 1
                    moved = True
                    continue
                d, other = partner[op]
                q = s + d
                if pc[q] < len(prog[q]) and prog[q][pc[q]] == (other, i):
                    t[s] = t[q] = max(t[s], t[q]) + t_x
                    pc[s] += 1
                    pc[q] += 1
                    moved = True
                    continue
                break
        assert moved, "the schedule deadlocked"
    return max(t)


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 40), p=st.integers(2, 12), t_b=st.sampled_from([2.0, 3.0]))
def test_deepspeed_closed_form_is_the_schedule_replay(m, p, t_b):
    """Transfers on the critical path = (T(t_x) - T(0)) / t_x of the replay, for any m, pp."""
    t_x = 0.25
    n = (_replay(m, p, 1.0, t_b, t_x) - _replay(m, p, 1.0, t_b, 0.0)) / t_x
    assert float(exposed_transfers(FRAMEWORK_DEEPSPEED, m, p, 1)) == pytest.approx(n, abs=1e-6)


def test_without_transfers_the_replay_is_textbook_1f1b():
    """No transfer cost: DeepSpeed's schedule takes (m + pp - 1)(t_f + t_b), as 1F1B."""
    for m, p in ((8, 4), (32, 8), (240, 35)):
        assert _replay(m, p, 1.0, 3.0, 0.0) == pytest.approx((m + p - 1) * 4.0)


def test_megatron_counts_and_no_pipeline():
    assert float(exposed_transfers(FRAMEWORK_MEGATRON, 240, 35, 1)) == 2 * (240 + 34)
    assert float(exposed_transfers(FRAMEWORK_MEGATRON, 64, 8, 4)) == 2 * 7 * 4
    assert float(exposed_transfers(FRAMEWORK_DEEPSPEED, 64, 1, 1)) == 0.0
    # MT-NLG: 240 micro-batches over 35 stages
    assert float(exposed_transfers(FRAMEWORK_DEEPSPEED, 240, 35, 1)) == 4 * 240 + 2 * 35 - 8


def test_deepspeed_step_pays_its_extra_transfers_and_only_them():
    """The same layout under the two profiles differs in pp_comm by the extra transfers x
    one transfer's time (DeepSpeed sends the whole activation from every TP rank)."""
    model, lay = llama70b(), Layout(tp=8, pp=8, dp=1, mbs=1, recompute=1, zero=1)
    wl = Workload(global_batch=64, seq_len=4096, framework=FRAMEWORK_DEEPSPEED)
    step = jax.jit(train_step)
    r = step(model, wl, lay, a100())
    n = float(exposed_transfers(FRAMEWORK_DEEPSPEED, 64, 8, 1))
    assert n == 4 * 64 + 2 * 8 - 8 > 2 * (64 + 8 - 1)
    one = float(r.pp_comm_s) / n
    bytes_ = 4096 * model.hidden_size * 2.0
    assert one > bytes_ / float(a100().nic_bw_bytes_per_s) * 0.5
    assert float(r.step_time_s) >= float(r.pp_comm_s)
    assert jnp.isfinite(r.step_time_s)
