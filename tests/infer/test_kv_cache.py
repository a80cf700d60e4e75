"""KV cache and serving memory: hand-computed values and monotonicity."""

import jax
import pytest

from dse.infer import InferenceWorkload, kv_cache_bytes
from dse.infer.memory import serving_memory, weight_params_per_gpu
from dse.spec.layout import Layout
from dse.train.memory import params_per_gpu
from dse.cost.rates import rates
from tests.helpers import h100, llama70b

MODEL = llama70b()


def test_kv_cache_llama3_70b_hand_value():
    # 80 layers, 8 KV heads of 128, bf16: 2 * 80 * 8 * 128 * 2 B = 327,680 B per token
    assert float(kv_cache_bytes(MODEL, 1, 1, 1, 1, 2.0)) == 327_680
    # batch 1, 4096 tokens, tp 8 (one KV head per GPU): 2*80*1*4096*1*128*2 = 160 MiB
    assert float(kv_cache_bytes(MODEL, 1, 4096, 8, 1, 2.0)) == 167_772_160
    # batch 32, 2304 tokens (2048 + 256), tp 8, pp 2: 2*40*32*2304*1*128*2
    assert float(kv_cache_bytes(MODEL, 32, 2304, 8, 2, 2.0)) == 2 * 40 * 32 * 2304 * 128 * 2
    # tp 16 > 8 KV heads: each GPU keeps a replica of one head, same as tp 8
    assert float(kv_cache_bytes(MODEL, 1, 4096, 16, 1, 2.0)) == 167_772_160
    # fp8 cache halves it
    assert float(kv_cache_bytes(MODEL, 1, 4096, 8, 1, 1.0)) == 83_886_080


def test_weights_match_training_convention_when_kv_heads_split():
    for tp, pp in [(1, 1), (2, 1), (8, 1), (4, 2), (8, 4)]:
        lin, other = weight_params_per_gpu(MODEL, tp, pp)
        want = params_per_gpu(MODEL, Layout(tp=tp, pp=pp))
        assert float(lin + other) == pytest.approx(float(want), rel=1e-6)


def test_memory_falls_with_tp():
    wl = InferenceWorkload(batch=16, prompt_len=2048, gen_len=256, precision=1)
    r = rates(h100(), 1)
    mem = jax.jit(serving_memory, static_argnums=())
    totals = [float(mem(MODEL, wl, tp, 1, r).total_bytes) for tp in (1, 2, 4, 8, 16)]
    assert all(b < a for a, b in zip(totals, totals[1:]))
    kv = [float(mem(MODEL, wl, tp, 1, r).kv_bytes) for tp in (1, 2, 4, 8, 16)]
    assert kv[:4] == [kv[0] / t for t in (1, 2, 4, 8)] and kv[4] == kv[3]


def test_fp8_weights_are_about_half():
    wl1 = InferenceWorkload(batch=1, prompt_len=128, gen_len=128, precision=1)
    wl8 = InferenceWorkload(batch=1, prompt_len=128, gen_len=128, precision=2)
    w16 = float(serving_memory(MODEL, wl1, 8, 1, rates(h100(), 1)).weights_bytes)
    w8 = float(serving_memory(MODEL, wl8, 8, 1, rates(h100(), 2)).weights_bytes)
    assert 0.5 < w8 / w16 < 0.56      # embeddings and LM head stay 16-bit
