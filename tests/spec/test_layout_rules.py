"""One set of layout rules: the sweep's enumeration and the explicit-layout check agree."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.errors import InputError
from dse.spec.layout import Layout
from dse.spec.layout_rules import FIELDS, check_layout, layout_violations
from dse.spec.model import get_model
from dse.sweep.grid import GridOptions, enumerate_layouts

MODEL = get_model("llama3-8b").replace(num_layers=12, num_attention_heads=16, num_kv_heads=4)
OPT = GridOptions(pow2_only=False, max_tp=64, max_cp=16, max_mbs=16, max_vpp=8)
CASES = [(16, 64, 4096), (24, 48, 2048), (8, 8, 64)]
_ENUM = {}


def _enumerated(gpus, gb, seq):
    if (gpus, gb, seq) not in _ENUM:
        c = enumerate_layouts(MODEL, gpus, gb, seq, OPT)
        _ENUM[(gpus, gb, seq)] = set(map(tuple, np.stack([c[f] for f in FIELDS], 1).tolist()))
    return _ENUM[(gpus, gb, seq)]


@settings(max_examples=300, deadline=None)
@given(case=st.sampled_from(CASES), tp=st.integers(1, 16), pp=st.integers(1, 16),
       dp=st.integers(1, 64), cp=st.integers(1, 16), mbs=st.integers(1, 16), vpp=st.integers(1, 8),
       rc=st.integers(0, 3), z=st.integers(0, 3), sp=st.integers(0, 1))
def test_enumeration_and_check_agree(case, tp, pp, dp, cp, mbs, vpp, rc, z, sp):
    gpus, gb, seq = case
    lay = Layout(tp=tp, pp=pp, dp=dp, cp=cp, ep=1, mbs=mbs, vpp=vpp, recompute=rc, zero=z, sp=sp)
    try:
        check_layout(MODEL, gpus, gb, seq, lay)
        ok = True
    except InputError:
        ok = False
    assert ok == (tuple(getattr(lay, f) for f in FIELDS) in _enumerated(gpus, gb, seq))


@pytest.mark.parametrize("fields, gpus, gb, seq, field", [
    (dict(tp=1, pp=4, dp=2, vpp=2, mbs=8), 8, 64, 4096, "vpp"),      # m = 4 micro-batches, pp = 4: ok
    (dict(tp=1, pp=4, dp=2, vpp=2, mbs=16), 8, 64, 4096, "vpp"),     # m = 2 not a multiple of pp
    (dict(tp=1, pp=1, dp=1, cp=64), 64, 64, 4096, "cp"),             # seq/cp = 64, not a multiple of 128
    (dict(tp=1, pp=1, dp=1, cp=8), 8, 8, 64, "cp"),                  # --cp 8 --seq 64
])
def test_known_cases(fields, gpus, gb, seq, field):
    cols = {f: [fields.get(f, 1 if f not in ("recompute", "zero", "sp") else 0)] for f in FIELDS}
    valid, reason = layout_violations(get_model("llama3-8b"), gpus, gb, seq, cols)
    if fields.get("mbs") == 8:
        assert valid[0], reason[0]
    else:
        assert not valid[0] and reason[0].startswith(field + ":"), reason[0]


def test_deepspeed_pipeline_needs_zero_at_most_1():
    """DeepSpeed's pipeline engine refuses ZeRO-2/3 (``deepspeed/runtime/pipe/engine.py``);
    Megatron-LM does not, and without PP DeepSpeed takes every stage."""
    from dse.spec.layout import FRAMEWORK_DEEPSPEED, FRAMEWORK_MEGATRON
    piped = Layout(tp=2, pp=2, dp=4, cp=1, ep=1, mbs=1, vpp=1, recompute=0, zero=2, sp=0)
    check_layout(MODEL, 16, 64, 4096, piped, framework=FRAMEWORK_MEGATRON)
    with pytest.raises(InputError, match="DeepSpeed's pipeline engine needs `zero <= 1`"):
        check_layout(MODEL, 16, 64, 4096, piped, framework=FRAMEWORK_DEEPSPEED)
    check_layout(MODEL, 16, 64, 4096, dataclasses.replace(piped, zero=1), framework=FRAMEWORK_DEEPSPEED)
    flat = Layout(tp=2, pp=1, dp=8, cp=1, ep=1, mbs=1, vpp=1, recompute=0, zero=3, sp=0)
    check_layout(MODEL, 16, 64, 4096, flat, framework=FRAMEWORK_DEEPSPEED)
    ds = enumerate_layouts(MODEL, 16, 64, 4096, OPT, framework=FRAMEWORK_DEEPSPEED)
    mg = enumerate_layouts(MODEL, 16, 64, 4096, OPT, framework=FRAMEWORK_MEGATRON)
    assert not np.any((ds["pp"] > 1) & (ds["zero"] >= 2))
    assert np.any((mg["pp"] > 1) & (mg["zero"] >= 2))
    assert np.any((ds["pp"] == 1) & (ds["zero"] == 3))


def test_deepspeed_pipeline_has_no_interleaving():
    """DeepSpeed's ``PipelineModule`` gives each stage one contiguous part and its only
    training schedule is the non-interleaved ``TrainSchedule``: vpp > 1 is Megatron's."""
    from dse.spec.layout import FRAMEWORK_DEEPSPEED, FRAMEWORK_MEGATRON
    inter = Layout(tp=2, pp=2, dp=4, cp=1, ep=1, mbs=1, vpp=2, recompute=0, zero=1, sp=0)
    check_layout(MODEL, 16, 64, 4096, inter, framework=FRAMEWORK_MEGATRON)
    with pytest.raises(InputError, match="no interleaved schedule: `vpp == 1`"):
        check_layout(MODEL, 16, 64, 4096, inter, framework=FRAMEWORK_DEEPSPEED)
    ds = enumerate_layouts(MODEL, 16, 64, 4096, OPT, framework=FRAMEWORK_DEEPSPEED)
    mg = enumerate_layouts(MODEL, 16, 64, 4096, OPT, framework=FRAMEWORK_MEGATRON)
    assert np.all(ds["vpp"] == 1) and np.any(mg["vpp"] > 1)
