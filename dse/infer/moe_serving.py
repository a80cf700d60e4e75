"""The parts of a serving MoE layer beyond its expert GEMMs: the token routing passes
(top-k, expert sort, permute, finalize) and the load imbalance of expert parallelism.
:func:`dse.infer.forward.forward_ops` adds both to the layer's operator list.

**Routing passes** (one MoE layer, one GPU; ``T`` tokens of the GPU's attention rank, ``P``
token-expert pairs its local experts receive, ``h`` hidden, ``E`` experts, ``el`` the
activation element size).  Every engine of the data runs the same four steps around the
two grouped GEMMs:

1. top-k (softmax / sigmoid + selection) over the router logits: read ``T E`` fp32
   logits (TensorRT-LLM ``cpp/tensorrt_llm/kernels/mixtureOfExperts/moe_kernels.cu``
   routing kernels; vLLM ``csrc/moe/topk_softmax_kernels.cu`` ``topk_softmax``);
2. sort the pairs by expert and build the per-expert offsets the grouped GEMM reads
   (TensorRT-LLM ``threeStepBuildExpertMapsSortFirstToken``; vLLM
   ``moe_align_block_size``): ``O(P)`` integers, negligible bytes;
3. permute: gather each token's row once per selected local expert into the expert-major
   buffer, read ``T h``, write ``P h`` at the GEMM input size ``q`` (fp8 1, NVFP4
   0.5 + scales: the rows are quantized before they are expanded; TensorRT-LLM
   ``expandInputRowsKernel``; vLLM's
   Triton ``fused_moe_kernel`` gathers through ``sorted_token_ids`` inside the GEMM, so
   there the copy is the GEMM's own A-read -- charged here once for all engines, as the
   global constant below is);
4. finalize: the top-k weighted sum of each token's expert outputs back into token order,
   read ``P h``, write ``T h`` at the activation size ``el`` (TensorRT-LLM ``finalizeMoeRoutingKernel``; vLLM
   ``moe_sum`` / ``ops.moe_sum``).

  ``bytes = h (q + el) (T + P) + 4 T E``,   ``MOE_ROUTING_KERNELS`` = 4 launches.

  Under attention DP the fused kernel runs over the ``R = T_g`` rows the all-gather
  brought (below): its finalize writes all of them (TensorRT-LLM
  ``finalizeMoeRoutingKernel`` loops over every original row, summing the row's local
  experts), and the permute reads at most ``min(R, P)`` gathered rows:
  ``bytes = h q (min(R, P) + P) + h el (P + R) + 4 T E`` (the top-k ran on the rank's own
  ``T`` tokens before the gather).

The activation between the GEMMs is the layer's activation pass already
(:mod:`dse.infer.forward`, ``ffn (1 + gated) + ffn`` per token with ``ffn`` carrying
``k``).  Overlap: none (memory-bound kernels on the layer's one stream).

**Attention-DP token exchange** (:func:`dp_gather_bytes`).  With ``dp`` attention ranks
the engines of the data do not run DeepEP-style all-to-alls by default: TensorRT-LLM's
``CutlassFusedMoE.forward_chunk`` (``tensorrt_llm/_torch/modules/fused_moe/fused_moe_cutlass.py``,
``run_post_quant_allgather = self.use_dp and self.parallel_size > 1``) quantizes the rank's
tokens (NVFP4: ``fp4_quantize`` before the gather; FP8 per-tensor: ``static_quantize_e4m3``),
all-gathers them with their top-k expert ids (int32) and weights (fp32) over the group
(``allgather([x, x_sf, token_selected_experts, token_final_scales])``), runs
``torch.ops.trtllm.fused_moe`` on all gathered rows with the GPU's local experts, and
returns each rank its tokens' sums with ``reducescatter`` of the output (the activation
dtype); the DeepSeek-R1 throughput blog (``docs/source/blogs/tech_blog/blog3_Optimizing_
DeepSeek_R1_Throughput_on_NVIDIA_Blackwell_GPUs.md``, "FP4 AllGather Optimizations")
describes the same exchange.  vLLM's default ``--all2all-backend allgather_reducescatter``
(docs.vllm.ai "Expert Parallel Deployment", v0.12 on: "Default backend ... Standard all2all
using allgather/reducescatter primitives"; DeepEP / pplx are opt-in) and SGLang's DP-attention gather / scatter (without ``--moe-a2a-backend deepep``) are the
same pattern in 16 bit.  Both are NCCL calls (TensorRT-LLM ``cpp/tensorrt_llm/thop/allgatherOp.cpp``,
``reducescatterOp.cpp``: ``ncclAllGather`` / ``ncclReduceScatter``, or one ``ncclReduce``
per root inside an NCCL group when the ranks' token counts differ), so the graph costs
them with NCCL's protocol model (``Collective.protocols``), not the one-shot bound of the
engines' own all-reduce kernels.  Per MoE layer: an all-gather of ``T_g (h q + 8 k)`` bytes (the full
gathered buffer, nccl-tests convention; ``q`` the GEMM input element size with its block
scales, an MXFP4-expert checkpoint's mxfp8 ``1 + 1/32``) and a reduce-scatter of
``T_g h el``.  DeepSeek's FP8 block-scale path gathers 16-bit rows
(``use_deepseek_fp8_block_scale``: the quantization runs inside ``fused_moe``); the graph,
which does not see the scaling recipe, charges ``q`` = 1 there.

**Expert-parallel load imbalance.**  With ``ep`` > 1 the ``N = T_g k`` pairs of the MoE
group fall on the ``ep`` ranks multinomially (uniform routing) and the combine is a
barrier, so the layer lasts as long as the most loaded rank: the local pair count scaled
by ``1 + sqrt(2 ln(ep) (ep - 1) / N)`` (:func:`dse.cost.load_balance.ep_load_factor`, the
derivation there; shared with training).  It is large only where few pairs are in flight
(decode of a small batch: N = 512 pairs over 8 ranks gives 1.19) and tends to 1 for big
batches; real routers are more skewed (DeepSeek-V3's EPLB, arXiv:2412.19437 sec. 3.4).
Where decode streams expert *weights* the count that matters is the busiest rank's distinct
experts touched, the same bound on hypergeometric counts
(:func:`dse.cost.load_balance.ep_busiest_experts`), which vanishes once every expert is hit.

**MXFP4-expert checkpoints** (``Model.mxfp4_experts``: gpt-oss ships its routed experts
in MXFP4 and every other weight in bf16, HF ``quantization_config`` ``modules_to_not_convert``
= attention, router, embeddings, LM head).  Served quantized (precision fp8 or fp4: the
published tables label these runs "FP4" on Blackwell and "FP8" on Hopper), the engine does
not requantize the checkpoint; TensorRT-LLM ``examples/models/core/gpt_oss/README.md``
("MoE Support Matrix"): "the weights are pre-quantized to mxfp4.  The activation can be in
either bf16 (Hopper) or mxfp8 (Blackwell)" -- Hopper bf16 x mxfp4 (TRITON / CUTLASS
backends: the 4-bit weights are dequantized to bf16 in the GEMM main loop, W4A16),
Blackwell mxfp8 x mxfp4 (CUTLASS / TRTLLM backends, ``W4A8MXFP4MXFP8`` in
``tensorrt_llm/_torch/modules/fused_moe/quantization.py``).  A tensor-core MMA runs at the
rate of its wider operand (Blackwell ``tcgen05.mma`` kind ``f8f6f4`` at the FP8 rate;
Hopper has no 4-bit MMA, so bf16 ``wgmma``), hence :func:`mxfp4_expert_rates`:

* expert GEMMs: weights ``MXFP4_BYTES`` (0.5 + 1/32) per element, peak = the fp8 peak on a
  GPU with fp4 tensor cores (W4A8), else the bf16 peak (W4A16), with that path's GEMM
  efficiency (``eff_gemm_fp8`` / ``eff_gemm``);
* every other linear (QKV, out projection, router): bf16 (2-byte weights, bf16 peak,
  ``eff_gemm``) -- :func:`bf16_linear_rates`;
* their inputs are not cast (no fp8 / fp4 quantize pass) except the experts' inputs, the
  MoE input and the intermediate, cast to mxfp8 (:func:`mxfp4_cast_bytes`).

**The W4A16 path dequantizes on the CUDA cores.**  A Hopper W4A16 expert GEMM unpacks every
4-bit weight to bf16 in registers before the MMA (vLLM's Marlin MoE,
``csrc/moe/marlin_moe_wna16/marlin_template.h`` and ``csrc/quantization/gptq_marlin/dequant.h``
``dequant<..., kFE2M1f>``: mask / shift / ``lop3`` then a ``__hmul2`` per pair; OpenAI's Triton
``matmul_ogs`` upcasts the same way), so the weight stream is bounded by a SIMT rate, not by
HBM: :data:`W4A16_DEQUANT_EL_PER_SM_CLK` elements per SM per clock, the expert weights'
bandwidth capped at ``r_deq x SMs x clock x MXFP4_BYTES`` (:func:`mxfp4_expert_rates`).  The
rate is read off measured MoE kernels, not off any serving row: NVIDIA AIConfigurator's vLLM
0.24 MoE tables (``aic-core/src/aiconfigurator_core/systems/data/{h100,h200}_sxm/moe/vllm/
0.24.0/moe_perf.parquet``, balanced routing, TP 1, no EP, 8-512 tokens: every expert touched,
prefill not yet compute-bound) give medians of 19.6 / 19.6 elements per SM per clock for
Marlin's MXFP4 experts (``..._marlin_marlinexperts``, a 3584 x 3072, 896-expert top-16 shape)
and 17.9 / 19.2 for Triton's (``..._oaitritonmxfp4expertsmonolithic``, gpt-oss-120b's 2880 x
2880, 128-expert top-4) on H100 / H200 -- the same on both cards although H200 has 1.43x the
HBM bandwidth (4.8 against 3.35 TB/s), which is what a SIMT-bound stream looks like.  At TP >
1 the per-layer matrices shrink and the same tables fall to 12-17 elements: a fixed 15-45 us
per measured MoE layer, of which the model charges ~14 us (its routing kernels and the
launches; the rest is an open item, docs/accuracy.md).  Only the W4A16 path is capped (a
GPU without fp4 tensor cores); W4A8 (Blackwell) converts nothing on the CUDA cores.
Measured on Hopper only; Ampere, Ada and CDNA serving an MXFP4 checkpoint carry the same
per-SM rate, unmeasured.

``dse.cost.gemm`` prices A, B and C at one element size; the experts use the weights'
(their decode cost is the weight stream), which undercounts the 1- or 2-byte activation
reads of prefill-sized passes (compute-bound there).  A bf16 serving row (precision 1)
keeps the dequantized bf16 model: nothing changes.

Units: bytes, tokens; pure JAX on scalars (vmapped with the rest of the graph).
"""

