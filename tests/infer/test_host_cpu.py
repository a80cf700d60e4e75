"""Host CPU speed (dse.spec.host_cpu): Python engines' host loops scale with the
hardware's host_cpu_slowdown; C++ executors and the GPU passes do not."""


import pytest
from hypothesis import given, settings, strategies as st

from dse.infer import serving as SV
from dse.infer.engines import PROFILES
from dse.spec.hardware import get_hardware, hardware_from_dict, _raw_catalog
from dse.spec.host_cpu import GB200_SLOWDOWN, GH200_SLOWDOWN
from dse.errors import InputError
from tests.helpers import llama70b

B200, GB200 = get_hardware("b200"), get_hardware("gb200")


def test_catalog_carries_the_measured_grace_ratios():
    assert get_hardware("gb200").host_cpu_slowdown == pytest.approx(GB200_SLOWDOWN, rel=1e-3)
    assert get_hardware("gb300").host_cpu_slowdown == pytest.approx(GB200_SLOWDOWN, rel=1e-3)
    assert get_hardware("gh200").host_cpu_slowdown == pytest.approx(GH200_SLOWDOWN, rel=1e-3)
    for x86 in ("b200", "h100-sxm-80gb", "h200-sxm-141gb", "a100-sxm-80gb"):
        assert get_hardware(x86).host_cpu_slowdown == 1.0


def test_python_engines_scale_cpp_executors_do_not():
    for name in ("trtllm_pytorch", "vllm", "sglang"):
        e = PROFILES[name]
        assert e.python_host
        assert e.host_s(256.0, e.host_scale(GB200)) == pytest.approx(
            GB200_SLOWDOWN * e.host_s(256.0, e.host_scale(B200)), rel=1e-3)
    for name in ("trtllm", "trtllm_mlperf", "trtllm_static"):
        e = PROFILES[name]
        assert e.host_scale(GB200) == 1.0


def test_grace_per_sequence_host_time_is_the_measured_34us():
    """PR #16564's 8.8 ms / 256 requests was measured on Grace; the x86 constant times
    the Grace ratio gives it back."""
    e = PROFILES["trtllm_pytorch"]
    assert e.seq_overhead_s * e.host_scale(GB200) == pytest.approx(8.8e-3 / 256, rel=1e-3)


@settings(max_examples=10, deadline=None)
@given(n=st.integers(64, 2048), slow=st.floats(1.0, 4.0))
def test_slower_host_never_faster(n, slow):
    """A slower host never raises tokens/s (host-bound decode, overlap scheduler)."""
    e = PROFILES["trtllm_pytorch"]
    m = llama70b()
    fast = SV.Deployment(m, B200, e, 1, 1, 3, 1.0)
    slowd = SV.Deployment(m, B200.replace(host_cpu_slowdown=float(slow)), e, 1, 1, 3, 1.0)
    a = SV.concurrency(fast, float(n), 128.0, 2048.0, 1)
    b = SV.concurrency(slowd, float(n), 128.0, 2048.0, 1)
    assert b.tokens_per_s <= a.tokens_per_s * (1 + 1e-6)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan"), 1e9, "fast", True])
def test_bad_host_cpu_slowdown_is_an_input_error(bad):
    d = dict(_raw_catalog()["b200"], host_cpu_slowdown=bad)
    with pytest.raises(InputError, match="host_cpu_slowdown"):
        hardware_from_dict(d, "x.toml", "b200")
