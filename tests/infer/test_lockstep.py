"""Closed-loop waves with fixed lengths (dse.infer.lockstep) and the engine settings a
row's launch command states (dse.infer.predict_rows.launch_settings), and bad launch flags
as one row's invalid status."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from dse.infer.engines import PROFILES, engine_profile
from dse.infer.lockstep import (_staggered_wave, lockstep_concurrency, pass_tokens,
                                staggered_concurrency, staggered_one_wave, wave_cap, wave_prefill)
from dse.infer.predict_rows import launch_settings, predict_inference_frame
from dse.infer.serving import Deployment, iteration_s, kv_slots, prefill_s
from dse.spec.hardware import get_hardware
from dse.spec.model import get_model

H100 = get_hardware("h100-sxm-80gb")
L8 = get_model("meta-llama/Llama-3.1-8B")


def dep(engine="vllm", hw=H100, model=L8, tp=1):
    return Deployment(model, hw, PROFILES[engine], tp, 1, 1, 2.0)


def test_one_pass_wave_ttft_is_the_prefill_of_the_whole_burst():
    d = dep("vllm")
    for W in (1, 4, 16):
        ttft, total = wave_prefill(d, W, 1000.0, math.inf)
        assert ttft == pytest.approx(prefill_s(d, W, 1000.0)) and total == pytest.approx(ttft)


def test_passes_of_whole_prompts_give_the_staircase_mean():
    """Budget of 2 prompts, 5 prompts: passes (2, 2, 1); TTFT 1, 1, 2, 2, 3 passes' worth."""
    d = dep("vllm")
    ttft, total = wave_prefill(d, 5, 1000.0, 2500.0)
    t2, t1 = prefill_s(d, 2, 1000.0), prefill_s(d, 1, 1000.0)
    assert total == pytest.approx(2 * t2 + t1)
    assert ttft == pytest.approx((2 * t2 + 2 * 2 * t2 + (2 * t2 + t1)) / 5)


def test_wave_ttft_grows_with_concurrency_and_throughput_saturates():
    d = dep("vllm")
    res = [lockstep_concurrency(d, n, 2000.0, 200.0, 1) for n in (1, 4, 16, 64, 256, 1024)]
    ttft = [r.ttft_s for r in res]
    assert all(b > a for a, b in zip(ttft, ttft[1:]))
    tps = [r.tokens_per_s for r in res]
    assert tps[3] > tps[0]
    cap = min(kv_slots(d, 2000.0, 200.0, final=True), d.engine.max_batch)
    assert 1024 > cap and tps[-1] == pytest.approx(tps[-2], rel=0.05)   # past the wave cap
    assert res[-1].note.startswith("queued")


def test_wave_accounting_matches_little_and_the_client_tpot():
    """e2e = wait + P_W + (O-1) t_dec; tokens/s = N O / e2e; TPOT = (e2e - TTFT)/(O-1)."""
    d = dep("sglang")
    S, O, n = 3000.0, 500.0, 32
    r = lockstep_concurrency(d, n, S, O, 1)
    ttft_w, p_w = wave_prefill(d, n, S, pass_tokens(d, S))
    t_dec = iteration_s(d, n, S + O / 2)
    assert r.e2e_s == pytest.approx(p_w + (O - 1) * t_dec)
    assert r.ttft_s == pytest.approx(ttft_w)
    assert r.tpot_s == pytest.approx((r.e2e_s - r.ttft_s) / (O - 1))
    assert r.tokens_per_s == pytest.approx(n * O / r.e2e_s)


def test_vllm_without_chunked_prefill_batches_up_to_max_model_len():
    d = dep("vllm")
    assert pass_tokens(d, 3200.0) == math.inf
    assert pass_tokens(d, 3200.0, 32768.0) == 32768.0
    assert pass_tokens(d, 3200.0, 1024.0) == 2048.0        # vLLM's 2048-token floor
    assert pass_tokens(dep("sglang"), 3200.0) == PROFILES["sglang"].max_num_tokens


def test_launch_flags_replace_the_profile_limits():
    row = {"engine": "trtllm (0.17.post1.dev, trtllm-serve PyTorch backend)",
           "notes": "Launch: trtllm-serve --backend pytorch --max_batch_size 512 --max_num_tokens 16384."}
    eng, mml = launch_settings(row, engine_profile(row["engine"])[0])
    assert (eng.max_batch, eng.max_num_tokens, mml) == (512, 16384, None)
    eng, mml = launch_settings({"notes": "vllm serve --max-model-len 32768"}, PROFILES["vllm"])
    assert mml == 32768.0 and eng == PROFILES["vllm"]


