"""dse.graph.ops.map_ops: costing the ops of one kind in one vector call gives every op
the value it has costed alone -- bit for bit under IEEE arithmetic (the host evaluator of
dse.host_eval), to float32 rounding under jit(vmap) -- on the step graphs of dense,
MoE, MLA, unfused-attention, TP-overlap and ZeRO-3 design points; eager values take the
plain loop."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from dse.graph.ops import (bound_terms, bytes_moved, costed_per_op, flops, host_kernels, map_ops,
                           time_s, times_s)
from dse.spec.hardware import get_hardware
from dse.spec.layout import Layout, Workload
from dse.spec.model import get_model
from dse.spec.numerics import as_float
from dse.cost.rates import rates
from dse.train.step import step_and_schedule

CASES = [
    ("llama3-70b", "h100-sxm-80gb", dict(tp=8, pp=2, dp=4, sp=1), dict(global_batch=64, seq_len=4096)),
    ("llama3-70b", "h100-sxm-80gb", dict(tp=4, pp=4, dp=2, cp=2, vpp=5, recompute=3, sp=1),
     dict(global_batch=64, seq_len=8192, tp_overlap=1)),
    ("llama3-8b", "a100-sxm-80gb", dict(tp=2, dp=16, mbs=2, recompute=2, zero=3),
     dict(global_batch=64, seq_len=4096, attention=0)),
    ("mixtral-8x7b", "h100-sxm-80gb", dict(tp=2, pp=2, dp=8, ep=4, recompute=1, sp=1),
     dict(global_batch=64, seq_len=4096, precision=2)),
    ("deepseek-v3", "h100-sxm-80gb", dict(tp=8, pp=8, dp=4, ep=4, recompute=2, sp=1),
     dict(global_batch=256, seq_len=4096)),
]
FNS = (time_s, flops, bytes_moved, bound_terms, host_kernels)


def _args(model, hw, lay, wl):
    return get_model(model), Workload(**wl), Layout(**{"mbs": 1, **lay}), get_hardware(hw)


def _both(model, wl, lay, hw):
    """Every op of the step graph through every costing function, vector and per op."""
    _, _, g = step_and_schedule(model, wl, lay, hw)
    model, wl, lay = as_float(model, wl, lay)
    r = rates(hw, wl.precision)
    ops = [op for group in g for op in group]
    out = {}
    for fn in FNS:
        args = (hw, r) if fn in (time_s, bytes_moved, bound_terms) else ()
        out[fn.__name__] = (map_ops(fn, ops, *args), [fn(op, *args) for op in ops])
    out["times_s"] = (times_s(g.layer, hw, r), [time_s(op, hw, r) for op in g.layer])
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{'-'.join(f'{k}{v}' for k, v in c[2].items())}")
def test_vector_costing_equals_per_op_costing_bit_for_bit_on_the_host(case):
    from dse.host_eval import host_call
    out = host_call(_both, *_args(*case))
    for name, (vec, per_op) in out.items():
        a, b = jax.tree_util.tree_leaves(vec), jax.tree_util.tree_leaves(per_op)
        assert len(a) == len(b) > 0
        bad = [i for i, (x, y) in enumerate(zip(a, b))
               if not (np.asarray(x).dtype == np.asarray(y).dtype and np.array_equal(x, y, equal_nan=True))]
        assert bad == [], name


def _layer_times(model, wl, lay, hw):
    model, wl, lay = as_float(model, wl, lay)
    _, _, g = step_and_schedule(model, wl, lay, hw)
    return times_s(g.layer, hw, rates(hw, wl.precision))


def test_vector_calls_shrink_the_traced_program():
    args = _args(*CASES[0])
    size = lambda: len(jax.make_jaxpr(lambda *a: _layer_times(*a))(*args).jaxpr.eqns)
    vec = size()
    with costed_per_op():
        per_op = size()
    assert vec < 0.75 * per_op


def test_vector_costing_under_jit_vmap_is_the_per_op_costing_to_float32_rounding():
    model, wl, lay, hw = _args(*CASES[1])
    lays = jax.tree_util.tree_map(lambda x: np.full(3, x), lay)
    lays = dataclasses.replace(lays, tp=np.array([2, 4, 8]), sp=np.array([0, 1, 1]))
    f = jax.jit(jax.vmap(lambda l: _both(model, wl, l, hw)["time_s"]))
    vec, per_op = f(lays)
    np.testing.assert_allclose(np.asarray(vec), np.asarray(per_op), rtol=1e-6, atol=0.0)


def test_eager_values_take_the_plain_loop():
    model, wl, lay, hw = _args(*CASES[0])
    out = _both(model, wl, lay, hw)
    for name, (vec, per_op) in out.items():
        for x, y in zip(jax.tree_util.tree_leaves(vec), jax.tree_util.tree_leaves(per_op)):
            assert np.array_equal(x, y), name
