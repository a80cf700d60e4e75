"""H800 / A800: the export-control variants of H100 SXM5 / A100 SXM4 80GB are their base
tables with NVLink cut to 400 GB/s bidirectional (dse/spec/catalog/hardware.toml) -- every
other number is the base's, and the cut shows where TP traffic crosses NVLink."""

import jax
import pytest

from dse.spec.hardware import Hardware, get_hardware
from dse.spec.layout import Layout, Workload
from dse.train.step import train_step
from tests.helpers import llama70b


@pytest.mark.parametrize("variant,base", [("h800-sxm-80gb", "h100-sxm-80gb"),
                                          ("a800-sxm-80gb", "a100-sxm-80gb")])
def test_only_nvlink_differs_from_the_base(variant, base):
    v, b = get_hardware(variant), get_hardware(base)
    differ = [f for f in Hardware._leaf_fields if float(getattr(v, f)) != float(getattr(b, f))]
    assert differ == ["nvlink_bw_bytes_per_s"]
    assert float(v.nvlink_bw_bytes_per_s) == 200e9
    assert v.generation == b.generation and v.name == variant


@pytest.mark.parametrize("spelling,key", [("H800", "h800-sxm-80gb"), ("NVIDIA H800 SXM5", "h800-sxm-80gb"),
                                          ("A800-SXM4-80GB", "a800-sxm-80gb")])
def test_vendor_spellings(spelling, key):
    assert get_hardware(spelling).name == key


def test_tp8_step_slower_on_h800_than_h100():
    """Same silicon, less NVLink: a TP-8 layout pays its all-reduces / all-gathers at
    200 instead of 450 GB/s per direction, so the step can only get slower -- and does."""
    model, wl = llama70b(), Workload(global_batch=64, seq_len=4096)
    lay = Layout(tp=8, pp=2, dp=4, cp=1, vpp=1, mbs=1, recompute=0, zero=1, sp=1)
    step = jax.jit(train_step)
    h100 = step(model, wl, lay, get_hardware("h100-sxm-80gb"))
    h800 = step(model, wl, lay, get_hardware("h800-sxm-80gb"))
    assert float(h800.tp_comm_s) > 1.5 * float(h100.tp_comm_s)
    assert float(h800.step_time_s) > float(h100.step_time_s)
    assert float(h800.compute_s) == pytest.approx(float(h100.compute_s), rel=1e-6)
