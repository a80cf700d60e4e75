"""FlashAttention-2 head-dim tiles (flash-attn 2.x flash_api.cpp ``head_size_rounded``)."""
from hypothesis import given, settings, strategies as st

from dse.cost.attention import flash_head_dim


def test_fa2_tiles_and_native_alignment():
    for d, fa2, native in [(64, 64, 64), (80, 96, 80), (96, 96, 96), (100, 128, 104),
                           (128, 128, 128), (192, 192, 192), (200, 256, 200), (256, 256, 256)]:
        assert float(flash_head_dim(d, True)) == fa2
        assert float(flash_head_dim(d)) == native


@settings(deadline=None)   # the first example pays JAX's op dispatch warm-up (326 ms seen under xdist)
@given(st.integers(1, 256))
def test_padding_never_shrinks_and_fa2_at_least_native(d):
    nat, fa2 = float(flash_head_dim(d)), float(flash_head_dim(d, True))
    assert d <= nat <= fa2 <= 256
    assert nat % 8 == 0 and (fa2 % 32 == 0)


def test_fa2_run_with_head_dim_80_costs_more_attention_than_native_padding():
    """The same layout, head dim 80: the FA2-class run's attention core is charged on 96
    columns (more time than on the 80 the native kernel computes, at equal efficiency)."""
    import dataclasses
    import jax
    from dse.spec.hardware import get_hardware
    from dse.spec.layout import ATTENTION_FA2, ATTENTION_NATIVE, Layout, Workload
    from dse.spec.model import get_model
    from dse.train.step import train_step
    m = dataclasses.replace(get_model("llama3-8b"), kv_channels=80)
    hw = get_hardware("a100-sxm-80gb")      # Ampere: eff_attn_fa2 = 1, so only the padding differs
    lay = Layout(tp=1, pp=1, dp=8, cp=1, ep=1, mbs=1, vpp=1, recompute=0, zero=1, sp=0)
    t = {k: float(jax.jit(train_step)(m, Workload(global_batch=64, seq_len=4096, attention=k),
                                      lay, hw).step_time_s) for k in (ATTENTION_FA2, ATTENTION_NATIVE)}
    assert t[ATTENTION_FA2] > t[ATTENTION_NATIVE]
