"""The layout study's memory-limit rows and framework comparison, on synthetic sweeps
(no cost model run): what each row says follows from the numbers it is given."""

from types import SimpleNamespace

import numpy as np
import pandas as pd

from dse.report.layout_frameworks import sentences
from dse.report.memory_limits import plot_note, sentence
from dse.spec.hardware import GIB
from dse.spec.layout import FRAMEWORK_DEEPSPEED, FRAMEWORK_MEGATRON
from dse.studies.layout_frameworks import compare
from dse.studies.layout_memory import memory_limits

TERMS = dict(compute_s=10.0, recompute_s=0.0, tp_comm_s=0.0, cp_comm_s=0.0, ep_comm_s=0.0, pp_comm_s=0.0,
             bubble_s=0.0, dp_comm_s=0.0, optimizer_s=0.1)


def _row(**kw):
    r = dict(hardware="gpu", gpus=16, seq_len=2048, global_batch=64, tp=1, pp=1, dp=16, cp=1, ep=1, mbs=1, vpp=1,
             recompute="none", zero=3, sp=False, feasible=True, mem_gib=50.0, step_time_s=10.1, mfu=0.5, **TERMS)
    r.update(kw)
    return r


def test_no_fit_and_low_mfu_rows_quote_their_numbers():
    hw = SimpleNamespace(name="gpu", hbm_bytes=80 * GIB)
    wl = SimpleNamespace(hardware=[hw], model=None, precision=1)
    full = pd.DataFrame([_row(gpus=8, feasible=False, mem_gib=150.0, step_time_s=np.nan),
                         _row(gpus=8, feasible=False, mem_gib=120.0, step_time_s=np.nan, tp=8, dp=1),
                         _row(gpus=16, mfu=0.2), _row(gpus=32), _row(gpus=64)])
    summary = full[full.feasible].assign(layout="L")
    lim = memory_limits(full, summary, wl, margin=0.03)
    assert list(lim["kind"]) == ["no layout fits", "low MFU"]
    nofit = lim.iloc[0]
    assert nofit["least_mem_gib"] == 120.0 and abs(nofit["usable_gib"] - 77.6) < 1e-9
    assert "120.0" in sentence(nofit) and "77.60" in sentence(nofit) and "40.0 GiB short" in sentence(nofit)
    assert "120.0 > 77.6" in plot_note(nofit)
    assert "0.20" in sentence(lim.iloc[1]) and "0.50" in sentence(lim.iloc[1])


def test_deepspeed_hybrid_excludes_zero3_with_pipeline_and_names_the_term():
    rows = [_row(tp=1, pp=1, zero=3, step_time_s=15.1, recompute="full", recompute_s=5.0),
            _row(tp=2, pp=4, zero=3, step_time_s=10.1, dp=2),            # DeepSpeed cannot run this
            _row(tp=8, pp=2, zero=1, step_time_s=12.1, dp=1, tp_comm_s=2.0, compute_s=10.0, recompute_s=0.0)]
    df = pd.DataFrame(rows)
    # the deepspeed sweep enumerates no ZeRO-2/3 layout with PP > 1 (dse.spec.layout_rules,
    # tests/spec/test_layout_rules.py): its frame lacks the second row
    ds_df = df[~((df["pp"] > 1) & (df["zero"] >= 2))]
    mg, ds = compare(df, FRAMEWORK_MEGATRON, 1.8), compare(ds_df, FRAMEWORK_DEEPSPEED, 1.8)
    assert mg["hybrid_layout"].startswith("TP2 PP4") and ds["hybrid_layout"].startswith("TP8 PP2")
    assert ds["top_term"] == "recompute_s" and ds["offset_term"] == "tp_comm_s"
    assert abs(ds["ratio"] - 15.1 / 12.1) < 1e-12 and abs(ds["needed_extra_s"] - (1.8 * 12.1 - 15.1)) < 1e-12
    t = pd.DataFrame([{"hardware": "gpu", "gpus": 16, "seq_len": 2048, "global_batch": 64, **mg},
                      {"hardware": "gpu", "gpus": 16, "seq_len": 2048, "global_batch": 64, **ds}])
    (s,) = sentences(t)
    assert f"{15.1 / 12.1:.2f}x (deepspeed)" in s and "full recompute" in s
