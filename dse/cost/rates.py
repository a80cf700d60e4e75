"""Achieved rates of one design point: the throttled, efficiency-derated peaks that
every cost function of a training step uses (computed once per point).

* ``peak_flops_per_s`` by precision: fp32 runs on TF32 tensor cores, bf16/fp16 on the
  16-bit path, fp8 linears on the FP8 path (attention stays bf16, as Transformer Engine
  does; NVIDIA TE docs, "Using FP8 with Transformer Engine").
* serving's fp4 codes 3 (NVFP4) and 4 (MXFP4) run the linears on the fp4 peak with the
  fp4 GEMM efficiency ``eff_gemm_fp4`` (:mod:`dse.spec.efficiency` ``gemm_fp4``: fp8's
  fraction of peak times the fp4 / fp8 ratio GEMM microbenchmarks measure on B200, not
  fitted to a serving row) and ``linear_bytes`` = 0.5 + block
  scales (:func:`linear_el_bytes`); attention and the LM head stay 16-bit.
* training's mxfp8 (code 5, TE ``MXFP8BlockScaling``) runs the linears on the fp8 peak at
  ``eff_gemm_fp8 x MXFP8_OVER_FP8`` (0.951: the block-scaled GEMMs' measured ratio,
  :mod:`dse.spec.efficiency`), ``linear_bytes`` 1 + 1/32.
* ``exp_per_s``: the softmax's exponential rate (:func:`exp_rate`), the special-function
  bound of fused attention (:mod:`dse.cost.attention`).
* throttle: ``x_eff = x (1 - throttle)`` on HBM bandwidth, and on clock-derived rates
  when ``throttle_clock`` (dse.spec.hardware.effective).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from dse.spec.efficiency import MXFP8_OVER_FP8
from dse.spec.hardware import Hardware, effective


# fp4 block scales: bytes per element on top of the 0.5-byte e2m1 value (dse.spec.layout)
NVFP4_BYTES = 0.5 + 1.0 / 16.0     # one fp8 (e4m3) scale per 16 elements
MXFP4_BYTES = 0.5 + 1.0 / 32.0     # one e8m0 scale per 32 elements
MXFP8_BYTES = 1.0 + 1.0 / 32.0     # e4m3 with one e8m0 scale per 32 elements (training mxfp8)


def linear_el_bytes(precision, act_bytes):
    """Bytes per linear-layer weight / input element: fp8 1, NVFP4 0.5 + 1/16, MXFP4
    0.5 + 1/32, MXFP8 1 + 1/32, else the activation size."""
    return jnp.where(precision == 2, 1.0, jnp.where(precision == 3, NVFP4_BYTES,
                     jnp.where(precision == 4, MXFP4_BYTES,
                               jnp.where(precision == 5, MXFP8_BYTES, act_bytes))))


def low_precision(precision):
    """1.0 where a training run's linears run quantized (fp8, NVFP4 = code 3 or MXFP8 =
    code 5), else 0.0."""
    return jnp.where(precision >= 2, 1.0, 0.0)


# Transformer Engine's activation cast per element, 16-bit in (2 B read):
# * fp8 (current / delayed scaling): read 2, write 1;
# * NVFP4 (``NVFP4BlockScaling``, TE >= 2.7; NVIDIA, "Pretraining Large Language Models with
#   NVFP4", arXiv:2509.25149 §4 and TE docs "Using FP8 and FP4 with Transformer Engine"):
#   two-level scaling needs the tensor's global amax first (read 2), then one fused
#   kernel writes the row-wise copy for the forward / dgrad GEMM and the column-wise one,
#   with the 16-point random Hadamard transform applied, for wgrad (read 2, write 2 x
#   NVFP4_BYTES).
# * MXFP8 (``MXFP8BlockScaling``): no global amax; one TMA kernel reads the tensor once and
#   writes both the row-wise and the column-wise copy, each 1 B plus one e8m0 scale per 32
#   (TE ``common/cast/mxfp8/quantize_mxfp8.cuh``; TE docs, MXFP8: the two "must be quantized
#   independently"), read 2, write 2 x MXFP8_BYTES.  Not fused into the preceding norm by
#   default (``csrc/extensions/normalization.cpp``: full fusion only with
#   NVTE_NORM_FWD_USE_CUDNN), so every cast pays it.
FP8_CAST_BYTES = 3.0
NVFP4_CAST_BYTES = 2.0 + 2.0 + 2.0 * NVFP4_BYTES
MXFP8_CAST_BYTES = 2.0 + 2.0 * MXFP8_BYTES


def quant_cast_bytes(precision):
    """HBM bytes per element of one activation cast (above): 3 for fp8, 5.125 for NVFP4,
    4.0625 for MXFP8, 0 for 16-bit runs."""
    return jnp.where(precision == 2, FP8_CAST_BYTES, jnp.where(precision == 3, NVFP4_CAST_BYTES,
                     jnp.where(precision == 5, MXFP8_CAST_BYTES, 0.0)))


class Rates(NamedTuple):
    peak_16_flops_per_s: object     # attention / non-fp8 matmuls (tf32 when precision 0)
    peak_linear_flops_per_s: object  # linear layers (fp8 when precision 2)
    eff_linear: object
    hbm_bw_bytes_per_s: object       # achieved (eff_hbm) and throttled
    hbm_bw_raw_bytes_per_s: object   # throttled only: the GEMM roofline uses the raw rate
    l2_bw_bytes_per_s: object
    act_bytes: object                # bytes per activation element
    linear_bytes: object             # bytes per GEMM input element
    exp_per_s: object = 0.0          # softmax exponentials per second (0: not modelled)


def rates(hw: Hardware, precision) -> Rates:
    is32 = precision == 0
    mx8 = precision == 5                      # MXFP8 training: the fp8 path, block-scaled
    is8 = (precision == 2) | mx8
    is4 = (precision == 3) | (precision == 4)
    p16 = jnp.where(is32, hw.peak_tf32_flops_per_s, hw.peak_bf16_flops_per_s)
    p_lin = jnp.where(is8, hw.peak_fp8_flops_per_s, jnp.where(is4, hw.peak_fp4_flops_per_s, p16))
    p16_e, hbm_e, l2_e = effective(hw, p16)
    p_lin_e, _, _ = effective(hw, p_lin)
    act_bytes = jnp.where(is32, 4.0, 2.0)
    return Rates(
        peak_16_flops_per_s=p16_e,
        peak_linear_flops_per_s=p_lin_e,
        eff_linear=jnp.where(is4, hw.eff_gemm_fp4,
                             jnp.where(is8, hw.eff_gemm_fp8 * jnp.where(mx8, MXFP8_OVER_FP8, 1.0),
                                       hw.eff_gemm)),
        hbm_bw_bytes_per_s=hbm_e * hw.eff_hbm,
        hbm_bw_raw_bytes_per_s=hbm_e,
        l2_bw_bytes_per_s=l2_e,
        act_bytes=act_bytes,
        linear_bytes=linear_el_bytes(precision, act_bytes),
        exp_per_s=exp_rate(hw),
    )


def sm_clock_rate(hw: Hardware, per_sm_clk):
    """A per-SM-per-clock throughput over the whole GPU, ``per_sm_clk x num_sms x clock``,
    derated with the clock as the tensor peak is (:func:`dse.spec.hardware.effective`):
    the SFUs' exponentials (:func:`exp_rate`), the CUDA cores' 4-bit weight unpacking
    (:func:`dse.infer.moe_serving.w4a16_dequant_bw`)."""
    return effective(hw, per_sm_clk * hw.num_sms * hw.clock_hz)[0]


def exp_rate(hw: Hardware):
    """Exponentials per second of the special-function units: ``sfu_ex2_per_sm_clk x
    num_sms x clock``, derated with the clock as the tensor peak is
    (:func:`dse.spec.hardware.effective`).  H100 SXM 16 x 132 x 1.83 GHz = 3.9e12 (the
    "3.9 TFLOPS of special functions" of FlashAttention-3, arXiv:2407.08608 §3.1); B200 16 x
    148 x 1.86 GHz = 4.4e12 and GB300 32 x 152 x 2.01 GHz = 9.8e12 (NVIDIA, "Inside NVIDIA
    Blackwell Ultra", Table: SFU EX2 5 and 10.7 TeraExponentials/s at full clock and 160 SMs;
    NVIDIA, "Making Softmax More Efficient with NVIDIA Blackwell Ultra", MUFU.EX2
    microbenchmark: GB200 4,943, GB300 10,024 Gop/s).  0 where the rate is not modelled."""
    return sm_clock_rate(hw, hw.sfu_ex2_per_sm_clk)
