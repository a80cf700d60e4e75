"""Global, per-GPU-generation efficiency constants — the only fitted numbers in dse.

Each is a *physically meaningful* achieved fraction of a datasheet peak, the same for
every model, layout and source (never keyed by model, row or paper).  The value, what it
means and where it comes from:

``gemm``
    Fraction of dense tensor-core peak that GEMMs sustain *inside a training run*, once
    tile and wave quantization are accounted for separately (:mod:`dse.cost.gemm`).
    Two physical factors: the kernel's efficiency at its clock (~0.85-0.9 for large
    cuBLAS GEMMs) and the sustained clock under the board power cap during back-to-back
    tensor-core work (A100 400 W and H100 700 W both drop well below the boost clock
    the datasheet peak is quoted at; H100 SXM bf16 GEMM benchmarks reach ~650-750 of
    989 TFLOP/s).  Values chosen by scanning one global value per generation against
    ``../shared/validation/calibration.csv`` (``scripts/calibrate.py``; scan output in
    docs/accuracy.md): Ampere 0.72 (rescanned 0.70 / 0.72 / 0.75 against both
    calibration.csv and vtrain.csv once collectives carried NCCL's protocol latencies,
    ``dse.cost.collectives``), Hopper 0.68 (jointly with ``attn`` below).
    Blackwell: assumed equal to Hopper until measured runs exist (NOT FITTED).  Checked,
    not changed: the one B200 figure found, bf16 torch.matmul 8192^3 at 1.42 of 2.25 PF =
    0.631 (pytorch/ao PR #2427, 2025-06, ``bench_matmul.py``; 4096^3 0.627, 3072^3 0.672),
    sits below H100 SXM's 797.5 of 989 = 0.806 in the same kind of run
    (zzc0721/torch-performance-test-data issue #79, PyTorch 2.7 cu128), a ratio of 0.78;
    the sustained-clock part of it is 0.93-1.04 (:mod:`dse.spec.power`: B200 1580 / 1856
    MHz under back-to-back tensor load against H100's bounded 0.82-0.92), so the rest is
    kernel maturity on one microbenchmark, too thin a base to move a global constant.
    A second, independent source settles it the other way: the maximum-achievable-matmul
    table of stas00/ml-engineering (``mamf-finder.py``, a brute-force shape search,
    ``compute/accelerator`` and its H200 -> B200 upgrade guide) measures B200 SXM bf16
    1745 of 2250 TFLOP/s = 77.6 % against H100 / H200 SXM 794.5 of 989 = 80.3 % (ratio
    0.97) and fp8 3432.5 of 4500 = 76.3 % against H200 1453.4 of 1979 = 73.4 % (1.04):
    with a mature stack B200 reaches Hopper's fraction of peak within 4 %, so Hopper's
    values stand for Blackwell.  A third, kernel by kernel: Transformer Engine's GEMM
    profiling guide times one layer's twelve GEMMs on a B300 (pre-quantized BF16 13.102 ms
    per layer) and an H200 NVL; this ``gemm`` prices them within 2.4 % on both
    (tests/test_out_of_sample_gemm.py, docs/accuracy.md).  (The mamf-finder table: MI300X
    bf16 781.9 of 1300 = 60.1 % on ROCm 6.2, AMD's own MAF 708 of 1307 = 54 %, ``cdna3`` below.)
    GB200's sustained clock below its 2.06 GHz quoted clock is :mod:`dse.spec.power`'s.
    **B200's SM (B200, GB200) since 2026-12-07: Hopper's values x a measured ratio.** The
    mamf-finder maxima above are each GPU's best shape; a shape-for-shape sweep in one
    harness says otherwise: NVIDIA AIConfigurator's measured GEMM database (TensorRT-LLM
    1.3.0rc20 ``Linear`` under CUDA graphs, the same release on H100, H200, B200 and GB200;
    tests/data/aic_gemm_kernels.csv) puts B200's fraction of peak at 0.8745 (bf16) / 0.8943
    (fp8) of H100's, the median over its 27 shapes with every dimension >= 4096
    (:data:`B200_OVER_H100_GEMM`; 0.84 / 0.81 over all 125 shapes >= 1024).  The same sweep
    gives H200 / H100 1.00 / 1.02 and B200 nvfp4 / fp8 0.756 (``FP4_OVER_FP8`` 0.763): it
    agrees with the constants it does not move.  The catalog's B200 and GB200 entries carry
    :func:`b200_sm_gemm` (0.5947 / 0.5366 / 0.4095); B300 / GB300, Blackwell Ultra's SM,
    keep Hopper's, which Transformer Engine's B300 profiling above prices within 2.4 %.
``gemm_fp8``
    The same for FP8 GEMMs (Transformer Engine, E4M3 forward / E5M2 gradients):
    Hopper 0.60 (~1190 of 1979 TFLOP/s, i.e. 1.85x the bf16 rate), same scan.
``gemm_fp4``
    The same for the 4-bit GEMMs of serving (NVFP4 / MXFP4 weights and activations, the
    ``tcgen05.mma`` ``kind::mxf4nvf4`` path at twice the fp8 rate), as a fraction of the
    dense fp4 peak.  Blackwell: ``gemm_fp8`` x ``FP4_OVER_FP8`` (0.763), NOT FITTED to any
    serving row.  The ratio is the two kernel ceilings cuBLAS(Lt) reaches on one B200 at
    its best shape, each as a fraction of its own dense peak: MXF4 x MXF4 8192^3 5239 of
    9000 TFLOP/s = 0.582 (cuBLASLt 13.3 ``cublasTest``, the table of deepseek-ai/DeepGEMM
    PR #348, 2026-06) against fp8 3432.5 of 4500 = 0.763 (the mamf-finder table cited under
    ``gemm``).  A second pair points the same way and further, but is not like for like:
    vLLM's CUTLASS kernels at the Llama-3.1-8B QKV shape (N 6144, K 4096, M 1024) reach fp8
    2341 of 4500 (vllm-project/vllm PR #19566, "Further tunings for SM100 FP8 CUTLASS
    kernel") and NVFP4 2895 of 9000 (PR #20646, its untuned "before" configs), a ratio of
    0.62.  The physics of the shortfall: a 4-bit MMA tile finishes its K loop in half the
    fp8 time, while the per-tile work beside it
    does not shrink -- the block scales (one e4m3 per 16 elements, staged into tensor
    memory) and the epilogue's tensor-memory -> register -> 16-bit global store of the same
    output tile.  That same per-tile work makes the value per SKU: Blackwell Ultra (B300 /
    GB300) widens the 4-bit datapath 1.5x on the same SM and clock, so its MMA time
    shrinks and the per-tile work does not -- :func:`fp4_efficiency` (0.458 -> 0.410),
    applied where a catalog SKU's dense fp4 FLOP per SM per clock differs from its
    generation's reference (:mod:`dse.spec.power`), and checked against Transformer
    Engine's published B300 NVFP4 GEMM times (model / published 0.93-1.01 per pass with it,
    0.85-0.90 without; tests/test_out_of_sample_gemm.py).  Serving uses it for the fp4
    linears of :func:`dse.cost.rates.rates` and training for NVFP4; an MXFP4-expert
    checkpoint's W4A8 experts run at the fp8 rate with ``gemm_fp8``
    (:mod:`dse.infer.moe_serving`).  ``cdna4`` (MI355X fp4): ``cdna3``'s ``gemm_fp8``
    carried over, unmeasured.  Generations without fp4 tensor cores carry their
    ``gemm_fp8`` (never read: their fp4 peak is 0 and the precision is refused).
``attn``
    Fraction of tensor peak reached by the matmuls of the generation's *native* fused
    attention kernel, *beside* the softmax's exponentials, which the cost model charges on
    their own unit (``sfu`` below).  The values below were measured or fitted end to end
    (tensor cores and exponentials together, head dim 128) and are stored as their
    tensor-core parts: :func:`without_exp`, ``1 / attn = 1 / total - x / 4d`` forward and
    ``1 / (attn attn_bwd) = 1 / total_bwd - x / 10d`` backward, with ``x`` the tensor FLOPs
    per exponential of one SM (Ampere 2048 / 16 = 128, Hopper 4096 / 16 = 256): Hopper's
    fitted 0.50 / 0.425 become 0.667 / 0.697, Ampere's 0.70 / 0.595 become 0.848 / 0.746,
    so at head dim 128 on the reference SKUs every time is unchanged, and other head dims,
    and GPUs whose SFUs did not grow with their tensor cores, now differ as the hardware
    does.  The end-to-end fractions, which the rest of this entry quotes, are those of the
    kernel -- the one Megatron-Core / Transformer Engine runs: TE's
    ``get_attention_backend`` (transformer_engine/pytorch/attention/dot_product_attention/
    utils.py) disables FlashAttention "to give FusedAttention preference on Hopper+", so
    on sm90 / sm100 it is cuDNN's fused SDPA (FA3-class: wgmma / tcgen05, TMA, warp
    specialisation), on Ampere FlashAttention-2.  The backward pass uses ``attn`` x
    ``attn_bwd``.  Ampere 0.70: FlashAttention-2 (Dao 2023, arXiv:2307.08691, Fig. 4-5),
    forward ~70 % of A100 peak, backward ~60 % (not fitted: the A100 calibration runs
    predate FlashAttention).  Hopper 0.50, chosen jointly with ``gemm`` on the H100
    calibration rows (all ``framework = megatron``, i.e. cuDNN fused attention) whose
    attention share (s/6h) ranges from 2 % to 33 % (scan in docs/accuracy.md); the
    microbenchmark value is ~0.55-0.62 (Shah et al. 2024, FlashAttention-3,
    arXiv:2407.08608, Fig. 5 head dim 128: cuDNN forward 595-617 of 989 TFLOP/s
    non-causal at 2k-16k tokens, 518-539 causal at 4k-16k).  Blackwell: Hopper's
    tensor-core parts (0.667 / 0.697) carried over, NOT FITTED (no Blackwell calibration
    row), with Blackwell's own exponential rate: B200 / GB200 have Hopper's 16 exponentials
    per SM per clock against twice the tensor FLOPs (512 per exponential), so at head dim
    128 their forward is 1 / (1.5 + 1.0) = 0.40 of peak end to end and B300 / GB300 (32 per
    clock) 0.50.  KNOWN CONFLICT: FlashAttention-4 (Zadouri, Dao et al. 2026,
    arXiv:2603.05451) reaches 1613 TFLOP/s = 71 % of B200's 2250 and is "up to 1.3x"
    faster than cuDNN 9.13, so cuDNN reaches >= 1240 TFLOP/s (>= 55 %) at FA4's best-case
    shapes -- above the 0.40 here.  Those kernels overlap the exponentials with the MMAs
    and emulate 10-25 % of them on the FMA units (FA4's polynomial ``exp2``), which the sum
    of :mod:`dse.cost.attention` does not credit; the sum is kept because it is what
    reproduces NVIDIA's own GB200 -> GB300 FP8 attention gain (~1.35x) with these tensor
    fractions, the H200 head-dim-64 cuDNN slowdown better than a max() would, and it moved
    every out-of-sample training suite the right way (docs/accuracy.md, "Softmax
    exponentials").
``attn_fa2``
    Speed of a FlashAttention-2-class kernel (``mma.sync`` tensor-core instructions, no
    wgmma / TMA: flash-attn 2.x, PyTorch SDPA's flash backend, llm-foundry's Triton
    kernel) *relative to* ``attn``'s native kernel, on the same shapes; the
    framework profile says which kernel a run uses (:mod:`dse.cost.attention_kernel`).
    A ratio, so a measured ``eff_attn`` (``dse calibrate``) carries over to it.
    Hopper 0.56, from FlashAttention-3's figures on H100 SXM5, head dim 128, at 4k-16k
    tokens (the plateau): Fig. 5 forward non-causal FA2 368 / 370 / 370 vs cuDNN
    609 / 600 / 595 TFLOP/s (0.60-0.62 end to end), forward causal FA2 319 / 333 / 335 vs
    cuDNN 518 / 529 / 539 (0.62); Fig. 6 backward FA2 310 / 318 / 322 vs cuDNN
    499 / 518 / 516 (0.62).  As a ratio of tensor-core parts (``attn`` above: both kernels
    pay the same exponentials) the three give 0.53 / 0.55 / 0.59, mean 0.56
    (:data:`FA3_FIG_H100_TFLOPS`, ``_fa2_ratio``).  In absolute terms FA2 reaches 335-370 /
    989 = 0.34-0.37 of H100 peak end to end.
    Ampere and CDNA 1.0 (FA2 / CK FA2 *is* the native kernel).  Blackwell: Hopper's
    0.62, NOT MEASURED (no published FA2-on-sm100 figure was found; FA2's ``mma.sync``
    path cannot use tcgen05, so the true ratio is likely lower).
``sfu``
    ``sfu_ex2_per_sm_clk``: MUFU.EX2 results per SM per clock, the rate of the softmax's
    exponentials (:func:`dse.cost.rates.exp_rate` multiplies by SMs and clock;
    :mod:`dse.cost.attention` charges one per score element beside the matmuls).  A
    datasheet figure, not fitted: 16 on sm80 / sm90 / sm100 (CUDA C++ Programming Guide,
    throughput of native arithmetic instructions, base-2 exponential ``exp2f``: 16 per
    clock per SM; H100 SXM 16 x 132 x 1.83 GHz = 3.9e12/s, FlashAttention-3's "3.9 TFLOPS
    of special functions" against 989 of matmul, arXiv:2407.08608 §3.1).  Blackwell Ultra
    (B300 / GB300) doubles it, a per-SKU catalog value (32: NVIDIA, "Inside NVIDIA
    Blackwell Ultra", 10.7 vs 5 TeraExponentials/s).  CDNA 3 / 4: 0, not modelled (no
    published MI300X / MI355X exponential rate found), so AMD attention keeps its
    end-to-end ``attn``.
``fp8_transpose``
    1 where Transformer Engine keeps a *transposed* fp8 copy of each fp8 GEMM operand
    that the backward reads column-wise (weights for dgrad, inputs and output gradients
    for wgrad), 0 where it does not.  TE ``transformer_engine/pytorch/utils.py``
    ``is_non_tn_fp8_gemm_supported()``: ``(100 <= compute capability < 120) or >= 130``
    -- cuBLAS fp8 GEMMs on sm89 / sm90 take only the TN layout (Hopper wgmma reads fp8
    operands K-major only), so ``Float8Tensor`` materialises ``_transpose``
    (``tensor/float8_tensor.py``); datacenter Blackwell (sm100 / sm103: tcgen05) runs
    fp8 GEMMs in any layout and TE skips the transpose.  (MXFP8 keeps a column-wise copy
    on Blackwell too -- its block scales run along the other dimension -- but dse's
    ``fp8`` precision is per-tensor scaling.)  Read by :mod:`dse.train.memory` (the fp8
    primary weights' bytes).  Ampere / CDNA: 1 (no TE fp8 path on sm80; ROCm TE keeps
    the transpose -- carried, not measured).
``hbm``
    Achievable fraction of HBM bandwidth for streaming kernels (STREAM-like copy;
    ~0.9 on A100/H100 per the "Dissecting the Ampere/Hopper GPU architecture"
    microbenchmark papers, arXiv:2402.13499).
    Blackwell: Hopper's 0.9, carried over and now CHECKED against a published streaming
    measurement (not fitted): FluidX3D's single-GPU table (ProjectPhysX/FluidX3D
    README.md @ 8986874, "Single-GPU/CPU Benchmark Table"; lattice Boltzmann, FP32/FP32
    at 2.37 FLOP/byte, "only limited by memory bandwidth") measures B200 SXM6 180GB at
    42152 MLUPs/s = 81 % of 8000 GB/s (84 % of the catalog's 7.7 TB/s), B300 81 %,
    against H100 SXM5 80 %, H200 SXM5 73 %, A100 SXM4 80GB 77 % of their datasheets: a
    B200 streams at least Hopper's fraction of its peak, so a lower Blackwell ``hbm``
    is ruled out (the catalog's 7.7 TB/s peak itself is confirmed from the 7680-bit
    bus, ``[b200.sources] hbm``; no STREAM / BabelStream B200 figure was found in the
    B200 microbenchmark paper, Jarmusch & Chandrasekaran, arXiv:2512.02189, or Chips and
    Cheese's B200 article).  The same table's FP32/FP16S and FP32/FP16C columns (5.27
    and 16.56 FLOP/byte, with fp16<->fp32 conversions per element) drop to 54 % and
    22 % on B200 against 68 % / 46 % on H100 and 59 % / 33 % on H200: Blackwell's
    SIMT throughput (75 TFLOP/s FP32, H100 67) grew far less than its bandwidth (2.3x),
    so kernels with a few CUDA-core instructions per byte stop being bandwidth-bound
    there first.  The out-of-sample TensorRT-LLM 1.x Llama-3.3-70B rows
    (tests/data/published_serving.csv) put the ``trtllm_pytorch`` profile with cohort
    packing on within -6..+11 % on H100 / H200 fp8 but +0..+47 % (mean +23 %) too fast
    on B200 / GB200 / B300 / GB300 NVFP4; closing the worst (1024 in / 8192 out, +43 %)
    with ``hbm`` alone would need 0.9 / 1.43 = 0.63, which the FluidX3D figure rules
    out.  The missing term is in a Blackwell kernel, not in the datasheet bandwidth; the
    decode attention is not the SIMT-dequant variant (TensorRT-LLM converts Q to fp8
    when the KV cache is e4m3 on SM100, ``XqaDispatcher``, so the trtllm-gen
    ``QkvE4m3`` kernels run fp8 UMMA without a KV transform), and no per-kernel B200
    decode measurement was found that locates it (:mod:`dse.infer.engines`,
    ``trtllm_pytorch``).
``nvlink`` / ``nic``
    nccl-tests bus bandwidth divided by the per-direction link bandwidth for large
    all-reduce (NCCL PERFORMANCE.md conventions): DGX A100 ~230 of 300 GB/s NVLink
    (0.77); InfiniBand ~0.9 of line rate; DGX H100 ~360-400 of 450 GB/s NVLink.
``kernel_launch_s``
    Per-kernel fixed cost (launch + tail), ~4 us on CUDA 11/12 with CUDA graphs off.
``dram_latency_s``
    Load-to-use latency of one HBM access (a dependent pointer chase past L2), which every
    kernel pays before its first bytes arrive: a kernel replayed from a CUDA graph costs the
    graph's launch gap plus this ramp (:mod:`dse.infer.engines`, ``GRAPH_LAUNCH_S``).
    Measured, not fitted: A100 80 GB 403-406 ns (568-572 cycles at 1410 MHz) and H100 PCIe
    370-375 ns (650-658 cycles at 1755 MHz) in the same benchmark (te42kyfo/gpu-benches,
    ``gpu-latency``, raw data ``cuda-latency/a100_80.txt``, ``gpu-latency/h100_pcie.txt``);
    B200 860 cycles (markdewing/AI_kernels ``latency/README.md``), 438 ns at its 1.965 GHz
    boost -- higher than H100's, as Chips and Cheese's "Nvidia's B200: Keeping the CUDA
    Juggernaut Rolling" (2025) also finds; MI300X "comparable to H100's" once TLB misses are
    removed (Chips and Cheese, "Testing AMD's Giant MI300X", 2024), so ``cdna3`` takes
    Hopper's value, as ``cdna4`` does until MI355X is measured.
``tile_m`` / ``tile_n``
    The GEMM output tile (per SM) cuBLAS picks for large bf16 problems: 256x128 on
    Ampere (kernel names ``ampere_bf16_s16816gemm_bf16_256x128_*``) and 128x256 on
    Hopper/Blackwell (wgmma warp-specialised CUTLASS 3 kernels).
``cluster``
    SMs that share one A/B panel load from L2 (thread-block-cluster TMA multicast on
    Hopper, 2-SM UMMA on Blackwell; CUTLASS 3 default cluster 2x1); 1 on Ampere.  It
    divides the L2 -> SM traffic of a GEMM.
``ada`` (Ada Lovelace, sm89: L4, L40S): NOT FITTED to any row (no Ada run in the
    calibration files); Ampere's values carried over, because the kernels are Ampere's: sm89
    has no ``wgmma`` and no TMA, so cuBLAS / CUTLASS run the sm80 ``mma.sync`` tile kernels
    (``cluster`` 1, 256x128 tiles), FlashAttention-2 is the native attention kernel
    (FlashAttention-3 is sm90-only, Shah et al. 2024, arXiv:2407.08608), and fp8 runs the same
    ``mma.sync`` path (PTX ISA ``mma.sync.aligned.m16n8k32 .e4m3``, sm89+) at twice the 16-bit
    rate, so ``gemm_fp8`` = ``gemm`` (Ampere's 0.72, the sm80 kernels' fraction).  Checked,
    not fitted: cuBLAS fp16 GEMMs reach 105-115 of 119.5 TFLOP/s on an L20 (AD102, 275 W;
    DefTruth/CUDA-Learn-Notes ``hgemm`` README), 0.88-0.96 at its clock, above 0.72 -- a
    low-power card that keeps its clock, so the carried value is, if anything, pessimistic;
    no sustained-clock reference exists (:mod:`dse.spec.power`: power_clock 1).  ``hbm``
    0.90 stands for GDDR6 streams too (unmeasured); ``dram_latency_s`` is A100's HBM value,
    GDDR6's is not measured here.
``rtx_blackwell`` (sm120: RTX PRO 6000 Blackwell Server Edition, GB202): NOT FITTED; not the
    data-center Blackwell's constants, because sm120 has neither ``tcgen05`` / tensor memory nor
    TMA multicast -- "SM100 block-scaling uses tcgen05 + TMEM, which SM120 does not have"
    (Dao-AILab/quack PR #153), CUTLASS's sm100 attention is "specifically for TCGen05 supported
    MMA architectures. Please use FA2 or example 41 for SM80/86/89/120" (NVIDIA/cutlass issue
    #2513), and its GEMMs run with "Cluster size ... fixed to <1,1,1> since sm120 does not have
    multicast" and 128x128x128 tiles (99 KB of shared memory; pytorch/pytorch PR #155991) -- i.e.
    the warp-level ``mma.sync`` family (block-scaled variants for fp8 / fp6 / fp4), as ``ada``:
    Ampere's fractions (``gemm`` = ``gemm_fp8`` = 0.72, FA2 attention, ``fp8_transpose`` 1 since
    Transformer Engine's ``is_non_tn_fp8_gemm_supported`` excludes compute capability 12.x),
    ``tile_m`` x ``tile_n`` = 128 x 128, and ``gemm_fp4`` = ``gemm_fp8`` x ``FP4_OVER_FP8`` (the
    per-tile scale and epilogue work of a block-scaled 4-bit tile, measured on B200, carried).
    Checked, not fitted: CUTLASS 3.x fp8 on an RTX 5090 (sm120) reaches 388.9 of its rated
    419 TFLOP/s at 4096^3 (0.93; pytorch/pytorch PR #155991), above 0.72.
``cdna3`` / ``cdna4`` (AMD Instinct MI300X / MI325X and MI355X): NOT FITTED to any
    calibration row (there is no AMD training row in ``../shared/validation/calibration.csv``).
    ``cdna3`` takes published MI300X microbenchmark fractions of the datasheet peaks (the
    comment at its entry cites them).  ``cdna4`` takes its GEMM fractions from MI355X GEMM
    microbenchmarks, bridged to the model through MI325X, which the same two harnesses
    measured (``_cdna4_gemm``): MI355X reaches MI325X's bf16 fraction of peak (0.60-0.62
    against 0.60; HipKittens at 8192^3, mamf-finder), and its fp8 GEMMs 1.06x its own bf16
    fraction (hipBLASLt 3233 of 5033 TFLOP/s) where CDNA 3's reach 0.90x -- ``gemm`` 0.611,
    ``gemm_fp8`` 0.649 (cdna3 0.50 / 0.45 at MI300X's power-limited clock; MI355X, another
    CU, gets no cube-law clock factor, :mod:`dse.spec.power`).  Before, with cdna3's values,
    the three MLPerf Training v5.1 MI355X Llama-3.1-8B fp8 rows were predicted 12-17 % slow
    (``tests/data/published_amd_training.csv``, out of sample, not used to choose anything);
    after, 2-6 % fast.  Everything else (attention, HBM, links, ``gemm_fp4``) carries
    ``cdna3``'s values: HipKittens' MI355X attention kernels reach ~1100 TFLOP/s forward
    (GQA causal, 4k; 0.44 of peak against ``attn`` 0.35), not adopted without a CDNA 3 figure
    from the same harness.  ``cluster`` = 1: AMD has no thread-block-cluster / TMA multicast,
    so each CU loads its own A/B panels.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dse.spec.power import power_clock


@dataclass(frozen=True)
class GenerationEfficiency:
    gemm: float
    gemm_fp8: float
    attn: float
    attn_bwd: float
    attn_fa2: float
    hbm: float
    fp8_transpose: float
    nvlink: float
    nic: float
    kernel_launch_s: float
    tile_m: int
    tile_n: int
    cluster: int
    gemm_fp4: float | None = None   # None: the generation's gemm_fp8 (module docstring)
    dram_latency_s: float = 375e-9  # HBM load-to-use latency (module docstring; measured)
    sfu_ex2_per_sm_clk: float = 0.0  # softmax exponentials per SM per clock (0: not modelled)

    def __post_init__(self):
        if self.gemm_fp4 is None:
            object.__setattr__(self, "gemm_fp4", self.gemm_fp8)


# fp4 / fp8 fraction-of-peak ratio of the cuBLAS(Lt) kernel ceilings on one B200
# (``gemm_fp4`` in the module docstring)
FP4_OVER_FP8 = (5239.0 / 9000.0) / (3432.5 / 4500.0)     # 0.763
# MXFP8 / per-tensor fp8 GEMM speed: Transformer Engine's GEMM profiling guide
# (docs/examples/gemm_profiling/gemm_profiling.rst, TE commit 1609c890e), one transformer
# layer's fprop + dgrad + wgrad GEMMs on B300 (M 15872, hidden 4096, FFN 16384), operands
# pre-quantized: Float8CurrentScaling 6.812 ms, MXFP8BlockScaling 7.161 ms (the block
# scales' loads and swizzles; fprop 9.6 %, dgrad 2.9 %, wgrad 3.2 % slower).  A kernel
# ratio read off one published microbenchmark, not fitted to a training row.
MXFP8_OVER_FP8 = 6.812 / 7.161                           # 0.951


#: MUFU.EX2 results per SM per clock: 16 on sm80 / sm90 / sm100 (CUDA C++ Programming Guide,
#: "Arithmetic Instructions" throughput table: 32-bit base-2 exponential ``exp2f``, 16 per
#: clock per multiprocessor); Blackwell Ultra (sm103) doubles it, a per-SKU override in the
#: catalog (``sfu_ex2_per_sm_clk``, module docstring ``sfu``).
SFU_EX2_PER_SM_CLK = 16.0
#: head dimension of the rows the ``attn`` values were measured / fitted on
ATTN_REFERENCE_HEAD_DIM = 128.0


def fp4_efficiency(gemm_fp8: float, gemm_fp4: float, fp4_datapath_ratio: float) -> float:
    """``gemm_fp4`` of a SKU whose 4-bit tensor datapath is ``fp4_datapath_ratio`` times
    its generation's reference SKU's (dense fp4 FLOP per SM per clock; 1.5 for Blackwell
    Ultra, B300 / GB300, against B200), on the same SM.  A block-scaled 4-bit GEMM tile
    spends its MMA time plus per-tile work the MMA rate does not shorten -- the block
    scales' loads and the epilogue's store of the same output tile (module docstring
    ``gemm_fp4``) -- so with time per FLOP ``1 / (P e8) + c`` at the reference, where
    ``gemm_fp4 = e4`` gives ``c P = 1 / e4 - 1 / e8``, a datapath ``rho`` times wider
    (peak ``rho P``, the same ``c`` per FLOP on the same SM and clock) reaches
    ``1 / e4' = 1 / e8 + rho (1 / e4 - 1 / e8)``.  Blackwell: e8 0.60, e4 0.458 -> B300
    0.410 (x0.895).  Checked, not fitted: Transformer Engine's GEMM profiling guide times
    NVFP4 GEMMs on a B300 at 0.85-0.90 of what the reference value gives
    (tests/test_out_of_sample_gemm.py)."""
    if fp4_datapath_ratio <= 0.0 or gemm_fp4 >= gemm_fp8:
        return gemm_fp4
    return 1.0 / (1.0 / gemm_fp8 + fp4_datapath_ratio * (1.0 / gemm_fp4 - 1.0 / gemm_fp8))


def without_exp(total_eff: float, flop_per_ex2: float, flop_per_score: float) -> float:
    """The tensor-core part of an attention efficiency measured end to end (module
    docstring ``sfu``): a kernel that spends ``flop_per_score`` matmul FLOPs and one
    exponential per score element, at ``total_eff`` of the tensor peak overall, runs its
    matmuls at ``e`` with ``1 / e = 1 / total_eff - flop_per_ex2 / flop_per_score``
    (``flop_per_ex2`` = tensor FLOP per clock / exponentials per clock of one SM)."""
    return 1.0 / (1.0 / total_eff - flop_per_ex2 / flop_per_score)


def _attn_pair(total_fwd: float, total_bwd: float, flop_per_sm_clk: float) -> dict:
    """``attn`` and ``attn_bwd`` (a ratio to ``attn``) of a generation whose fused attention
    was measured / fitted end to end at ``total_fwd`` / ``total_bwd`` of peak, head dim
    :data:`ATTN_REFERENCE_HEAD_DIM` (4d matmul FLOPs per score element forward, 10d
    backward): :func:`without_exp` of each."""
    x = flop_per_sm_clk / SFU_EX2_PER_SM_CLK
    d = ATTN_REFERENCE_HEAD_DIM
    fwd = without_exp(total_fwd, x, 4.0 * d)
    return dict(attn=fwd, attn_bwd=without_exp(total_bwd, x, 10.0 * d) / fwd)


#: FlashAttention-3 (Shah et al. 2024, arXiv:2407.08608) Fig. 5 / 6 on H100 SXM5, head dim
#: 128, 4k-16k tokens (the plateau, means of the three points): (FA2, cuDNN) TFLOP/s of the
#: forward non-causal, forward causal and backward
FA3_FIG_H100_TFLOPS = ((369.3, 601.3), (329.0, 528.7), (316.7, 511.0))
H100_PEAK_TFLOPS = 989.4


def _fa2_ratio() -> float:
    """``attn_fa2`` on Hopper: the mean over :data:`FA3_FIG_H100_TFLOPS` of the FA2 / cuDNN
    ratio of their tensor-core parts (:func:`without_exp`, 256 tensor FLOP per
    exponential on sm90; 4d FLOPs per score element forward, 10d backward)."""
    d = ATTN_REFERENCE_HEAD_DIM
    per_score = (4.0 * d, 4.0 * d, 10.0 * d)
    x = 4096.0 / SFU_EX2_PER_SM_CLK
    ratios = [without_exp(fa2 / H100_PEAK_TFLOPS, x, f) / without_exp(cu / H100_PEAK_TFLOPS, x, f)
              for (fa2, cu), f in zip(FA3_FIG_H100_TFLOPS, per_score)]
    return sum(ratios) / len(ratios)


GENERATIONS: dict[str, GenerationEfficiency] = {
    # A100: 2048 dense 16-bit tensor FLOP / SM / clock; FA2 70 % forward, 0.70 x 0.85 backward
    "ampere": GenerationEfficiency(gemm=0.72, gemm_fp8=0.72, **_attn_pair(0.70, 0.70 * 0.85, 2048.0),
                                   attn_fa2=1.0,
                                   hbm=0.90, fp8_transpose=1.0, nvlink=0.77, nic=0.90,
                                   kernel_launch_s=4e-6, tile_m=256, tile_n=128, cluster=1,
                                   dram_latency_s=405e-9, sfu_ex2_per_sm_clk=SFU_EX2_PER_SM_CLK),
    # H100: 4096 tensor FLOP / SM / clock; 0.50 / 0.50 x 0.85 fitted end to end (docstring)
    "hopper": GenerationEfficiency(gemm=0.68, gemm_fp8=0.60, **_attn_pair(0.50, 0.50 * 0.85, 4096.0),
                                   attn_fa2=_fa2_ratio(),
                                   hbm=0.90, fp8_transpose=1.0, nvlink=0.80, nic=0.90,
                                   kernel_launch_s=4e-6, tile_m=128, tile_n=256, cluster=2,
                                   sfu_ex2_per_sm_clk=SFU_EX2_PER_SM_CLK),
    # AMD CDNA 3 (MI300X): its own constants, never Hopper's borrowed.  gemm 0.50 / fp8
    # 0.45: hipBLASLt bf16 GEMMs reach ~620-700 of 1307 TFLOP/s and fp8 ~1100-1200 of 2615
    # (SemiAnalysis, "MI300X vs H100 vs H200 Benchmark Part 1: Training", Dec 2024; AMD
    # ROCm blog "hipBLASLt ... MI300X" GEMM tuning results); attn 0.35: CK FlashAttention-2
    # forward ~450 TFLOP/s (ROCm FA2 benchmarks); hbm 0.80: ~4.2-4.3 of 5.3 TB/s in
    # streaming kernels (Chips and Cheese, "Testing AMD's Giant MI300X"); xGMI all-reduce
    # bus bandwidth ~310 of 448 GB/s per direction (RCCL tests on 8x MI300X, 0.70);
    # launch ~6 us (HIP launch overhead above CUDA's).  Tiles 256x128 (hipBLASLt MT256x128).
    "cdna3": GenerationEfficiency(gemm=0.50, gemm_fp8=0.45, attn=0.35, attn_bwd=0.85, attn_fa2=1.0,
                                  hbm=0.80, fp8_transpose=1.0, nvlink=0.70, nic=0.90,
                                  kernel_launch_s=6e-6, tile_m=256, tile_n=128, cluster=1),
}
# Blackwell (B200 / GB200 / B300): Hopper's fractions carried over, NOT FITTED (no Blackwell
# calibration row; the B200 GEMM microbenchmark found is weighed in the docstring), except fp8_transpose = 0
# (TE is_non_tn_fp8_gemm_supported on sm100) and gemm_fp4 (microbenchmark ratio, docstring); attn: see docstring
GENERATIONS["blackwell"] = replace(GENERATIONS["hopper"], fp8_transpose=0.0,
                                   gemm_fp4=GENERATIONS["hopper"].gemm_fp8 * FP4_OVER_FP8,
                                   dram_latency_s=860 / 1.965e9)   # measured (docstring)
#: B200's fraction of its dense peak over H100 SXM's, the median over the 27 shapes with
#: every dimension >= 4096 of NVIDIA AIConfigurator's measured GEMM database, one harness and
#: one software release on both GPUs (TensorRT-LLM 1.3.0rc20 ``Linear``, CUDA graphs; subset in
#: tests/data/aic_gemm_kernels.csv, provenance in its .md): bf16, fp8 (per-tensor).  Its
#: H200 / H100 ratio is 1.00 / 1.02, as the model has it, and its B200 nvfp4 / fp8 ratio 0.756
#: is :data:`FP4_OVER_FP8`'s 0.763: the harness agrees with the constants it does not move.
B200_OVER_H100_GEMM = {"bf16": 0.8745, "fp8": 0.8943}


def b200_sm_gemm() -> tuple[float, float, float]:
    """``(eff_gemm, eff_gemm_fp8, eff_gemm_fp4)`` of the SKUs on B200's SM (B200, GB200:
    catalog entries; B300 / GB300 are another SM, :mod:`dse.spec.power`): Hopper's fitted
    fractions x :data:`B200_OVER_H100_GEMM`, fp4 at :data:`FP4_OVER_FP8` of the fp8 one."""
    h = GENERATIONS["hopper"]
    fp8 = h.gemm_fp8 * B200_OVER_H100_GEMM["fp8"]
    return h.gemm * B200_OVER_H100_GEMM["bf16"], fp8, fp8 * FP4_OVER_FP8


# Ada (sm89: L4, L40S): NOT FITTED (no Ada row in the calibration files), Ampere's fractions
# carried over (module docstring ``ada``): the same mma.sync tensor-core path, no TMA multicast
GENERATIONS["ada"] = GENERATIONS["ampere"]
# RTX Blackwell (sm120: RTX PRO 6000 Blackwell): NOT FITTED; the mma.sync kernel family, Ampere's
# fractions with 128x128 tiles and the block-scaled fp4 ratio (module docstring ``rtx_blackwell``)
GENERATIONS["rtx_blackwell"] = replace(GENERATIONS["ampere"], tile_m=128, tile_n=128,
                                       gemm_fp4=GENERATIONS["ampere"].gemm_fp8 * FP4_OVER_FP8)
# AMD CDNA 4 (MI355X): gemm and gemm_fp8 from GEMM microbenchmarks, NOT FITTED to any row
# (module docstring ``cdna3`` / ``cdna4``); everything else carried over from cdna3.
#: bf16 GEMM TFLOP/s of MI325X and MI355X measured in one harness each: HipKittens
#: (HazyResearch/HipKittens @ f09e9685, analysis/bf16_gemm/{mi325x,mi350x}/*.json,
#: ``tflops_pytorch`` at M = N = K = 8192, 500 warmups / 100 repeats, Oct-Nov 2025) and
#: stas00/ml-engineering's mamf-finder table (compute/accelerator/README.md @ d3439bd: MI325X
#: 784.9 at 13312x10240x8192, MI355X 1565.0 at 12288x8192x8192, ROCm 7.0.2)
CDNA_BF16_GEMM_TFLOPS = {"hipkittens": (785.30, 1521.25), "mamf-finder": (784.9, 1565.0)}
#: MI355X fp8 (e4m3 in, bf16 out) hipBLASLt and bf16 torch.matmul (hipBLASLt on gfx950) TFLOP/s
#: at 8192^3 in HipKittens' harness (analysis/fp8_gemm/mi350x/mi355x_fp8_gemm.json
#: ``tflops_hipblaslt``; the bf16 figure above)
MI355X_FP8_BF16_GEMM_TFLOPS = (3233.19, 1521.25)
#: datasheet dense peaks (catalog ``mi325x`` / ``mi355x``): bf16 MI325X, bf16 / fp8 MI355X
MI325X_BF16_PEAK, MI355X_BF16_PEAK, MI355X_FP8_PEAK = 1307.4, 2516.6, 5033.2


def _cdna4_gemm() -> tuple[float, float]:
    """``(gemm, gemm_fp8)`` of CDNA 4 from :data:`CDNA_BF16_GEMM_TFLOPS` and
    :data:`MI355X_FP8_BF16_GEMM_TFLOPS`, each step a ratio measured within one harness:

    * MI355X's bf16 fraction of peak over MI325X's, mean of the two harnesses (1.006, 1.036);
    * times what the model prices MI325X at: ``cdna3`` ``gemm`` x MI325X's power-limited
      clock (:func:`dse.spec.power.power_clock`, 1000 W on the cdna3 reference's CU: 1.197,
      0.598 of peak -- HipKittens and mamf-finder measure 0.601 / 0.600 on it);
    * ``gemm_fp8`` = that x MI355X's fp8 fraction over its bf16 fraction (1.062).  The same
      construction on CDNA 3 reproduces its constants' own ratio: AMD's MAF table (ROCm
      blogs, "Measuring Max-Achievable FLOPs - Part 2") has MI300X fp8 0.487 / bf16 0.542 of
      peak = 0.90, and ``cdna3`` is 0.45 / 0.50 = 0.90."""
    ratios = [(n / MI355X_BF16_PEAK) / (o / MI325X_BF16_PEAK) for o, n in CDNA_BF16_GEMM_TFLOPS.values()]
    mi325x = GENERATIONS["cdna3"].gemm * power_clock("cdna3", 1000.0, 304.0, 2.1e9)
    gemm = mi325x * sum(ratios) / len(ratios)
    fp8, bf16 = MI355X_FP8_BF16_GEMM_TFLOPS
    return gemm, gemm * (fp8 / MI355X_FP8_PEAK) / (bf16 / MI355X_BF16_PEAK)


# gemm_fp4 stays cdna3's gemm_fp8 (no MI355X MXFP4 GEMM measurement found)
GENERATIONS["cdna4"] = replace(GENERATIONS["cdna3"], **dict(zip(("gemm", "gemm_fp8"), _cdna4_gemm())),
                               gemm_fp4=GENERATIONS["cdna3"].gemm_fp8)
