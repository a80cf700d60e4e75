"""The TensorRT-LLM >= 1.0 PyTorch-backend profile: routing by engine text and the
overlap-scheduler iteration max(GPU, host) (dse.infer.engines)."""

import pytest

from dse.infer.engines import PROFILES, TRTLLM_PY_SEQ_S, engine_profile


@pytest.mark.parametrize("text,name", [
    ("trtllm (v1.0, trtllm-bench throughput, PyTorch backend, CUDA graphs padded)", "trtllm_pytorch"),
    ("trtllm (v1.x, trtllm-bench throughput, PyTorch backend)", "trtllm_pytorch"),
    ("trtllm (release/1.2, trtllm-bench throughput, PyTorch backend)", "trtllm_pytorch"),
    ("trtllm (v1.0)", "trtllm_pytorch"),
    ("trtllm (v1.0, TensorRT backend)", "trtllm"),
    ("trtllm (0.17.post1.dev, trtllm-serve PyTorch backend)", "trtllm_pytorch_eager"),
    ("trtllm (v0.13.0, trtllm-bench, C++ engine)", "trtllm"),
    ("trtllm (TensorRT 10.11 / CUDA 12.9, NVIDIA MLPerf harness)", "trtllm_mlperf"),
    # another package's version is not the engine's: TensorRT 10.2 is no TRT-LLM >= 1.0
    ("trtllm (TensorRT 10.2, trtllm-bench)", "trtllm"),
    ("trtllm (CUDA 12.9, v0.20)", "trtllm"),
    ("trtllm (v0.13.0, TensorRT 10.4)", "trtllm"),
    ("trtllm (PyTorch 2.5, v0.18, PyTorch backend)", "trtllm_pytorch_eager"),
    ("trtllm (v, PyTorch backend)", "trtllm_pytorch"),
    ("trtllm (v1.x.y)", "trtllm_pytorch"),
])
def test_engine_routing(text, name):
    assert engine_profile(text)[0].name == name


def test_overlap_hides_host_until_it_exceeds_gpu():
    e = PROFILES["trtllm_pytorch"]
    host_1000 = e.host_s(1000)
    assert host_1000 == pytest.approx(0.5e-3 + 1000 * TRTLLM_PY_SEQ_S)
    assert e.with_host_s(0.05, 1000) == 0.05                 # GPU-bound: host hidden
    assert e.with_host_s(1e-3, 1000) == pytest.approx(host_1000)   # host-bound
    serial = PROFILES["trtllm"]
    assert serial.with_host_s(0.05, 1000) == pytest.approx(0.05 + serial.host_s(1000))


def test_trtllm_bench_caps():
    e = PROFILES["trtllm_pytorch"]
    assert (e.max_batch, e.max_num_tokens, e.cuda_graphs, e.graph_max_batch) == (4096, 32768, True, 8192)


@pytest.mark.parametrize("text,steps", [("vllm (v0.6.0, --num-scheduler-steps 10)", 10),
                                        ("vllm (v0.6.0, num-scheduler-steps 10)", 10),
                                        ("vllm (--num_scheduler_steps=4)", 4)])
def test_scheduler_steps_spellings(text, steps):
    assert engine_profile(text)[0].scheduler_steps == steps
