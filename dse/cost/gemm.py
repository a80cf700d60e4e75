"""GEMM time on one GPU: tile/wave quantization, L2-aware HBM traffic, roofline.

For C[M,N] = A[M,K] @ B[K,N] in ``bytes_per_el`` precision:

* Compute.  cuBLAS tiles C into ``tile_m x tile_n`` blocks, one per SM at a time
  (NVIDIA, "Matrix Multiplication Background User's Guide", §"Tile quantization" and
  §"Wave quantization").  ``tiles = ceil(M/tile_m)*ceil(N/tile_n)``,
  ``waves = ceil(tiles / num_sms)``, and every wave costs a full tile on every SM:
  ``t_compute = waves * num_sms * 2*tile_m*tile_n*K / (peak * eff_gemm)``.
  For large problems this tends to ``2MNK/(peak*eff)``.
* HBM traffic with L2 reuse.  Hong & Kung's I/O lower bound for blocked matmul with a
  fast memory of S elements is Theta(MNK/sqrt(S)); a square block of side
  ``b = sqrt(S/3)`` (three b x b blocks resident) re-reads A N/b times and B M/b times:
  ``elems = M*N + max(M*K + K*N, 2*M*N*K/b_l2)``, with S the L2 capacity in elements.
  A bigger L2 therefore lowers HBM traffic for GEMMs that do not fit (docs/architecture.md,
  "a bigger L2 must be able to matter").
* L2 traffic: every SM tile streams its A and B panels from L2, shared by the
  ``cluster`` SMs of a TMA-multicast cluster (Hopper+):
  ``elems_l2 = M*N*K*(1/tile_n + 1/tile_m)/cluster + M*N``.
* Output precision.  The epilogue writes C in ``out_bytes_per_el``, which need not be the
  inputs' size: fp8 and NVFP4 / MXFP4 GEMMs read 1- or 0.5-byte A and B and write bf16
  C (Transformer Engine ``te.Linear`` and TensorRT-LLM's fp8 / FP4 GEMM plugins output
  the activation dtype; cuBLASLt ``cublasLtMatmul`` with ``CUDA_R_8F_E4M3`` inputs and a
  ``CUDA_R_16BF`` D; CUTLASS's block-scaled SM100 GEMMs likewise), so the ``M*N`` terms
  above are counted at ``out_bytes_per_el`` and the rest at ``bytes_per_el``.  It is
  what bounds a narrow-K, wide-M low-precision GEMM (fine-grained MoE experts in
  prefill: ``K`` = 768 to 2048) by memory: per output row ``2 N K`` FLOPs against
  ``K el_in + N el_out`` bytes.
* Overlap: compute and memory overlap fully inside the kernel (roofline, Williams et al.
  2009): ``t = max(t_compute, t_hbm, t_l2) + kernel_launch_s``.

All arguments may be JAX arrays (one design point each); units SI.
"""

from __future__ import annotations

import jax.numpy as jnp


def gemm_terms(m, n, k, peak_flops_per_s, eff, hbm_bw_bytes_per_s, l2_bw_bytes_per_s,
               l2_bytes, num_sms, tile_m, tile_n, bytes_per_el, count=1.0, cluster=1.0,
               out_bytes_per_el=None):
    """The roofline terms of :func:`gemm_time_s` (module docstring), seconds:
    ``(t_compute, t_hbm, t_l2)`` for ``count`` identical problems; the largest is what
    bounds the kernel.  ``out_bytes_per_el``: C's element size (None: ``bytes_per_el``)."""
    out = bytes_per_el if out_bytes_per_el is None else out_bytes_per_el
    tiles = count * jnp.ceil(m / tile_m) * jnp.ceil(n / tile_n)
    waves = jnp.ceil(tiles / num_sms)
    t_compute = waves * num_sms * 2.0 * tile_m * tile_n * k / (peak_flops_per_s * eff)
    t_hbm = gemm_hbm_bytes(m, n, k, l2_bytes, bytes_per_el, 1.0, out) / hbm_bw_bytes_per_s
    l2_in = m * n * k * (1.0 / tile_n + 1.0 / tile_m) / cluster
    t_l2 = (l2_in * bytes_per_el + m * n * out) / l2_bw_bytes_per_s
    return t_compute, count * t_hbm, count * t_l2


def gemm_hbm_bytes(m, n, k, l2_bytes, bytes_per_el, count=1.0, out_bytes_per_el=None):
    """HBM bytes of ``count`` GEMMs with L2 reuse (module docstring): C written at
    ``out_bytes_per_el`` (None: ``bytes_per_el``), A and B read at ``bytes_per_el``."""
    out = bytes_per_el if out_bytes_per_el is None else out_bytes_per_el
    l2_block = jnp.sqrt(jnp.maximum(l2_bytes / (3.0 * bytes_per_el), 1.0))
    return count * (m * n * out
                    + jnp.maximum(m * k + k * n, 2.0 * m * n * k / l2_block) * bytes_per_el)


def gemm_time_s(m, n, k, peak_flops_per_s, eff, hbm_bw_bytes_per_s, l2_bw_bytes_per_s,
                l2_bytes, num_sms, tile_m, tile_n, bytes_per_el, kernel_launch_s,
                count=1.0, cluster=1.0, out_bytes_per_el=None):
    """Time of one batched (or grouped) GEMM kernel doing ``count`` identical problems of
    shape (m, n, k), as cuBLAS ``gemmStridedBatched`` and grouped-GEMM kernels do: the
    tiles of all problems share the waves, and the launch cost is paid once:
    ``max(t_compute, t_hbm, t_l2) + kernel_launch_s`` (:func:`gemm_terms`)."""
    t_compute, t_hbm, t_l2 = gemm_terms(m, n, k, peak_flops_per_s, eff, hbm_bw_bytes_per_s,
                                        l2_bw_bytes_per_s, l2_bytes, num_sms, tile_m, tile_n,
                                        bytes_per_el, count, cluster, out_bytes_per_el)
    return jnp.maximum(jnp.maximum(t_compute, t_hbm), t_l2) + kernel_launch_s


def gemm_flops(m, n, k, count=1.0):
    """Useful floating-point operations: 2*M*N*K per GEMM."""
    return count * 2.0 * m * n * k