from __future__ import annotations

import jax.numpy as jnp

from dse.cost.rates import MXFP4_BYTES, MXFP8_BYTES, Rates, sm_clock_rate
from dse.spec.hardware import Hardware, effective
from dse.spec.layout import PRECISION_FP8

MOE_ROUTING_KERNELS = 4.0      # top-k, expert sort / offsets, permute, finalize (docstring)
# MXFP4 weights a W4A16 expert GEMM dequantizes per SM per clock (module docstring: the
# AIConfigurator H100 / H200 MoE kernel tables, Marlin 19.6 / 19.6, Triton 17.9 / 19.2)
W4A16_DEQUANT_EL_PER_SM_CLK = 19.5
ROUTER_LOGIT_BYTES = 4.0       # the router's logits are read in fp32 by the top-k kernel


def routing_bytes(tokens, local_pairs, hidden, experts, el_bytes, q_bytes, rows=None):
    """HBM bytes of one MoE layer's routing passes on one GPU (module docstring):
    ``h (q + el) (T + P) + 4 T E``; ``tokens`` T of the rank, ``local_pairs`` P of its
    experts, ``q_bytes`` the GEMM input element size.  ``rows``: the rows the fused
    kernel runs over when they are not the rank's own (attention DP: the gathered
    ``T_g``), ``h q (min(R, P) + P) + h el (P + R) + 4 T E``; None = ``T``."""
    logits = ROUTER_LOGIT_BYTES * tokens * experts
    if rows is None:
        return (q_bytes + el_bytes) * hidden * (tokens + local_pairs) + logits
    return (q_bytes * hidden * (jnp.minimum(rows, local_pairs) + local_pairs)
            + el_bytes * hidden * (local_pairs + rows) + logits)


