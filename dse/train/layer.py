"""One transformer layer, one micro-batch, one GPU: forward and backward time, as a
reduction of the layer's operator graph (:func:`dse.graph.train.layer_ops`, whose
docstring lists the operators, shapes and bytes).

Reduction: forward (backward) compute = sum over the ``fwd`` (``bwd``) GEMMs, attention
cores and memory-bound passes of ``calls x unit time`` (:func:`dse.graph.ops.time_s`):
the kernels of one layer run back to back on one stream (sum).  The attention core is
the CP overlap window.  TP collectives are on the critical path (exposed == raw) unless
``--tp-comm-overlap``: then :func:`dse.cost.collectives.tp_overlap_cost_s` against the
window of the (unchunked) linear GEMMs.  Model FLOPs are the ``fwd`` and ``bwd``
operators' useful FLOPs (no recompute).

Host-bound floor (PyTorch eager, no CUDA graphs): the CPU issues every kernel, so a
pass of the layer takes at least ``host = HOST_OP_S x kernels`` (kernels counted by
:func:`dse.graph.ops.host_kernels` over the pass's operators); the GPU's share of the
pass, compute plus its exposed TP collectives, is ``max(gpu, host)`` (the CPU runs
ahead of the GPU asynchronously, so the two overlap and the slower one sets the pace;
the stall is charged to compute).  Small models on few GPUs live in this regime.

``HOST_OP_S`` is the host time per *kernel*, not per Python call: Megatron's GPT layer
(Megatron-LM / Megatron-DeepSpeed ``ParallelTransformerLayer``, mirrored in vTrain's
``src/model/gpt_modeling.py``) makes ~44 torch calls per layer forward (views,
permutes, splits, ``torch.empty``, autograd Functions around the TP regions, RNG-tracker
forks, the bias-dropout-add and bias-GeLU fusions) for ~18 kernels, ~2.4 calls per
kernel; each eager call costs ~5-25 us on the CPU (Python, pybind11, autograd
recording, the ATen dispatcher, ``cudaLaunchKernel``), so 2.4 x 15-20 us = 35-50 us.
40 us (one value for every framework and GPU) was chosen in that range by scanning 30 /
40 / 50 us against ``../shared/validation/vtrain.csv`` (docs/accuracy.md); the
calibration set is unchanged by it (every source within 0.1 %).  The kernels counted
include the per-tensor gradient accumulation after each micro-batch's backward
(:func:`dse.graph.train.grad_accumulate_ops`) and the five-kernel PyTorch softmax where
Megatron's fused one is not available (:func:`dse.cost.attention.fused_softmax_available`);
with them 35 us was rescanned (vtrain 11.4 % against 8.7 % at 40), so 40 stays.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from dse.cost.attention_kernel import with_attention_kernel
from dse.cost.collectives import tp_overlap_cost_s
from dse.graph.ops import Attention, Collective, Gemm, P2P, flops, host_kernels, map_ops, time_s, times_s
from dse.graph.train import layer_ops
from dse.spec.frameworks import PROFILES
from dse.spec.hardware import Hardware
from dse.spec.layout import Layout, Workload
from dse.spec.model import Model
from dse.cost.rates import Rates


# Host (CPU) seconds per kernel launched by PyTorch eager framework code, by framework
# code, from the framework profiles (dse.spec.frameworks; a code not listed takes
# megatron's): module docstring for what it counts and its source.
HOST_OP_S = {code: p.host_op_s for code, p in PROFILES.items()}


class LayerCost(NamedTuple):
    fwd_compute_s: object   # GEMMs + attention + element-wise, forward
    bwd_compute_s: object   # same, backward
    attn_s: object          # attention core forward + backward (the CP overlap window)
    selective_recompute_s: object  # extra backward time of selective recompute
    tp_comm_s: object       # TP/SP collectives, forward + backward (raw)
    tp_exposed_s: object    # their cost on the critical path (== raw unless overlapped)
    cp_comm_s: object       # ring-attention K/V exchange, forward + backward (raw)
    ep_comm_s: object       # MoE all-to-all, forward + backward
    model_flops: object     # forward+backward useful FLOPs (no recompute)
    host_stall_fwd_s: object = 0.0  # GPU idle waiting for the host, forward (in fwd_compute_s)
    host_stall_bwd_s: object = 0.0  # same, backward (in bwd_compute_s)
    fwd_flops: object = 0.0         # useful FLOPs of the forward ops (model_flops' share)
    bwd_flops: object = 0.0         # same, backward


def _sum(xs):
    out = 0.0
    for x in xs:
        out = out + x
    return out


def is_compute(op) -> bool:
    return not isinstance(op, (Collective, P2P))


def reduce_layer(ops, wl: Workload, lay: Layout, hw: Hardware, r: Rates) -> LayerCost:
    """The :class:`LayerCost` of one layer's operator list (module docstring); attention
    at the run's kernel efficiency (:func:`dse.cost.attention_kernel.with_attention_kernel`)."""
    hw = with_attention_kernel(hw, wl)
    times = times_s(ops, hw, r)
    pick = lambda cond: _sum(t for op, t in zip(ops, times) if cond(op))
    fwd = pick(lambda op: is_compute(op) and op.phase == "fwd")
    bwd = pick(lambda op: is_compute(op) and op.phase == "bwd")
    attn = pick(lambda op: isinstance(op, Attention) and op.phase in ("fwd", "bwd"))
    selective = pick(lambda op: op.phase == "recompute")
    group = lambda g: pick(lambda op: isinstance(op, (Collective, P2P)) and op.group == g)
    tp_comm, cp_comm, ep_comm = group("tp"), group("cp"), group("ep")
    tp_exposed = tp_comm
    tp_raw_fwd = pick(lambda op: isinstance(op, Collective) and op.group == "tp" and op.phase == "fwd")
    if wl.tp_overlap:
        on = (lay.sp > 0) & (lay.tp > 1)
        window = _sum(time_s(op.replace(chunks=1.0), hw, r) for op in ops
                      if isinstance(op, Gemm) and op.name.split(" ")[0] in ("qkv", "out", "fc1", "fc2"))
        tp_exposed = jnp.where(on, tp_overlap_cost_s(tp_comm, window, lay.tp * 1.0, hw.num_sms), tp_comm)
    # host-bound floor: a pass cannot run faster than the CPU issues its kernels; the
    # stall is charged to compute (the GPU idles between kernels); a full-iteration CUDA
    # graph (Workload.cuda_graphs: Megatron-Core cuda_graph_impl="full_iteration",
    # megatron/core/full_cuda_graph.py) replays the step's kernels from one graph launch,
    # so the host issues none of them one by one: no floor
    host_op_s = jnp.where(wl.cuda_graphs > 0, 0.0, HOST_OP_S.get(wl.framework, HOST_OP_S[0]))
    kernels = map_ops(host_kernels, ops)
    host = lambda phase: host_op_s * _sum(op.calls * k for op, k in zip(ops, kernels) if op.phase == phase)
    tp_share = jnp.where(tp_comm > 0, tp_raw_fwd / jnp.where(tp_comm > 0, tp_comm, 1.0), 0.5)
    stall_fwd = jnp.maximum(host("fwd") - fwd - tp_share * tp_exposed, 0.0)
    stall_bwd = jnp.maximum(host("bwd") - bwd - (1.0 - tp_share) * tp_exposed, 0.0)
    fwd, bwd = fwd + stall_fwd, bwd + stall_bwd
    op_flops = map_ops(flops, ops)
    model_flops = _sum(f for op, f in zip(ops, op_flops) if op.phase in ("fwd", "bwd"))
    phase_flops = lambda phase: _sum(f for op, f in zip(ops, op_flops) if op.phase == phase)
    return LayerCost(fwd, bwd, attn, selective, tp_comm, tp_exposed, cp_comm, ep_comm, model_flops,
                     stall_fwd, stall_bwd, phase_flops("fwd"), phase_flops("bwd"))


def layer_cost(model: Model, wl: Workload, lay: Layout, hw: Hardware, r: Rates) -> LayerCost:
    """:class:`LayerCost` of the layer's operator graph."""
    return reduce_layer(layer_ops(model, wl, lay, r.act_bytes), wl, lay, hw, r)
