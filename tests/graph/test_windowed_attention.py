"""Sliding-window and chunked attention: the HF parse, and the one windowed cost (never
more than full causal attention; equal to it while the sequence fits the window) in the
training graph, the serving graph and the KV cache."""

import json

import numpy as np
import pytest

from dse.cost.attention import windowed_causal_fraction, windowed_kv_len
from dse.graph.ops import KVRead, bytes_moved, causal_fraction, flops, time_s, with_window
from dse.infer.kv_cache import kv_cache_bytes
from dse.infer.prefill import prefill_attention
from dse.cost.rates import rates
from dse.errors import InputError
from dse.spec.hardware import get_hardware
from dse.spec.model import attention_window, get_model, model_from_hf_config

HW = get_hardware("h100-sxm-80gb")
R = rates(HW, 1)


def _full(m):
    return m.replace(sliding_window=0, attention_chunk_size=0, window_layers=0)


def test_catalog_windows_match_the_hf_configs():
    oss, scout = get_model("gpt-oss-120b"), get_model("llama4-scout")
    assert (oss.sliding_window, oss.window_layers) == (128, 18)
    assert (scout.attention_chunk_size, scout.window_layers) == (8192, 36)
    assert attention_window(get_model("llama3-70b")) is None
    assert attention_window(get_model("mixtral-8x7b")) is None
    for f, name in (("gpt-oss-120b", "gpt-oss-120b"), ("llama4-scout", "llama4-scout"),
                    ("llama4-maverick", "llama4-maverick")):
        m = model_from_hf_config(f"tests/data/hf/{f}.json")
        cat = get_model(name)
        assert (m.sliding_window, m.attention_chunk_size, m.window_layers) == (
            cat.sliding_window, cat.attention_chunk_size, cat.window_layers)


def _write(tmp_path, **kw):
    base = {"num_hidden_layers": 8, "hidden_size": 512, "num_attention_heads": 8,
            "num_key_value_heads": 2, "vocab_size": 1000, "intermediate_size": 1024,
            "hidden_act": "silu", "rms_norm_eps": 1e-5}
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**base, **kw}))
    return p


@pytest.mark.parametrize("kw, want", [
    ({"model_type": "mistral", "sliding_window": 4096}, (4096, 0, 8)),
    ({"model_type": "mixtral", "sliding_window": None}, (0, 0, 0)),
    ({"model_type": "qwen3", "sliding_window": 4096, "use_sliding_window": False}, (0, 0, 0)),
    ({"model_type": "qwen2", "sliding_window": 4096, "use_sliding_window": True,
      "max_window_layers": 6}, (4096, 0, 2)),
    ({"model_type": "gemma2", "sliding_window": 4096}, (4096, 0, 4)),
    ({"model_type": "gemma3_text", "sliding_window": 1024, "sliding_window_pattern": 4}, (1024, 0, 6)),
    ({"model_type": "gpt_oss", "sliding_window": 128}, (128, 0, 4)),
    ({"model_type": "x", "sliding_window": 128,
      "layer_types": ["sliding_attention"] * 3 + ["full_attention"] * 5}, (128, 0, 3)),
    ({"model_type": "llama4_text", "attention_chunk_size": 8192}, (0, 8192, 6)),
    ({"model_type": "llama4_text", "attention_chunk_size": 8192,
      "no_rope_layers": [1, 0, 1, 0, 1, 0, 1, 0]}, (0, 8192, 4)),
])
def test_hf_window_rules(tmp_path, kw, want):
    m = model_from_hf_config(_write(tmp_path, **kw))
    assert (m.sliding_window, m.attention_chunk_size, m.window_layers) == want


def test_hf_bad_layer_types_is_one_line_error(tmp_path):
    with pytest.raises(InputError, match="layer_types"):
        model_from_hf_config(_write(tmp_path, sliding_window=128, layer_types=["sliding_attention"]))


