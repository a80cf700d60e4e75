"""Memory-bound kernels: time = bytes moved / achieved HBM bandwidth + launch cost.

Norms, rotary embedding, SwiGLU/GeLU, residual adds, dropout, softmax, cross-entropy,
embedding lookup and the optimizer step do O(1) FLOPs per byte, far below any GPU's
ridge point (A100: 312 TFLOP/s / 2 TB/s = 156 FLOP/byte), so the roofline is the
bandwidth term alone (Williams et al. 2009; Ivanov et al. 2021, "Data movement is all
you need", arXiv:2007.00072 §3 classify these as memory-bound).
"""

from __future__ import annotations


def memory_bound_time_s(bytes_moved, hbm_bw_bytes_per_s, kernel_launch_s, kernels=1.0):
    """``bytes_moved / hbm_bw + kernels * launch`` in seconds (hbm_bw already derated by
    throttle and achieved efficiency)."""
    return bytes_moved / hbm_bw_bytes_per_s + kernels * kernel_launch_s


# Optimizer step bytes per parameter (Adam with fp32 master weights, Megatron-LM
# distributed optimizer / apex FusedAdam multi-tensor apply): read grad (4), master (4),
# m (4), v (4); write master (4), m (4), v (4), bf16 param copy (2); plus the gradient
# norm for clipping, one more read of the grad (4).
ADAM_BYTES_PER_PARAM = 34.0


# DeepSpeed's bf16 optimizer accumulates every micro-batch's 16-bit gradients into its
# fp32 buffer in a separate pass (``BF16_Optimizer.update_hp_grads``): read the 16-bit
# grad (2), read and write the fp32 accumulator (4 + 4), clear the 16-bit grad (2).
# Megatron-LM fuses this into the weight-gradient GEMM (``gradient_accumulation_fusion``:
# the GEMM accumulates into the fp32 main_grad), so it costs nothing extra there.
DS_GRAD_ACCUM_BYTES_PER_PARAM = 12.0