def test_in_flight_batching_staggers_the_cohorts():
    """A mixed-batch engine (TensorRT-LLM in-flight batching): one cohort's prompt per pass,
    each cohort decodes from its own pass, so TTFT stays one (mixed) pass while TPOT
    carries the other cohorts' passes: e2e = K t_mix + (O - K) t_dec for whole prompts."""
    d = dep("trtllm")
    S, O = 5000.0, 500.0                      # one 5000-token prompt per 8192-token pass
    r1, r25 = (staggered_concurrency(d, n, S, O, 1) for n in (1, 25))
    t_mix = iteration_s(d, 24.0, S + O / 2, prompt_tokens=S, prompt_len=S)
    t_dec = iteration_s(d, 25.0, S + O / 2)
    e2e = 25 * t_mix + (O - 25) * t_dec
    assert r25.e2e_s == pytest.approx(e2e)
    rho = 25 * t_mix / e2e * 24 / 25                   # the jittered prompt passes (M/D/1)
    assert r25.ttft_s == pytest.approx(t_mix + rho * t_mix / (2 * (1 - rho)))
    assert r1.ttft_s == pytest.approx(iteration_s(d, 0.0, S + O / 2, prompt_tokens=S, prompt_len=S))
    assert r25.tpot_s == pytest.approx((r25.e2e_s - r25.ttft_s) / (O - 1))
    assert r25.tokens_per_s == pytest.approx(25 * O / r25.e2e_s)
    # against the prefill-first wave: the same prompts, a far shorter mean TTFT
    assert r25.ttft_s < 0.2 * lockstep_concurrency(d, 25, S, O, 1).ttft_s
    assert r25.tpot_s > r1.tpot_s and r25.tokens_per_s > 5 * r1.tokens_per_s


def test_jitter_moves_time_from_decode_to_the_first_token_and_keeps_throughput():
    """Resubmissions at random instants wait for the other prompts' passes (M/D/1 at the
    closed-loop utilization, arrival theorem): TTFT rises with concurrency below the
    slots, TPOT falls by the same time over O - 1 tokens, e2e and tokens/s are those of
    the deterministic cycle; the wait never exceeds the interference it displaces."""
    from dse.infer.lockstep import prefill_jitter_wait_s
    d = dep("trtllm")
    S, O = 5000.0, 500.0
    prev = 0.0
    for n in (2, 5, 10, 25):
        r = staggered_concurrency(d, n, S, O, 1)
        t_mix = iteration_s(d, n - 1.0, S + O / 2, prompt_tokens=S, prompt_len=S)
        t_dec = iteration_s(d, float(n), S + O / 2)
        e2e = n * t_mix + (O - n) * t_dec
        assert r.e2e_s == pytest.approx(e2e) and r.tokens_per_s == pytest.approx(n * O / e2e)
        w = r.ttft_s - t_mix
        assert 0.0 < w <= (n - 1) * (t_mix - t_dec) + 1e-12
        assert r.tpot_s == pytest.approx((e2e - t_mix - w) / (O - 1))
        assert w > prev                               # more in flight, longer wait
        prev = w
    assert prefill_jitter_wait_s(1.0, 1.0, 1.0, 0.5, 0.05, 10.0) == 0.0
    # a saturated prompt server is capped by the interference the decode phase held
    assert prefill_jitter_wait_s(50.0, 50.0, 1.0, 0.5, 0.45, 25.0) == pytest.approx(49 * 0.05)


def test_staggered_load_saturates_and_queues_above_the_kv_cap():
    d = dep("trtllm")
    S, O = 2000.0, 200.0
    cap = min(kv_slots(d, S, O, final=True), d.engine.max_batch)
    res = [staggered_concurrency(d, n, S, O, 1) for n in (1, 8, 64, 2 * cap, 4 * cap)]
    tps = [r.tokens_per_s for r in res]
    assert all(b >= a * 0.999 for a, b in zip(tps, tps[1:]))
    assert tps[-1] == pytest.approx(tps[-2], rel=0.02) and res[-1].note.startswith("queued")
    assert res[-1].ttft_s > 1.5 * res[-2].ttft_s                          # queue wait grows


