import numpy as np
import pytest

from dse.spec.layout import Layout
from dse.sweep.grid import GridOptions, check_layout, enumerate_layouts
from dse.sweep.run import sweep, top_k
from dse.errors import InputError
from tests.helpers import a100, h100, llama70b


def test_grid_rules():
    m = llama70b()
    g = enumerate_layouts(m, 64, 1024, 4096)
    assert np.all(g["tp"] * g["pp"] * g["dp"] * g["cp"] == 64)
    assert np.all(m.num_kv_heads % g["tp"] == 0)
    assert np.all(1024 % (g["dp"] * g["mbs"]) == 0)
    assert not np.any((g["sp"] == 1) & (g["tp"] == 1))
    v = g["vpp"] > 1
    assert np.all(g["pp"][v] * g["vpp"][v] <= m.num_layers) and np.all(g["pp"][v] > 1)


def test_sweep_dataframe_with_status_and_topk():
    df = sweep(llama70b(), [a100(), h100()], 32, 256, 2048, opt=GridOptions(mbs=(1, 2)))
    assert set(df["hardware"]) == {"a100-sxm-80gb", "h100-sxm-80gb"}
    assert (~df["feasible"]).any() and df["feasible"].any()
    bad = df[~df["feasible"]]
    assert bad["status"].str.startswith("out of memory").all()
    assert bad["step_time_s"].isna().all()
    best = top_k(df, 5)
    assert list(best["step_time_s"]) == sorted(best["step_time_s"])
    # H100 beats A100 at the best layout
    b = df[df.feasible].groupby("hardware")["step_time_s"].min()
    assert b["h100-sxm-80gb"] < b["a100-sxm-80gb"]


def test_check_layout_errors():
    m = llama70b()
    with pytest.raises(InputError, match="num_attention_heads % tp"):
        check_layout(m, 48, 1024, 4096, Layout(tp=3, dp=16))
    with pytest.raises(InputError, match="gpus % \\(tp\\*pp\\*cp\\)"):
        check_layout(m, 30, 1024, 4096, Layout(tp=4, dp=7))
    check_layout(m, 32, 1024, 4096, Layout(tp=4, dp=8))