ROUTE_META_BYTES = 8.0         # per token and selected expert: int32 expert id + fp32 weight


def dp_gather_bytes(group_tokens, hidden, top_k, q_bytes, precision, mxfp4_experts=0.0):
    """Bytes of one attention-DP all-gather of a MoE layer (module docstring): the
    ``T_g`` gathered rows at the GEMM input element size ``q`` (an MXFP4-expert
    checkpoint served quantized: mxfp8, :data:`MXFP8_BYTES`) plus ``8 k`` bytes of
    expert ids and weights each, ``T_g (h q + 8 k)``; the full buffer (nccl-tests
    convention)."""
    q = jnp.where((mxfp4_experts > 0) & (precision >= PRECISION_FP8), MXFP8_BYTES, q_bytes)
    return group_tokens * (hidden * q + ROUTE_META_BYTES * top_k)


def _pick(cond, a: Rates, b: Rates) -> Rates:
    """``a`` where ``cond`` else ``b``, field by field."""
    return Rates(*(jnp.where(cond, x, y) for x, y in zip(a, b)))


def w4a16_dequant_bw(hw: Hardware):
    """Bytes/s of MXFP4 weights a W4A16 GEMM can dequantize on ``hw``'s CUDA cores (module
    docstring): ``W4A16_DEQUANT_EL_PER_SM_CLK x num_sms x clock x MXFP4_BYTES``, the clock
    the SKU sustains (``power_clock``, and a clock throttle where one applies:
    :func:`dse.cost.rates.sm_clock_rate`)."""
    return sm_clock_rate(hw, W4A16_DEQUANT_EL_PER_SM_CLK) * MXFP4_BYTES