def test_one_wave_of_in_flight_batching_has_no_later_cohorts():
    """25 whole 5000-token prompts sent together and nothing after, one per 8192-token pass:
    the prompt of pass j gets its first token at its end (mean (K + 1)/2 passes) and decodes
    through the K - j passes after it (mean (K - 1)/2), the run ends with the last pass's
    prompt after K t_mix + (O - 1) t_dec.  Against the closed loop's cycle that resubmits:
    no later cohort interrupts (a shorter TPOT), but every prompt waits in the burst (a
    longer TTFT)."""
    d = dep("trtllm")
    S, O, K = 5000.0, 500.0, 25
    one = staggered_one_wave(d, K, S, O, 1)
    t_mix = iteration_s(d, 24.0, S + O / 2, prompt_tokens=S, prompt_len=S)
    t_dec = iteration_s(d, 25.0, S + O / 2)
    assert one.ttft_s == pytest.approx((K + 1) / 2 * t_mix)
    m = (K - 1) / 2
    assert one.tpot_s == pytest.approx((m * t_mix + (O - 1 - m) * t_dec) / (O - 1))
    assert one.e2e_s == pytest.approx(one.ttft_s + (O - 1) * one.tpot_s)
    assert one.tokens_per_s == pytest.approx(K * O / (K * t_mix + (O - 1) * t_dec))
    assert one.batch == K and one.note == ""
    cyc = staggered_concurrency(d, K, S, O, 1)
    assert one.tpot_s < cyc.tpot_s and one.ttft_s > cyc.ttft_s


def test_one_wave_above_the_cap_is_the_queued_cycle():
    d = dep("trtllm")
    S, O = 2000.0, 200.0
    n = 4 * wave_cap(d, S, O)
    assert staggered_one_wave(d, n, S, O, 1) == staggered_concurrency(d, n, S, O, 1)



@settings(max_examples=25, deadline=None)
@given(S=st.integers(64, 16384), O=st.integers(2, 4096), n=st.integers(1, 512))
def test_one_wave_time_per_token_lies_between_its_two_iterations(S, O, n):
    """Every token of a one-wave request comes from a decode-only or a mixed iteration, so
    its mean time per output token lies between the two; its first token waits at least one
    prompt pass, and the wave's throughput never beats decode-only iterations."""
    d = dep("trtllm")
    cap = wave_cap(d, float(S), float(O))
    if cap < 1:
        return
    one = staggered_one_wave(d, float(n), float(S), float(O), 1)
    if n > cap:
        assert one == staggered_concurrency(d, float(n), float(S), float(O), 1)
        return
    W, _, _, t_mix, t_dec = _staggered_wave(d, float(n), float(S), float(O), None)
    assert one.batch == W
    lo, hi = sorted((t_dec, t_mix))
    assert lo * (1 - 1e-6) <= one.tpot_s <= hi * (1 + 1e-6)
    assert one.ttft_s >= t_mix * (1 - 1e-6)
    assert one.tokens_per_s <= W * O / ((O - 1) * t_dec) * (1 + 1e-6)


def test_fixed_length_concurrency_rows_pick_the_engine_schedule():
    """Prefill-first engines (vLLM V0, SGLang) run lockstep waves; in-flight batching runs
    staggered cohorts (dse.infer.predict_rows)."""
    rows = [{**BASE_ROW, "id": "t", "engine": "trtllm (v0.13.0, C++ engine)",
             "batch_or_concurrency": 16, "input_len": 4000, "output_len": 256},
            {**BASE_ROW, "id": "v", "engine": "vllm (v0.6.0)",
             "batch_or_concurrency": 16, "input_len": 4000, "output_len": 256}]
    p = predict_inference_frame(pd.DataFrame(rows), "x").set_index("id")
    t = staggered_concurrency(dep("trtllm"), 16, 4000.0, 256.0, 1)
    v = lockstep_concurrency(dep("vllm"), 16, 4000.0, 256.0, 1)
    assert p.loc["t", "predicted_ttft_ms"] == pytest.approx(t.ttft_s * 1e3, rel=1e-6)
    assert p.loc["v", "predicted_ttft_ms"] == pytest.approx(v.ttft_s * 1e3, rel=1e-6)


