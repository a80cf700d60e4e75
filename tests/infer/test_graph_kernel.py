"""A kernel replayed from a CUDA graph costs the graph's launch gap plus one HBM round trip
(dse.infer.engines.graph_kernel_s; the latency per generation in dse.spec.efficiency, a
hardware file may set its own as ``dram_latency_ns``)."""

import pytest
from hypothesis import given, settings, strategies as st

from dse.errors import InputError
from dse.infer.engines import GRAPH_LAUNCH_S, PROFILES, graph_kernel_s
from dse.infer.serving import Deployment, iteration_s
from dse.spec.hardware import get_hardware, hardware_from_dict
from dse.spec.model import get_model

H100 = get_hardware("h100-sxm-80gb")
B200 = get_hardware("b200")
A100 = get_hardware("a100-sxm-80gb")


def test_graph_kernel_is_the_gap_plus_the_measured_hbm_latency():
    assert graph_kernel_s(H100) == pytest.approx(GRAPH_LAUNCH_S + 375e-9)
    assert graph_kernel_s(A100) == pytest.approx(GRAPH_LAUNCH_S + 405e-9)
    # B200: 860 cycles at 1.965 GHz, above H100's (Chips and Cheese finds the same order)
    assert graph_kernel_s(B200) == pytest.approx(GRAPH_LAUNCH_S + 860 / 1.965e9)
    assert graph_kernel_s(B200) > graph_kernel_s(H100)


def test_a_hardware_file_may_set_its_own_latency_and_bad_values_are_refused():
    hw = hardware_from_dict({"base": "h100-sxm-80gb", "dram_latency_ns": 600}, "hw.toml", "h100x")
    assert hw.dram_latency_s == pytest.approx(600e-9)
    assert hardware_from_dict({"base": "h100-sxm-80gb"}, "hw.toml", "h").dram_latency_s == H100.dram_latency_s
    for bad in (-1, float("inf"), "fast", True, 1e9):
        with pytest.raises(InputError, match="dram_latency_ns"):
            hardware_from_dict({"base": "h100-sxm-80gb", "dram_latency_ns": bad}, "hw.toml", "h")


@settings(max_examples=20, deadline=None)
@given(st.floats(0.0, 2000.0), st.floats(0.0, 2000.0), st.sampled_from([1.0, 8.0, 64.0]))
def test_a_longer_hbm_latency_never_makes_a_graph_replayed_step_faster(a_ns, b_ns, batch):
    lo, hi = sorted((a_ns, b_ns))
    m = get_model("llama3-8b")
    step = lambda ns: iteration_s(Deployment(m, H100.replace(dram_latency_s=ns * 1e-9),
                                             PROFILES["vllm_v1"], 1, 1, 1, 2.0), batch, 1000.0)
    assert step(hi) >= step(lo)
    eager = lambda ns: iteration_s(Deployment(m, H100.replace(dram_latency_s=ns * 1e-9),
                                              PROFILES["trtllm"], 1, 1, 1, 2.0), batch, 1000.0)
    assert eager(hi) == eager(lo)      # no graphs: the generation's launch cost alone
