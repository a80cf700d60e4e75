"""Which fused attention kernel a training run uses, and its efficiency: a property of
(framework profile x GPU generation).

Two kernel classes, because on Hopper and Blackwell they differ by ~1.6x on the same
shapes:

* *native* -- the generation's own fused kernel, efficiency ``eff_attn``
  (:mod:`dse.spec.efficiency`): cuDNN fused SDPA / FlashAttention-3 (wgmma, TMA, warp
  specialisation) on Hopper, cuDNN on datacenter Blackwell, FlashAttention-2 on Ampere;
* *fa2* -- a FlashAttention-2-class kernel built on ``mma.sync`` (flash-attn 2.x,
  PyTorch SDPA's flash backend, Triton kernels without wgmma), efficiency
  ``eff_attn x eff_attn_fa2``; ``eff_attn_fa2`` is 0.56 on Hopper (FlashAttention-3,
  Shah et al. 2024, arXiv:2407.08608, Fig. 5-6: FA2 / cuDNN throughput, head dim 128,
  0.62 end to end, 0.56 as a ratio of tensor-core parts once both kernels' softmax
  exponentials are charged apart, :mod:`dse.spec.efficiency` ``attn_fa2``) and 1 on
  Ampere, where FA2 is the native kernel.

The kernel is the one the workload states (``attention = fa2 | fa3 | cudnn``,
:data:`dse.spec.layout.ATTENTION`), else the framework profile's
(:attr:`dse.spec.frameworks.FrameworkProfile.attention_kernel`: megatron native through
Transformer Engine, deepspeed / fsdp / fsdp2 fa2).  The unfused path (``attention =
unfused``) runs batched GEMMs at ``eff_gemm`` and is untouched.

The cost code reads ``hw.eff_attn`` (:mod:`dse.graph.ops`); :func:`with_attention_kernel`
returns the hardware with ``eff_attn`` set to the run's kernel efficiency (and
``eff_attn_fa2`` to 1, so applying it twice changes nothing).  Serving
(:mod:`dse.infer`) keeps the native kernel: vLLM / SGLang / TensorRT-LLM run FA3 / FlashInfer /
TRT-LLM's own kernels on Hopper.
"""

from __future__ import annotations

import jax.numpy as jnp

from dse.spec.frameworks import profile
from dse.spec.layout import ATTENTION_FA2, ATTENTION_NATIVE


def attention_kernel(wl):
    """The kernel class of workload ``wl``: :data:`ATTENTION_FA2` or
    :data:`ATTENTION_NATIVE` -- the stated one, else the framework profile's.  A traced
    value: ``wl.attention`` is a leaf of the workload (one compiled step serves every
    attention setting), the framework static."""
    default = ATTENTION_FA2 if profile(wl.framework).attention_kernel == "fa2" else ATTENTION_NATIVE
    a = wl.attention
    return jnp.where((a == ATTENTION_FA2) | (a == ATTENTION_NATIVE), a, default)


def attention_eff(hw, kernel):
    """Fraction of tensor peak the forward of ``kernel`` reaches on ``hw``:
    ``eff_attn`` (native) or ``eff_attn x eff_attn_fa2`` (fa2)."""
    return hw.eff_attn * jnp.where(kernel == ATTENTION_FA2, hw.eff_attn_fa2, 1.0)


def with_attention_kernel(hw, wl):
    """``hw`` with ``eff_attn`` = :func:`attention_eff` of ``wl``'s kernel and
    ``eff_attn_fa2`` = 1 (idempotent)."""
    return hw.replace(eff_attn=attention_eff(hw, attention_kernel(wl)),
                      eff_attn_fa2=1.0 + 0.0 * hw.eff_attn_fa2)
