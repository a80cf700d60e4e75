"""dse.host_eval: a program run on the host equals XLA (the trace's durations program);
its plan cache stays bounded.

The reference is XLA itself on the per-op program (every op costed alone, what
``dse.train.step`` computed before the vector calls of ``dse.graph.ops.map_ops``): op by
op (``eval_jaxpr`` under ``jax.disable_jit``, every primitive its own compiled program)
bit for bit; and ``jax.jit`` of the whole program to float32 rounding: XLA may fuse and
reassociate a whole program, so the last bit of a leaf can differ (seen on the CP + VPP
point), which is why the trace runs op by op, not jitted.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src.core import eval_jaxpr

from dse.graph.ops import costed_per_op
from dse.spec.hardware import get_hardware
from dse.spec.layout import Layout, Workload
from dse.spec.model import get_model
from dse.trace import generate as G
from dse.host_eval import Plan, host_call

CASES = [
    ("llama3-70b", "h100-sxm-80gb", dict(tp=8, pp=2, dp=4, sp=1), dict(global_batch=64, seq_len=4096)),
    ("llama3-70b", "h100-sxm-80gb", dict(tp=4, pp=4, dp=2, cp=2, vpp=5, recompute=3, sp=1),
     dict(global_batch=64, seq_len=8192)),
    ("llama3-8b", "a100-sxm-80gb", dict(tp=2, dp=16, mbs=2, recompute=2, zero=3),
     dict(global_batch=64, seq_len=4096)),
    ("llama3-8b", "a100-sxm-80gb", dict(dp=8, recompute=1, zero=2),
     dict(global_batch=64, seq_len=2048, attention=0)),
    ("mixtral-8x7b", "h100-sxm-80gb", dict(tp=2, pp=2, dp=8, ep=4, recompute=1, sp=1),
     dict(global_batch=64, seq_len=4096)),
    ("deepseek-v3", "h100-sxm-80gb", dict(tp=8, pp=8, dp=4, ep=4, recompute=2, sp=1),
     dict(global_batch=256, seq_len=4096)),
]


def _args(model, hw, lay, wl):
    return (get_model(model), Workload(**wl), Layout(**{"mbs": 1, **lay}), get_hardware(hw))


def _same(a, b) -> bool:
    return np.asarray(a).dtype == np.asarray(b).dtype and np.array_equal(a, b, equal_nan=True)


def _per_op_program(args):
    """The trace's durations program with every op costed alone (the pre-vector program):
    its jaxpr (a fresh function, so no trace cache of the vector one is reused)."""
    with costed_per_op():
        return jax.make_jaxpr(lambda *a: G._costs(*a))(*args)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{'-'.join(f'{k}{v}' for k, v in c[2].items())}")
def test_costs_on_the_host_equal_xla_bit_for_bit(case):
    """The trace's program (ops of one kind costed in one vector call) on the host equals
    XLA op by op and jax.jit of the per-op program, bit for bit; and the host evaluation
    of the per-op program equals XLA op by op on it."""
    args = _args(*case)
    host = jax.tree_util.tree_leaves(host_call(G._costs, *args))
    closed = _per_op_program(args)
    leaves = [np.asarray(x, dtype=v.aval.dtype)
              for x, v in zip(jax.tree_util.tree_leaves(args), closed.jaxpr.invars)]
    with jax.disable_jit():
        eager = eval_jaxpr(closed.jaxpr, closed.consts, *leaves)
    with costed_per_op():
        jitted = jax.tree_util.tree_leaves(jax.device_get(jax.jit(lambda *a: G._costs(*a))(*args)))
    host_per_op = Plan(closed)(jax.tree_util.tree_leaves(args))
    assert len(host) == len(eager) == len(jitted) == len(host_per_op) > 40
    bad_eager = [i for i, (a, b) in enumerate(zip(host, eager)) if not _same(a, b)]
    # jax.jit fuses the whole program and may round a sum's last bit differently
    bad_jit = [i for i, (a, b) in enumerate(zip(host, jitted))
               if np.asarray(a).dtype != np.asarray(b).dtype
               or not np.allclose(a, b, rtol=4e-7, atol=0.0, equal_nan=True)]
    bad_plan = [i for i, (a, b) in enumerate(zip(host_per_op, eager)) if not _same(a, b)]
    assert bad_eager == [] and bad_jit == [] and bad_plan == []
    assert len(jax.make_jaxpr(G._costs)(*args).jaxpr.eqns) < 0.8 * len(closed.jaxpr.eqns)


def test_unsupported_primitives_run_in_xla_and_constants_fold():
    def f(x, n):
        y = jnp.exp(x) + jnp.log(2.0) * jnp.tanh(x)     # exp, tanh, log: XLA's own
        k = (n * 3) // 2                                # integer arithmetic: XLA
        v = jnp.stack([x, y]) * 2.0                     # data movement + arrays: NumPy
        return {"y": y, "k": k, "v": v[1], "i": (x * 7.9).astype(jnp.int32)}
    got = host_call(f, np.float32(1.3), 5)
    with jax.disable_jit():      # op by op: jax.jit may fuse exp into the vector pass
        want = f(jnp.float32(1.3), jnp.int32(5))   # and round its last bit differently
    for key in want:
        assert _same(got[key], want[key]), key
    plan = Plan(jax.make_jaxpr(f)(np.float32(1.3), 5))
    assert {"exp", "tanh"} <= plan.xla_primitives
    # log(2.0) has constant inputs only: folded when the plan is built, no step left
    assert all(any(plan.values[i] is None for i in ins) for _, ins, _, _ in plan.steps)


def test_pow_of_two_is_xla_exactly_for_every_normal_exponent():
    """host_eval runs pow(2, k) for integral k as the exact 2^k: XLA's pow must return that
    for every k of float32's normal range (op by op and vectorized), and other inputs
    still go to XLA."""
    k = np.arange(-126, 128, dtype=np.float32)
    f = lambda x, y: x ** y
    with jax.disable_jit():
        xla_vec = np.asarray(jnp.float32(2.0) ** jnp.asarray(k))
    assert _same(xla_vec, np.ldexp(np.float32(1), k.astype(np.int32)))
    assert _same(host_call(f, np.float32(2.0), k), xla_vec)
    scalar = jax.jit(f)            # XLA's scalar program, every exponent
    assert all(_same(host_call(f, np.float32(2.0), y), jax.device_get(scalar(np.float32(2.0), y)))
               for y in k)
    for x, y in ((2.0, 0.5), (2.0, 128.0), (2.0, -127.0), (3.0, 2.0), (2.0, np.nan)):
        x, y = np.float32(x), np.float32(y)
        with jax.disable_jit():
            want = jnp.float32(x) ** jnp.float32(y)
        assert _same(host_call(f, x, y), want), (x, y)


def test_float_to_int_out_of_range_follows_xla():
    f = lambda x: x.astype(jnp.int32)
    for x in (np.float32(3e9), np.float32(-3e9), np.float32(np.nan), np.float32(-2.7)):
        assert _same(host_call(f, x), jax.device_get(jax.jit(f)(x))), x


def test_plan_is_reused_across_design_points(monkeypatch):
    calls = []
    real = jax.make_jaxpr
    monkeypatch.setattr(jax, "make_jaxpr", lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    f = lambda a, b: a * b + 1.0
    assert _same(host_call(f, 2.0, 3.0), np.float32(7.0))
    assert _same(host_call(f, 4.0, 5.0), np.float32(21.0))
    assert len(calls) == 1


def test_plan_cache_is_bounded_and_keeps_the_recently_used(monkeypatch):
    """Fresh closures per call (as `dse sensitivity` passes) must not grow the plans without
    bound: the least recently used plan goes first, a plan in use stays."""
    from dse import host_eval
    monkeypatch.setattr(host_eval, "_PLANS", host_eval.OrderedDict())
    monkeypatch.setattr(host_eval, "PLAN_CACHE_SIZE", 4)
    kept = lambda a: a + 1.0
    for i in range(10):
        assert _same(host_call(kept, 1.0), np.float32(2.0))
        fresh = lambda a, i=i: a * float(i)
        assert _same(host_call(fresh, 2.0), np.float32(2.0 * i))
        assert len(host_eval._PLANS) <= 4
    assert any(k[0] is kept for k in host_eval._PLANS)
