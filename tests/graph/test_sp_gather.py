"""Sequence-parallel all-gathers move the tensor the recipe quantized (Transformer Engine
casts before it gathers: dse.graph.train.sp_gather_bytes); the reduce-scatters stay 16-bit."""

import pytest

from dse.cost.rates import MXFP8_BYTES, NVFP4_BYTES
from dse.graph.train import layer_ops
from dse.spec.layout import PRECISION_16, PRECISION_FP8, PRECISION_MXFP8, PRECISION_NVFP4, Layout, Workload
from dse.spec.model import get_model
from dse.spec.numerics import as_float


def _sp_ops(precision, tp=4, sp=1):
    m, wl, lay = as_float(get_model("llama3-70b"),
                          Workload(global_batch=64, seq_len=4096, precision=precision),
                          Layout(tp=tp, pp=1, dp=2, mbs=1, zero=1, sp=sp))
    return {(op.name, op.phase): op for op in layer_ops(m, wl, lay, 2.0)}


@pytest.mark.parametrize("precision,el", [(PRECISION_16, 2.0), (PRECISION_FP8, 1.0),
                                          (PRECISION_MXFP8, MXFP8_BYTES), (PRECISION_NVFP4, NVFP4_BYTES)])
def test_all_gathers_move_the_recipe_element_and_reduce_scatters_stay_16_bit(precision, el):
    T, h = 4096.0, 8192.0                      # one micro-batch's tokens, Llama 3 70B hidden
    ops = _sp_ops(precision)
    for phase in ("fwd", "bwd"):
        assert float(ops[("sp all-gather", phase)].size_bytes) == pytest.approx(T * h * el)
        assert float(ops[("sp reduce-scatter", phase)].size_bytes) == pytest.approx(T * h * 2.0)


def test_lower_precision_never_gathers_more():
    sizes = [float(_sp_ops(p)[("sp all-gather", "fwd")].size_bytes)
             for p in (PRECISION_16, PRECISION_MXFP8, PRECISION_FP8, PRECISION_NVFP4)]
    assert sizes == sorted(sizes, reverse=True)


def test_without_sequence_parallelism_the_all_reduce_is_16_bit():
    ops = _sp_ops(PRECISION_FP8, sp=0)
    assert float(ops[("sp all-gather", "fwd")].calls) == 0.0
    assert float(ops[("tp all-reduce", "fwd")].size_bytes) == pytest.approx(4096.0 * 8192.0 * 2.0)
