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
* Overlap: compute and memory overlap fully inside the kernel (roofline, Williams et al.
  2009): ``t = max(t_compute, t_hbm, t_l2) + kernel_launch_s``.

All arguments may be JAX arrays (one design point each); units SI.
"""

from __future__ import annotations

import jax.numpy as jnp


def gemm_terms(m, n, k, peak_flops_per_s, eff, hbm_bw_bytes_per_s, l2_bw_bytes_per_s,
               l2_bytes, num_sms, tile_m, tile_n, bytes_per_el, count=1.0, cluster=1.0):
    """The roofline terms of :func:`gemm_time_s` (module docstring), seconds:
    ``(t_compute, t_hbm, t_l2)`` for ``count`` identical problems; the largest is what
    bounds the kernel."""
    tiles = count * jnp.ceil(m / tile_m) * jnp.ceil(n / tile_n)
    waves = jnp.ceil(tiles / num_sms)
    t_compute = waves * num_sms * 2.0 * tile_m * tile_n * k / (peak_flops_per_s * eff)
    l2_block = jnp.sqrt(jnp.maximum(l2_bytes / (3.0 * bytes_per_el), 1.0))
    hbm_elems = m * n + jnp.maximum(m * k + k * n, 2.0 * m * n * k / l2_block)
    t_hbm = hbm_elems * bytes_per_el / hbm_bw_bytes_per_s
    l2_elems = m * n * k * (1.0 / tile_n + 1.0 / tile_m) / cluster + m * n
    t_l2 = l2_elems * bytes_per_el / l2_bw_bytes_per_s
    return t_compute, count * t_hbm, count * t_l2


def gemm_hbm_bytes(m, n, k, l2_bytes, bytes_per_el, count=1.0):
    """HBM bytes of ``count`` GEMMs with L2 reuse (module docstring)."""
    l2_block = jnp.sqrt(jnp.maximum(l2_bytes / (3.0 * bytes_per_el), 1.0))
    return count * (m * n + jnp.maximum(m * k + k * n, 2.0 * m * n * k / l2_block)) * bytes_per_el


def gemm_time_s(m, n, k, peak_flops_per_s, eff, hbm_bw_bytes_per_s, l2_bw_bytes_per_s,
                l2_bytes, num_sms, tile_m, tile_n, bytes_per_el, kernel_launch_s,
                count=1.0, cluster=1.0):
    """Time of one batched (or grouped) GEMM kernel doing ``count`` identical problems of
    shape (m, n, k), as cuBLAS ``gemmStridedBatched`` and grouped-GEMM kernels do: the
    tiles of all problems share the waves, and the launch cost is paid once:
    ``max(t_compute, t_hbm, t_l2) + kernel_launch_s`` (:func:`gemm_terms`)."""
    t_compute, t_hbm, t_l2 = gemm_terms(m, n, k, peak_flops_per_s, eff, hbm_bw_bytes_per_s,
                                        l2_bw_bytes_per_s, l2_bytes, num_sms, tile_m, tile_n,
                                        bytes_per_el, count, cluster)
    return jnp.maximum(jnp.maximum(t_compute, t_hbm), t_l2) + kernel_launch_s


def gemm_flops(m, n, k, count=1.0):
    """Useful floating-point operations: 2*M*N*K per GEMM."""
    return count * 2.0 * m * n * k