def test_early_pytorch_backend_of_tensorrt_llm_runs_eager():
    """TensorRT-LLM < 1.0 PyTorch backend: no CUDA graphs, eager issue floor; 1.x and the
    C++ engine keep the trtllm profile."""
    e = engine_profile("trtllm (0.17.post1.dev, trtllm-serve PyTorch backend)")[0]
    assert e.name == "trtllm_pytorch_eager" and not e.cuda_graphs and e.eager_op_s > 0
    assert engine_profile("trtllm (v1.0, trtllm-bench, PyTorch backend)")[0].name == "trtllm_pytorch"
    assert engine_profile("trtllm (v0.13.0, trtllm-bench, C++ engine)")[0].name == "trtllm"
    d_eager = Deployment(L8, H100, e, 1, 1, 1, 2.0)
    assert iteration_s(d_eager, 4, 1000.0) > iteration_s(dep("trtllm"), 4, 1000.0)


BASE_ROW = {"id": "r", "model": "meta-llama/Llama-3.1-8B", "hardware": "h100-sxm-80gb", "gpus": 1,
            "tp": 1, "pp": 1, "precision": "bf16", "engine": "trtllm (v1.0, trtllm-bench)",
            "scenario": "concurrency", "batch_or_concurrency": 8, "input_len": 128, "output_len": 128,
            "notes": ""}


@pytest.mark.parametrize("col, text, rule", [
    # a value the old `(\d+)` read as its leading digits ('1e30' -> 1) or skipped ('-5', 'abc')
    ("notes", "--max_num_tokens 0", "--max_num_tokens must be a positive integer <= 2147483647, but got '0'"),
    ("notes", "--max_num_tokens -5", "but got '-5'"),
    ("notes", "--max_num_tokens 1e30", "but got '1e30'"),
    ("notes", "--max_num_tokens 1.5", "but got '1.5'"),
    ("notes", "--max_num_tokens abc", "but got 'abc'"),
    ("notes", f"--max_batch_size {2**70}", f"but got '{2**70}'"),
    ("notes", "--max_batch_size=0", "but got '0'"),
    ("notes", "--max-model-len 0", "--max-model-len must be a positive integer"),
    ("notes", "--max-num-seqs", "but got no value"),
    ("notes", "--max_num_tokens 8192 --max_num_tokens 16", "must be stated once"),
    ("engine", "vllm (v0.6.0, --num-scheduler-steps 0)", "--num-scheduler-steps must be a positive integer"),
    ("engine", f"vllm (v0.6.0, --num-scheduler-steps {2**70})", "--num-scheduler-steps must be a positive"),
])
def test_bad_launch_flags_make_that_row_invalid_and_the_others_predict(col, text, rule):
    df = pd.DataFrame([BASE_ROW, {**BASE_ROW, "id": "bad", col: text}])
    out = predict_inference_frame(df, "rows.csv", intervals=False)
    assert out["status"][0] == "ok" and out["predicted_output_tok_s"][0] > 0
    assert out["status"][1].startswith(f"invalid: {col}: ") and rule in out["status"][1], out["status"][1]
    assert np.isnan(out["predicted_output_tok_s"][1])


def test_launch_flags_read_with_equals_and_trailing_punctuation():
    row = {"engine": "vllm (v0.6.0, --num-scheduler-steps=10)",
           "notes": "Launch: --max-num-seqs=256, --max-model-len 32768)."}
    eng, mml = launch_settings(row, engine_profile(row["engine"])[0])
    assert (eng.scheduler_steps, eng.max_batch, mml) == (10, 256, 32768.0)


def test_requests_longer_than_max_model_len_are_infeasible():
    df = pd.DataFrame([{**BASE_ROW, "notes": "--max-model-len 200"}])
    status = predict_inference_frame(df, "rows.csv", intervals=False)["status"][0]
    assert status.startswith("infeasible: `input_len + output_len <= --max-model-len` must hold")


def test_a_bad_model_file_a_row_names_is_its_status_naming_the_file(tmp_path):
    bad = tmp_path / "m.toml"
    bad.write_text("[m]\nnum_layers = 8\nhidden_size = 512\nffn_hidden_size = 1024\n"
                   "num_attention_heads = 8\nnum_kv_heads = 2\nvocab_size = 1000\nsliding_window = -1\n")
    df = pd.DataFrame([BASE_ROW, {**BASE_ROW, "id": "bad", "model": str(bad)}])
    out = predict_inference_frame(df, "rows.csv", intervals=False)
    assert out["status"][0] == "ok"
    assert out["status"][1].startswith(f"invalid: {bad}: m.sliding_window: must be a non-negative"), out["status"][1]
