"""An engine whose host runs one step ahead of the GPU (``host_overlap``: vLLM V1 async
scheduling, SGLang's overlap scheduler, TensorRT-LLM's overlap loop) has already submitted
iteration n + 1 when a request arrives during iteration n, so the prompt rides n + 2: one
more mean iteration in TTFT than a serial engine, nothing else
(dse.infer.engines.EngineProfile.admission_lag)."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

from dse.infer import serving as SV
from dse.infer.continuous import Replica
from dse.infer.continuous import first_token_s as continuous_first_token_s
from dse.infer.engines import PROFILES
from dse.spec.hardware import get_hardware
from dse.spec.model import get_model

M8 = get_model("llama3-8b")
H100 = get_hardware("h100-sxm-80gb")


def test_overlap_engines_lag_one_iteration_serial_engines_none():
    for name, p in PROFILES.items():
        assert p.admission_lag() == (1.0 if p.host_overlap else 0.0), name
    assert PROFILES["vllm_v1_async"].admission_lag() == 1.0
    assert PROFILES["vllm_v1"].admission_lag() == 0.0


def test_vllm_async_with_pp_is_serial_and_traced_pp_selects_per_point():
    a = PROFILES["vllm_v1_async"]
    assert a.admission_lag(2) == 0.0            # vLLM drops async scheduling with PP
    assert PROFILES["trtllm_pytorch"].admission_lag(2) == 1.0
    np.testing.assert_array_equal(np.asarray(a.admission_lag(jnp.array([1.0, 2.0, 4.0]))), [1.0, 0.0, 0.0])


@pytest.mark.parametrize("engine", ["vllm_v1_async", "sglang_overlap", "trtllm_pytorch"])
def test_ttft_is_one_mean_iteration_more_than_the_same_engine_run_serially(engine):
    """Same iteration times (a fixed Cycle): only the scheduling lag differs."""
    eng = PROFILES[engine]
    serial = dataclasses.replace(eng, host_overlap=False)
    c = SV.Cycle(mean_s=0.004, first_s=0.030)
    lag = SV.first_token_s(SV.Deployment(M8, H100, eng, 1, 1, 1, 2.0), c)
    base = SV.first_token_s(SV.Deployment(M8, H100, serial, 1, 1, 1, 2.0), c)
    assert lag - base == pytest.approx(c.mean_s)
    rep = Replica(M8, H100, 1.0, 1.0, 1, 2.0)
    lag_v = float(continuous_first_token_s(rep, eng, c, 0.1, 1024.0))
    base_v = float(continuous_first_token_s(rep, serial, c, 0.1, 1024.0))
    assert lag_v - base_v == pytest.approx(c.mean_s)


def test_the_closed_loop_wave_path_adds_one_decode_iteration_to_ttft_and_e2e(monkeypatch):
    """dse.infer.lockstep.staggered_concurrency: the resubmitted prompt waits for the
    iteration already submitted -- one decode iteration (at the wave's batch) in TTFT and e2e,
    TPOT unchanged."""
    from dse.infer import lockstep
    from dse.infer.engines import EngineProfile
    dep = SV.Deployment(M8, H100, PROFILES["sglang_overlap"], 1, 1, 1, 2.0)
    S, O, n = 1024.0, 256.0, 8.0
    lag = lockstep.staggered_concurrency(dep, n, S, O, 1)
    monkeypatch.setattr(EngineProfile, "admission_lag", lambda self, pp=1.0: 0.0)
    base = lockstep.staggered_concurrency(dep, n, S, O, 1)
    t_dec = SV.iteration_s(dep, lag.batch, S + O / 2.0)
    assert lag.ttft_s - base.ttft_s == pytest.approx(t_dec, rel=1e-6)
    assert lag.e2e_s - base.e2e_s == pytest.approx(t_dec, rel=1e-6)
    assert lag.tpot_s == pytest.approx(base.tpot_s, rel=1e-9)
