"""The Ada cards (L40S, L4) and the H200 NVL: their datasheet peaks agree with the SM
count, clock and tensor rate per SM the catalog states, the ``ada`` generation carries
Ampere's kernel fractions (dse.spec.efficiency, ``ada``), and a serving row naming one of
them is predicted, not refused."""

from pathlib import Path

import pandas as pd
import pytest

from dse.predict import predict_frame
from dse.spec.efficiency import GENERATIONS
from dse.spec.hardware import catalog
from dse.spec.power import REFERENCE

# dense 16-bit tensor FLOP per SM per clock: Ada professional parts 1024, Hopper 4096
PER_SM_CLK = {"l40s": 1024.0, "l4": 1024.0, "h200-nvl-141gb": 4096.0}


@pytest.mark.parametrize("name", sorted(PER_SM_CLK))
def test_dense_peaks_follow_sms_x_clock(name):
    hw = catalog()[name]
    derived = float(hw.num_sms) * PER_SM_CLK[name] * float(hw.clock_hz)
    assert float(hw.peak_bf16_flops_per_s) == pytest.approx(derived, rel=0.01)
    # fp8 is twice the 16-bit rate (the L40S datasheet prints 733 dense fp8 beside 362.05 bf16: 1.2 %)
    assert float(hw.peak_fp8_flops_per_s) == pytest.approx(2.0 * float(hw.peak_bf16_flops_per_s), rel=0.015)
    assert float(hw.peak_fp4_flops_per_s) == 0.0            # no fp4 tensor cores before Blackwell


def test_ada_carries_amperes_kernel_fractions_and_no_power_derate():
    assert GENERATIONS["ada"] == GENERATIONS["ampere"]
    for name in ("l40s", "l4"):
        hw = catalog()[name]
        assert hw.generation == "ada" and float(hw.power_clock) == 1.0
        assert float(hw.gemm_cluster) == 1.0                 # no TMA multicast on sm89


def test_h200_nvl_is_the_h200s_memory_at_the_h100_nvls_clock():
    cat = catalog()
    nvl, sxm, h100_nvl = cat["h200-nvl-141gb"], cat["h200-sxm-141gb"], cat["h100-nvl-94gb"]
    assert float(nvl.hbm_bytes) == float(sxm.hbm_bytes)
    assert float(nvl.hbm_bw_bytes_per_s) == float(sxm.hbm_bw_bytes_per_s)
    assert float(nvl.peak_bf16_flops_per_s) == float(h100_nvl.peak_bf16_flops_per_s)
    # 600 W: the cube law puts its sustained clock at 0.923 of the 700 W SXM's, above the
    # conservative 1.545 GHz its datasheet peak is quoted at (dse.spec.power); 400 W H100 NVL below
    ref = REFERENCE["hopper"]
    cube = ((600.0 - ref.static_w) / (ref.tdp_w - ref.static_w)) ** (1 / 3)
    assert float(nvl.power_clock) == pytest.approx(cube * ref.clock_hz / float(nvl.clock_hz))
    assert ref.max_boost_hz / float(nvl.clock_hz) > float(nvl.power_clock) > 1.0 > float(h100_nvl.power_clock)


def test_serving_rows_on_the_new_cards_are_predicted(tmp_path):
    cols = pd.read_csv(Path(__file__).parents[1] / "data" / "published_serving.csv", nrows=1).columns
    base = {c: None for c in cols}
    rows = [dict(base, id=f"r{i}", model="meta-llama/Llama-3.1-8B-Instruct", hardware=hw, gpus=1, tp=1,
                 pp=1, precision=prec, engine="vllm (v0.10.1)", scenario="concurrency",
                 batch_or_concurrency=16, input_len=1024, output_len=256, replicas=1)
            for i, (hw, prec) in enumerate([("NVIDIA L40S", "fp8"), ("L4", "fp8"), ("H200 NVL", "bf16"),
                                            ("L40S", "bf16")])]
    path = tmp_path / "rows.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    out = predict_frame(pd.read_csv(path), str(path))
    assert list(out["status"]) == ["ok"] * 4
    tpot = dict(zip(out["id"], out["predicted_tpot_ms"]))
    # decode streams the weights: 300 GB/s (L4) is slower than 864 GB/s (L40S), which is
    # slower than 4.8 TB/s (H200 NVL); bf16 weights are twice the fp8 bytes
    assert tpot["r1"] > tpot["r0"] > tpot["r2"]
    assert tpot["r3"] > tpot["r0"]


def test_rtx_pro_6000_runs_the_mma_sync_family_not_tcgen05():
    """sm120 has no tcgen05 / tensor memory and no TMA multicast: the RTX PRO 6000 takes the
    warp-level mma.sync family's fractions (Ampere's, as Ada), 128x128 tiles, cluster 1, and the
    fp8 wgrad transpose Transformer Engine keeps on 12.x (dse.spec.efficiency ``rtx_blackwell``)."""
    hw, b200 = catalog()["rtx-pro-6000"], catalog()["b200"]
    amp = GENERATIONS["ampere"]
    assert hw.generation == "rtx_blackwell"
    assert (float(hw.eff_gemm), float(hw.eff_gemm_fp8)) == (amp.gemm, amp.gemm_fp8)
    assert float(hw.eff_gemm_fp4) / float(hw.eff_gemm_fp8) == pytest.approx(
        float(b200.eff_gemm_fp4) / float(b200.eff_gemm_fp8))            # the block-scaled fp4 ratio
    assert (float(hw.tile_m), float(hw.tile_n), float(hw.gemm_cluster)) == (128.0, 128.0, 1.0)
    assert float(hw.fp8_transpose) == 1.0 and float(b200.fp8_transpose) == 0.0
