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
    Blackwell: assumed equal to Hopper until measured runs exist.
``gemm_fp8``
    The same for FP8 GEMMs (Transformer Engine, E4M3 forward / E5M2 gradients):
    Hopper 0.60 (~1190 of 1979 TFLOP/s, i.e. 1.85x the bf16 rate), same scan.
``attn``
    Fraction of tensor peak reached by the fused attention kernel's matmuls.
    FlashAttention-2 (Dao 2023, arXiv:2307.08691, Fig. 5-6): forward ~70 % of A100 peak,
    backward ~60 %; on H100 the cuDNN/FA3 kernels Megatron-Core uses reach ~55-75 %
    (Shah et al. 2024, arXiv:2407.08608).  The backward pass uses ``attn`` x ``attn_bwd``.
    Ampere 0.70 from the FA2 paper (not fitted: the A100 calibration runs predate
    FlashAttention).  Hopper 0.45, FA2-class throughput on H100 (~350-450 of 989
    TFLOP/s forward), chosen jointly with ``gemm`` on the H100 calibration rows whose
    attention share (s/6h) ranges from 2 % to 33 % (scan in docs/accuracy.md).
``hbm``
    Achievable fraction of HBM bandwidth for streaming kernels (STREAM-like copy;
    ~0.9 on A100/H100 per the "Dissecting the Ampere/Hopper GPU architecture"
    microbenchmark papers, arXiv:2402.13499).
    Blackwell: Hopper's 0.9, NOT MEASURED -- no published B200 / GB200 / B300 STREAM or
    BabelStream figure was found (the B200 microbenchmark paper, Jarmusch & Chandrasekaran,
    arXiv:2512.02189, and Chips and Cheese's B200 article were searched; the catalog's
    7.7 TB/s peak itself is confirmed from the 7680-bit bus, ``[b200.sources] hbm``).  It
    is left at 0.9 on purpose: the out-of-sample TensorRT-LLM 1.x Llama-3.3-70B rows
    (tests/data/published_serving.csv) put the same engine profile within +-11 % on
    H100 / H200 fp8 (12 rows) but +7..+47 % (median +20 %, 18 rows) too fast on B200 /
    GB200 NVFP4, with cohort packing (``bench_tuned_tokens``) on; closing the worst
    (1024 in / 8192 out, +42 %) with ``hbm`` alone would need 0.9 / 1.42 = 0.63, far
    below any STREAM fraction; the decode step there is ~62 % fp8 KV read and
    ~35 % weight read, nearly all NVFP4 (4.5 bits per element incl. the e4m3 scale per 16,
    ``dse.cost.rates.NVFP4_BYTES``), so the missing term is in a Blackwell kernel (decode
    attention or block-scaled GEMM at small M), not in the datasheet bandwidth.
``nvlink`` / ``nic``
    nccl-tests bus bandwidth divided by the per-direction link bandwidth for large
    all-reduce (NCCL PERFORMANCE.md conventions): DGX A100 ~230 of 300 GB/s NVLink
    (0.77); InfiniBand ~0.9 of line rate; DGX H100 ~360-400 of 450 GB/s NVLink.
``kernel_launch_s``
    Per-kernel fixed cost (launch + tail), ~4 us on CUDA 11/12 with CUDA graphs off.
``tile_m`` / ``tile_n``
    The GEMM output tile (per SM) cuBLAS picks for large bf16 problems: 256x128 on
    Ampere (kernel names ``ampere_bf16_s16816gemm_bf16_256x128_*``) and 128x256 on
    Hopper/Blackwell (wgmma warp-specialised CUTLASS 3 kernels).
``cluster``
    SMs that share one A/B panel load from L2 (thread-block-cluster TMA multicast on
    Hopper, 2-SM UMMA on Blackwell; CUTLASS 3 default cluster 2x1); 1 on Ampere.  It
    divides the L2 -> SM traffic of a GEMM.
``cdna3`` / ``cdna4`` (AMD Instinct MI300X / MI325X and MI355X): NOT FITTED to any
    calibration row (there is no AMD training row in ``../shared/validation/calibration.csv``).
    ``cdna3`` takes published MI300X microbenchmark fractions of the datasheet peaks (the
    comment at its entry cites them); ``cdna4`` carries ``cdna3``'s values over until
    MI355X measurements exist.  ``cluster`` = 1: AMD has no thread-block-cluster / TMA
    multicast, so each CU loads its own A/B panels.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GenerationEfficiency:
    gemm: float
    gemm_fp8: float
    attn: float
    attn_bwd: float
    hbm: float
    nvlink: float
    nic: float
    kernel_launch_s: float
    tile_m: int
    tile_n: int
    cluster: int


GENERATIONS: dict[str, GenerationEfficiency] = {
    "ampere": GenerationEfficiency(gemm=0.72, gemm_fp8=0.72, attn=0.70, attn_bwd=0.85,
                                   hbm=0.90, nvlink=0.77, nic=0.90, kernel_launch_s=4e-6,
                                   tile_m=256, tile_n=128, cluster=1),
    "hopper": GenerationEfficiency(gemm=0.68, gemm_fp8=0.60, attn=0.50, attn_bwd=0.85,
                                   hbm=0.90, nvlink=0.80, nic=0.90, kernel_launch_s=4e-6,
                                   tile_m=128, tile_n=256, cluster=2),
    # AMD CDNA 3 (MI300X): its own constants, never Hopper's borrowed.  gemm 0.50 / fp8
    # 0.45: hipBLASLt bf16 GEMMs reach ~620-700 of 1307 TFLOP/s and fp8 ~1100-1200 of 2615
    # (SemiAnalysis, "MI300X vs H100 vs H200 Benchmark Part 1: Training", Dec 2024; AMD
    # ROCm blog "hipBLASLt ... MI300X" GEMM tuning results); attn 0.35: CK FlashAttention-2
    # forward ~450 TFLOP/s (ROCm FA2 benchmarks); hbm 0.80: ~4.2-4.3 of 5.3 TB/s in
    # streaming kernels (Chips and Cheese, "Testing AMD's Giant MI300X"); xGMI all-reduce
    # bus bandwidth ~310 of 448 GB/s per direction (RCCL tests on 8x MI300X, 0.70);
    # launch ~6 us (HIP launch overhead above CUDA's).  Tiles 256x128 (hipBLASLt MT256x128).
    "cdna3": GenerationEfficiency(gemm=0.50, gemm_fp8=0.45, attn=0.35, attn_bwd=0.85,
                                  hbm=0.80, nvlink=0.70, nic=0.90, kernel_launch_s=6e-6,
                                  tile_m=256, tile_n=128, cluster=1),
    "blackwell": GenerationEfficiency(gemm=0.68, gemm_fp8=0.60, attn=0.50, attn_bwd=0.85,
                                      hbm=0.90, nvlink=0.80, nic=0.90, kernel_launch_s=4e-6,
                                      tile_m=128, tile_n=256, cluster=2),
    # AMD CDNA 4 (MI355X): UNFITTED, carried over from cdna3 (the measured MI300X
    # fractions above) until MI355X measurements exist
    "cdna4": GenerationEfficiency(gemm=0.50, gemm_fp8=0.45, attn=0.35, attn_bwd=0.85,
                                  hbm=0.80, nvlink=0.70, nic=0.90, kernel_launch_s=6e-6,
                                  tile_m=256, tile_n=128, cluster=1),
}
