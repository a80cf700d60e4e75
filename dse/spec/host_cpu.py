"""The host CPU's speed at a framework's Python work, relative to an x86 DGX host.

Serving engines whose scheduler and model code are Python (vLLM, SGLang, the TensorRT-LLM
PyTorch backend) spend host time per pass and per running sequence that does not shrink
with a faster GPU (:mod:`dse.infer.engines`: ``eager_op_s``, ``seq_overhead_s``).  Those
constants are per-operation costs measured on, or scaled to, an x86 DGX host (Intel Xeon
Platinum 8480C, DGX H100).  Grace-hosted systems (GH200, GB200, GB300: Arm Neoverse V2
cores) run the same Python work slower, and the hardware entry carries the ratio:

    ``host_s(hw) = host_s(x86 DGX) x hw.host_cpu_slowdown``

Measured (NVIDIA/TransformerEngine issue #2053, "High CPU overhead on Grace systems",
2025-08: CPU time of one ``torch.nn.Linear`` forward, bf16, hidden 2048, 8192 tokens, the
PyTorch path without Transformer Engine):

    ==========  =================  ==========================
    host        CPU time per call  ratio to the H100 DGX Xeon
    ==========  =================  ==========================
    H100 DGX    13.48 us           1
    GH200       33.17 us           2.46  (``GH200_SLOWDOWN``)
    GB200       37.08 us           2.75  (``GB200_SLOWDOWN``)
    ==========  =================  ==========================

GB300 trays carry the same Grace CPU as GB200 and take its ratio (no separate measurement
found).  The ratio applies to Python host work only: the GPU's kernels, the C++ executor
of TensorRT-LLM's TensorRT backend and CUDA-graph replays do not read it.
"""

from __future__ import annotations

X86_DGX_LINEAR_CPU_US = 13.48    # TE #2053: torch Linear forward CPU time, H100 DGX (Xeon 8480C)
GH200_LINEAR_CPU_US = 33.17      # TE #2053: same on GH200 (Grace)
GB200_LINEAR_CPU_US = 37.08      # TE #2053: same on GB200 (Grace)
GH200_SLOWDOWN = GH200_LINEAR_CPU_US / X86_DGX_LINEAR_CPU_US     # 2.46
GB200_SLOWDOWN = GB200_LINEAR_CPU_US / X86_DGX_LINEAR_CPU_US     # 2.75


def python_host_s(x86_s, hw):
    """Host seconds of Python work that takes ``x86_s`` on an x86 DGX host, on ``hw``'s
    host: ``x86_s x hw.host_cpu_slowdown`` (module docstring)."""
    return x86_s * hw.host_cpu_slowdown
