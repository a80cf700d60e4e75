"""The inference sweep: vmapped == scalar, feasibility status, best point, bad input."""

import jax
import pytest

from dse.errors import InputError
from dse.infer import InferenceWorkload, best_inference, inference_step, sweep_inference
from dse.infer.sweep import batch_sizes, replica_layouts
from tests.helpers import a100, h100, llama70b

MODEL = llama70b()
STEP = jax.jit(inference_step)


@pytest.fixture(scope="module")
def df():
    return sweep_inference(MODEL, [a100(), h100()], 2, 64, 2048, 256)


def test_grid(df):
    assert set(zip(df.tp, df.pp)) == {(1, 2), (2, 1)}
    assert sorted(set(df.batch)) == [1, 2, 4, 8, 16, 32, 64]
    assert len(df) == 2 * 2 * 7
    assert batch_sizes(48) == [1, 2, 4, 8, 16, 32, 48]
    # tp 16 > 8 KV heads is allowed (KV replicated); tp must divide the 64 heads
    assert (16, 1) in replica_layouts(MODEL, 16)
    assert all(MODEL.num_attention_heads % tp == 0 for tp, _ in replica_layouts(MODEL, 48))


def test_vmapped_equals_scalar(df):
    ok = df[df.feasible]
    assert len(ok) > 6
    hws = {"a100-sxm-80gb": a100(), "h100-sxm-80gb": h100()}
    for _, row in ok.iloc[::2].iterrows():
        wl = InferenceWorkload(batch=int(row.batch), prompt_len=2048, gen_len=256, precision=1)
        r = STEP(MODEL, wl, hws[row.hardware], int(row.tp), int(row.pp))
        for f in ("prefill_s", "decode_s_per_token", "tokens_per_s"):
            assert row[f] == pytest.approx(float(getattr(r, f)), rel=1e-5)
        assert row.mem_gib == pytest.approx(float(r.mem_bytes) / 2**30, rel=1e-5)


def test_memory_breakdown_columns_sum_to_total(df):
    parts = df[["mem_weights_gib", "mem_kv_gib", "mem_activations_gib", "mem_reserve_gib"]].sum(axis=1)
    assert parts.to_numpy() == pytest.approx(df.mem_gib.to_numpy(), rel=1e-5)
    ok = df[df.feasible]
    assert ok.mem_kv_gib.to_numpy() == pytest.approx(ok.kv_gib.to_numpy(), rel=1e-5)
    assert (df.mem_reserve_gib >= 1.0).all()      # the fixed 1 GiB workspace at least


def test_margin_zero_is_the_full_hbm():
    d0 = sweep_inference(MODEL, [a100()], 2, 64, 2048, 256, mem_margin=0.0)
    assert (d0[~d0.feasible].mem_gib > d0[~d0.feasible].hbm_gib).all()
    assert d0.feasible.sum() >= sweep_inference(MODEL, [a100()], 2, 64, 2048, 256).feasible.sum()


def test_status_and_nan_for_infeasible(df):
    bad = df[~df.feasible]
    assert len(bad) > 0            # 70B on 2 GPUs: 66 GiB of weights each, big batches OOM
    assert bad.status.str.startswith("out of memory: needs").all()
    assert bad.prefill_s.isna().all() and bad.tokens_per_s.isna().all()
    assert (df[df.feasible].status == "ok").all()
    # feasible = fits in (1 - margin) x HBM (dse.train.memory_parts)
    assert (bad.mem_gib > 0.97 * bad.hbm_gib).all()
    assert (df[df.feasible].mem_gib <= 0.97 * df[df.feasible].hbm_gib + 1e-4).all()
    inside = bad[bad.mem_gib <= bad.hbm_gib]
    assert inside.status.str.contains("safety margin").all()
    assert list(df.columns[:4]) == ["model", "hardware", "tp", "pp"]
    for c in ("batch", "prefill_s", "decode_s_per_token", "tokens_per_s", "mem_gib",
              "feasible", "status"):
        assert c in df.columns


def test_best(df):
    b = best_inference(df)
    assert b.tokens_per_s == df[df.feasible].tokens_per_s.max()
    p = best_inference(df, "prefill_s")
    assert p.prefill_s == df[df.feasible].prefill_s.min()
    assert p.hardware == "h100-sxm-80gb" and p.batch == 1
    with pytest.raises(InputError, match="objective"):
        best_inference(df, "latency")
    assert best_inference(df[~df.feasible]) is None


def test_bad_input():
    # 81 GPUs: tp 1 needs pp 81 > 80 layers; 3, 9, 27, 81 do not divide 64 heads
    with pytest.raises(InputError, match="num_attention_heads % tp"):
        sweep_inference(MODEL, [a100()], 81, 8, 128, 16)
    with pytest.raises(InputError, match="batch >= 1"):
        sweep_inference(MODEL, [a100()], 8, 0, 128, 16)


def test_fp8_needs_fp8_hardware():
    d = sweep_inference(MODEL, [a100(), h100()], 4, 1, 512, 64, precision=2)
    assert not d[d.hardware == "a100-sxm-80gb"].feasible.any()
    assert d[d.hardware == "a100-sxm-80gb"].status.str.contains("no fp8").all()
    assert d[d.hardware == "h100-sxm-80gb"].feasible.any()