@pytest.mark.parametrize("window, chunked", [(128, False), (4096, False), (8192, True), (1000, True)])
def test_windowed_fraction_never_above_full_and_equal_within_window(window, chunked):
    s = np.array([16.0, 100.0, 128.0, 1000.0, 4096.0, 8192.0, 8193.0, 20000.0, 131072.0])
    full = causal_fraction(s)
    clipped = np.minimum(full, 1.0)
    win = np.asarray(windowed_causal_fraction(s, clipped, window, chunked))
    assert (win <= clipped + 1e-7).all()
    inside = s <= window
    np.testing.assert_allclose(win[inside], clipped[inside], rtol=1e-6)
    assert (win[s > 2 * window + 256] < clipped[s > 2 * window + 256]).all()
    kv = np.asarray(windowed_kv_len(s, float(window)))
    assert (kv <= s).all() and (kv[inside] == s[inside]).all()


def test_sliding_fraction_tends_to_the_band():
    """Far beyond the window every query tile visits about w + Br keys."""
    s = 1 << 20
    frac = float(windowed_causal_fraction(float(s), 1.0, 128, False))
    assert frac * s == pytest.approx(128 + 128, rel=0.01)


@pytest.mark.parametrize("name", ["gpt-oss-120b", "llama4-scout"])
def test_prefill_and_decode_ops_never_cost_more_than_full(name):
    m = get_model(name)
    keys = attention_window(m).keys
    for S in (64.0, float(keys), 4.0 * keys + 512.0, 65536.0):
        w_op, f_op = prefill_attention(m, 2.0, S, 8), prefill_attention(_full(m), 2.0, S, 8)
        assert w_op.window == keys and f_op.window == 0
        for fn in (lambda o: time_s(o, HW, R), flops, lambda o: bytes_moved(o, HW, R)):
            w, f = float(fn(w_op)), float(fn(f_op))
            assert w <= f * (1 + 1e-6)
            if S <= keys:
                assert w == pytest.approx(f, rel=1e-6)
        kr = KVRead(32.0, 8.0, 1.0, S, 128.0)
        w, f = float(time_s(with_window(kr, m), HW, R)), float(time_s(kr, HW, R))
        assert w <= f * (1 + 1e-6)
        if S <= keys:
            assert w == pytest.approx(f, rel=1e-6)
        else:
            assert w < f


def test_kv_cache_holds_the_window():
    m = get_model("gpt-oss-120b")
    full = _full(m)
    short = float(kv_cache_bytes(m, 1.0, 100.0, 1, 1, 2.0))
    assert short == pytest.approx(float(kv_cache_bytes(full, 1.0, 100.0, 1, 1, 2.0)))
    c = 32768.0
    per = 2.0 * 8 * 64 * 2.0          # K and V, 8 KV heads, head dim 64, bf16
    want = per * (18 * c + 18 * 128)
    assert float(kv_cache_bytes(m, 1.0, c, 1, 1, 2.0)) == pytest.approx(want, rel=1e-6)


def test_training_within_the_window_does_not_move():
    from dse.spec.layout import Layout, Workload
    from dse.train.step import train_step
    m = get_model("gpt-oss-120b").replace(sliding_window=8192)   # seq 4096 fits the window
    lay = Layout(tp=8, pp=1, dp=1, mbs=1, cp=1, ep=8)
    wl = Workload(global_batch=8, seq_len=4096, precision=1)
    run = lambda mm: train_step(mm, wl, lay, HW)
    a, b = run(m), run(_full(m))
    assert float(a.step_time_s) == pytest.approx(float(b.step_time_s), rel=1e-6)
    assert float(a.model_flops) == pytest.approx(float(b.model_flops), rel=1e-6)
    long = Workload(global_batch=8, seq_len=32768, precision=1)  # window 128 < 32768
    oss = get_model("gpt-oss-120b")
    short, ref = train_step(oss, long, lay, HW), train_step(_full(oss), long, lay, HW)
    assert float(short.step_time_s) < float(ref.step_time_s)
    assert float(short.model_flops) < float(ref.model_flops)