def mxfp4_expert_rates(r: Rates, hw: Hardware, precision, mxfp4_experts) -> Rates:
    """Rates of the expert GEMMs of an MXFP4-expert checkpoint served quantized (module
    docstring): W4A8 (fp8 peak, ``eff_gemm_fp8``) where the GPU has fp4 tensor cores, else
    W4A16 (bf16 peak, ``eff_gemm``, the weight stream capped at :func:`w4a16_dequant_bw`),
    weights ``MXFP4_BYTES``; ``r`` unchanged unless ``mxfp4_experts`` and ``precision`` >=
    fp8."""
    w4a8 = hw.peak_fp4_flops_per_s > 0
    peak_fp8, _, _ = effective(hw, hw.peak_fp8_flops_per_s)
    mx = r._replace(peak_linear_flops_per_s=jnp.where(w4a8, peak_fp8, r.peak_16_flops_per_s),
                    eff_linear=jnp.where(w4a8, hw.eff_gemm_fp8, hw.eff_gemm) * jnp.ones_like(r.eff_linear),
                    linear_bytes=MXFP4_BYTES * jnp.ones_like(r.linear_bytes),
                    hbm_bw_bytes_per_s=jnp.where(w4a8, r.hbm_bw_bytes_per_s,
                                                 jnp.minimum(r.hbm_bw_bytes_per_s, w4a16_dequant_bw(hw))))
    return _pick((mxfp4_experts > 0) & (precision >= PRECISION_FP8), mx, r)


def bf16_linear_rates(r: Rates, hw: Hardware, precision, mxfp4_experts) -> Rates:
    """Rates of the non-expert linears of an MXFP4-expert checkpoint served quantized:
    bf16 (peak, ``eff_gemm``, 2-byte weights; module docstring); ``r`` unchanged otherwise."""
    bf = r._replace(peak_linear_flops_per_s=r.peak_16_flops_per_s,
                    eff_linear=hw.eff_gemm * jnp.ones_like(r.eff_linear),
                    linear_bytes=r.act_bytes * jnp.ones_like(r.linear_bytes))
    return _pick((mxfp4_experts > 0) & (precision >= PRECISION_FP8), bf, r)


def mxfp4_cast_bytes(tokens, hidden, ffn, el_bytes):
    """Quantize-pass bytes of an MXFP4-expert checkpoint's layer (module docstring): the
    MoE input (``h``) and the experts' intermediate (``ffn``, k/tp wide) cast to mxfp8,
    read ``el``, write 1 + 1/32 scale bytes per element.  Charged on every GPU (the
    operator graph does not see the hardware): on Hopper, whose W4A16 path keeps bf16
    activations, it over-counts a pass of ``~3 T (h + ffn)`` bytes."""
    return (el_bytes + MXFP8_BYTES) * tokens * (hidden + ffn)
