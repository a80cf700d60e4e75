"""Peak memory per GPU for one training step (the heaviest pipeline stage).

Model states (mixed-precision Adam; Rajbhandari et al. 2020, ZeRO, §3; Megatron-LM keeps
fp32 "main" gradients, ``accumulate_allreduce_grads_in_fp32``):
  weights 2 B/param (bf16; +1 B fp8 copy of the layers' linear weights with TE fp8 --
  not of the embedding or LM head; 4 B for fp32), or, where the framework profile runs
  fp8 primary weights (megatron: ``--fp8-param-gather``), 1 B + the Hopper transpose for
  the linears (:func:`weight_bytes_per_param`),
  gradients 4 B/param (2 B in the megatron profile's fp8 recipes,
  :func:`dse.graph.train.main_grad_bytes`), optimizer 12 B/param (fp32 master, Adam m
  and v).
  ZeRO-1 (distributed optimizer) shards the optimizer over the DP x CP group (a MoE
  model's routed-expert parameters over the expert-data-parallel group,
  :func:`sharded_params`), ZeRO-2 also the gradients, ZeRO-3 also the weights (plus two layers of gathered weights in
  flight, the FSDP prefetch).
DeepSpeed (``framework`` 1; DeepSpeed ``runtime/bf16_optimizer.py`` and
``zero/stage_1_and_2.py``) keeps the 16-bit gradients in ``param.grad`` until the step
*and* an fp32 gradient buffer the size of the local parameters: gradients 2 + 4 B/param
(4 B in fp32 training, where there are no 16-bit grads), all of it sharded from ZeRO-2
on; with ZeRO >= 1 and dp > 1 it also holds the
contiguous reduce bucket, ``reduce_bucket_size`` = 5e8 elements of 16-bit (DeepSpeed config
default).
PyTorch FSDP (``framework`` 2, 3; :mod:`dse.spec.frameworks`) under ZeRO-3: fp32 sharded
parameters (the master copy), fp32 sharded gradients and Adam m, v -- 16 B/param over
the shard -- plus the 16-bit gathered units in flight and one unit's unsharded gradient.
Parameters per GPU: ``vpp*ceil(L/(pp*vpp))`` layers (the documented uneven split: the
heaviest stage takes the ceiling) with dense weights /tp and expert weights /(etp*ep) (expert TP, MoE parallel folding); the input
embedding on the first stage and the LM head on the last (both when pp = 1, one shared
matrix when tied), each V*h/tp.

Activations per layer per micro-batch, generalising Korthikanti et al. 2022 (eq. 1-2,
``sbh(34 + 5as/h)`` for GPT) to GQA, gated MLPs, models without dropout and
FlashAttention (which stores O and the fp32 log-sum-exp instead of the s^2 scores; the
unfused path adds the scores, ``(2 + 3*dropout)*a*s^2*b`` bytes, which selective
recompute drops):
  replicated region  (8 + 2*dropout) * sbh  bytes  [/t with sequence parallelism]
  TP region          2sb(a+2g)d + 2sbh + 4sba + 2sb*f*(1+gated) + 2sbf   [/t]
(MoE: the MLP terms scale with top_k.)  With TE fp8 the QKV, FC1 and FC2 inputs are saved
as fp8 (1 B) and the projection input gains an fp8 copy: ``-(h + f)/t`` bytes per token
with SP, ``-2h + (h - f)/t`` without (the norm outputs are then replicated).  Full recompute stores only each
layer's input, 2sbh [/t with SP], plus one layer's full set while it is recomputed.
In flight on the first stage: ``min(m, pp)`` micro-batches with 1F1B, times
``1 + (pp-1)/(pp*vpp)`` with interleaving (Narayanan et al. 2021, §2.2.2).
LM head: for one micro-batch the fp32 softmax that ``vocab_parallel_cross_entropy`` saves
for backward (4 B) and, in backward, the 16-bit gradient cast back for the output layer
(2 B): ``6 * sb*V/t`` bytes (the bf16 logits themselves are freed after the fp32 cast).

Allocator reserve: a fixed ``RESERVE_BYTES`` for the CUDA context, cuBLAS/NCCL
workspaces, plus ``FRAGMENTATION`` of the allocated bytes for the PyTorch caching
allocator's fragmentation (PyTorch docs, "CUDA memory management";
``torch.cuda.memory_reserved`` typically exceeds ``memory_allocated`` by 5-10 %).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from dse.cost.attention import flash_available
from dse.cost.rates import linear_el_bytes, low_precision
from dse.graph.moe import dp_shard_params, expert_tp
from dse.graph.train import main_grad_bytes, module_on
from dse.spec.frameworks import moe_a2a_overlap, profile
from dse.train.moe_overlap import overlap_allowed
from dse.spec.hardware import GIB
from dse.spec.layout import (FRAMEWORK_MEGATRON, PRECISION_MXFP8, PRECISION_NVFP4, RECOMPUTE_FULL, Layout,
                             Workload)
from dse.spec.model import (Model, dense_layer_fraction, expert_ffn, head_dim_of, is_mla,
                            layer_params, mla_attention_params, select, shared_ffn,
                            stage_layer_counts)

RESERVE_BYTES = 1.0 * GIB
DS_REDUCE_BUCKET_ELEMS = 5e8
LOGIT_BYTES = 6.0
FP8_TRANSPOSE_BYTES = 1.0
FRAGMENTATION = 0.05


class MemoryBreakdown(NamedTuple):
    weights_bytes: object
    grads_bytes: object
    optimizer_bytes: object
    activations_bytes: object
    total_bytes: object
    params_per_gpu: object
    recompute_fraction: object   # share of the rank's layers fully recomputed (0..1)
    expert_params_per_gpu: object = 0.0  # routed-expert share of params_per_gpu (MoE)


def head_stage_deficit(slack_layers, mtp_layers, layers_per_stage=None):
    """Layers the LM head's stage holds fewer than ``L_st`` under an uneven split (``slack
    >= 1``): one (the loss counted as a layer, :func:`dse.train.step.stage_balanced_head_s`),
    or with multi-token prediction all of the slack -- Megatron-Bridge's DeepSeek-V3 layouts (``recipes/deepseek/h100/
    deepseek_v3.py`` ``_get_deepseek_v3_pipeline_layout``: PP 4 ``[E+16, 16, 16, 13+mtp+L]``,
    PP 8 ``[E+8, 8 x 6, 5+mtp+L]``, PP 16 / (4, 4) / (8, 2) ``[E+4, 4 x 14, 1+mtp+L]``)
    put the MTP module and the loss beside the fewest decoder layers -- but never more than
    the ``layers_per_stage`` (``L_st``) it has: at PP 32 DeepSeek-V3 (L_st 2, slack 3) the
    head's stage holds no decoder layer and the third short layer falls on another stage."""
    j = jnp.where(mtp_layers > 0, slack_layers, 1.0)
    return j if layers_per_stage is None else jnp.minimum(j, layers_per_stage)


def layers_per_stage(model: Model, lay: Layout):
    """Layers on the heaviest pipeline rank: ``vpp * ceil(L / (pp*vpp))`` (uneven splits
    put the ceiling on the heaviest virtual stage)."""
    return lay.vpp * jnp.ceil(model.num_layers / (lay.pp * lay.vpp))


def params_per_gpu(model: Model, lay: Layout):
    """Parameters held by one GPU of the heaviest stage (before ZeRO sharding): dense
    weights (shared experts included) /tp, expert weights /(etp*ep), etp the expert TP
    (:func:`dse.graph.moe.expert_tp`; ``tp`` unless EP folds over TP ranks) (:func:`dse.spec.model.layer_params`); MLA's down projections are replicated on every
    TP rank (:func:`dse.spec.model.mla_attention_params`).  A MoE model with dense layers
    counts the heaviest stage's MoE and dense layers (:func:`dse.spec.model.stage_layer_counts`)."""
    p = layer_params(model)
    moe = model.num_experts > 1
    dense = p.attention + p.router + p.shared + jnp.where(moe, 0.0, p.experts)
    # expert weights over ep x expert-TP ranks (dse.graph.moe.expert_tp: MoE parallel folding)
    experts = jnp.where(moe, p.experts / (lay.ep * expert_tp(lay)), 0.0)
    down = mla_attention_params(model)[0]
    replicated = select(is_mla(model), down - down / lay.tp, 0.0)
    per_layer = dense / lay.tp + experts + p.norms + replicated
    L_st = layers_per_stage(model, lay)
    layers = L_st * per_layer
    x_dense = dense_layer_fraction(model)
    if not (isinstance(x_dense, float) and x_dense == 0.0):
        pd = layer_params(model, dense=True)
        per_dense = (pd.attention + pd.experts) / lay.tp + pd.norms + replicated
        n_moe, n_dense = stage_layer_counts(model, L_st)
        layers = jnp.where(x_dense > 0, n_moe * per_layer + n_dense * per_dense, layers)
    return layers + embedding_params_per_gpu(model, lay)


def expert_params_per_gpu(model: Model, lay: Layout):
    """The routed-expert share of :func:`params_per_gpu`: the heaviest stage's MoE layers
    times ``experts / (etp*ep)``; 0 for a dense model.  These parameters are reduced and
    sharded over the expert-data-parallel group (:func:`dse.graph.moe.expert_dp_size`)."""
    moe = model.num_experts > 1
    per_layer = layer_params(model).experts / (lay.ep * expert_tp(lay))
    n_moe, _ = stage_layer_counts(model, layers_per_stage(model, lay))
    return jnp.where(moe, n_moe * per_layer, 0.0)


def sharded_params(P, Pe, lay):
    """Parameters of one GPU's shard when ``P`` local parameters, ``Pe`` of them routed
    experts, are sharded by the distributed optimizer / ZeRO: the dense ones over
    ``dp*cp``, the expert ones over ``edp`` (Megatron-Core ``DistributedOptimizer``
    shards each buffer over its own data-parallel group; DeepSpeed MoE likewise over
    the expert-data-parallel group, ``deepspeed/moe/utils.py``): the one formula,
    :func:`dse.graph.moe.dp_shard_params`, that the optimizer step's graph op uses."""
    return dp_shard_params(P, Pe, lay)


def embedding_params_per_gpu(model: Model, lay: Layout):
    """Input embedding and LM head parameters on the heaviest stage: ``V*h/tp`` each, one
    matrix per stage with pp > 1, two with pp = 1 unless tied."""
    emb = model.vocab_size * 1.0 * model.hidden_size / lay.tp
    return jnp.where(lay.pp > 1, 1.0, 2.0 - model.tied_embeddings) * emb


def linear_input_saving(wl: Workload):
    """Bytes saved per element of a 16-bit linear input that Transformer Engine stores for the
    weight gradient in its low-precision copy: ``fp8 (2 - q)``, ``q`` the quantized element's
    bytes (fp8 1, NVFP4 0.5625; 0 in 16-bit training)."""
    return low_precision(wl.precision) * (2.0 - linear_el_bytes(wl.precision, 2.0))


def activation_bytes_per_layer(model: Model, wl: Workload, lay: Layout, act_bytes):
    """Stored activation bytes of one layer for one micro-batch (no recompute), as
    (everything but the attention scores, the unfused path's score bytes)."""
    s = wl.seq_len / lay.cp
    b = lay.mbs * 1.0
    h = model.hidden_size * 1.0
    a = model.num_attention_heads * 1.0
    g = model.num_kv_heads * 1.0
    d = head_dim_of(model)
    f = expert_ffn(model) * model.top_k * 1.0 + shared_ffn(model)   # routed + shared experts
    t = lay.tp * 1.0
    el = act_bytes / 2.0     # formulas below are in 2-byte units
    replicated = (8.0 + 2.0 * model.dropout) * s * b * h * el
    replicated = jnp.where(lay.sp > 0, replicated / t, replicated)
    tp_region = (2 * s * b * (a + 2 * g) * d * el + 2 * s * b * a * d * el + 4 * s * b * a
                 + 2 * s * b * f * (1.0 + model.gated_mlp) * el + 2 * s * b * f * el) / t
    # Transformer Engine fp8 saves each linear's input for its weight gradient as fp8
    # (1 B): the two norm outputs (QKV and FC1 inputs) and the FC2 input shrink by half;
    # the projection's input is kept twice, bf16 for attention backward plus its fp8 copy.
    # NVFP4 keeps q = 0.5625 B (its column-wise copy for wgrad, NVFP4_BYTES) instead of 1
    fp8 = low_precision(wl.precision)
    q = linear_el_bytes(wl.precision, 2.0)
    saved = linear_input_saving(wl)
    replicated = replicated - saved * jnp.where(lay.sp > 0, 2 * s * b * h / t, 2 * s * b * h) * el
    tp_region = tp_region + fp8 * (q * s * b * a * d - (2.0 - q) * s * b * f) * el / t
    # unfused attention also stores the scores: softmax output (2 B) and, with dropout,
    # its mask (1 B) and output (2 B) per element -- Korthikanti's 5as^2b term
    fused = jnp.logical_and(wl.attention, flash_available(d))
    scores = jnp.where(fused, 0.0, (2.0 + 3.0 * model.dropout) * a * s * wl.seq_len * b * el / t)
    return replicated + tp_region, scores


def module_savings(model: Model, wl: Workload, lay: Layout, act_bytes):
    """Stored activation bytes of one layer for one micro-batch that Megatron-Core's selective
    recompute modules beside ``core_attn`` free (``wl.recompute_modules``; the work they add:
    :func:`dse.graph.train.module_recompute_ops`), in the terms of
    :func:`activation_bytes_per_layer` (``el`` = act_bytes / 2; a linear's input is stored at
    ``2 - fp8 (2 - q)`` bytes per 16-bit element, the fp8 copy Transformer Engine keeps):

    * ``mla_up_proj`` frees the decompressed q, k, v the attention core reads -- the
      ``2 s b (a + 2 g) d / t`` term (``CheckpointWithoutOutput`` discards them once the core
      has run and rebuilds them before its backward; MLA models only);
    * ``layernorm`` frees each separate norm's output, ``lin s b h`` [/t with SP], for the
      input norm of an MLA layer and the pre-MLP norm of a MoE layer (a dense layer's norms
      are fused into Transformer Engine's ``LayerNormLinear``: none);
    * ``moe_act`` frees the routed experts' activation output (fc2's input), ``lin s b f_r / t``
      with ``f_r = top_k x moe_ffn``, on the MoE share of the layers;
    * ``mlp`` frees the dense MLP's internals -- its normed input, fc1's output
      ``2 s b f (1 + gated) / t`` and the activation ``lin s b f / t`` -- on a dense model's
      layers or a MoE model's dense share (:func:`dse.spec.model.dense_layer_fraction`; the
      mean over the model's layers);
    * ``shared_experts`` frees the shared experts' fc1 output and activation."""
    s = wl.seq_len / lay.cp
    b = lay.mbs * 1.0
    h = model.hidden_size * 1.0
    t = lay.tp * 1.0
    el = act_bytes / 2.0
    gated = model.gated_mlp * 1.0
    lin = 2.0 - linear_input_saving(wl)
    normed = lin * s * b * h * jnp.where(lay.sp > 0, 1.0 / t, 1.0)
    moe = jnp.where(model.num_experts > 1, 1.0, 0.0)
    x_dense = dense_layer_fraction(model)
    w_moe = moe * (1.0 - x_dense)
    mla = jnp.where(is_mla(model), 1.0, 0.0)
    qkv = 2.0 * s * b * (model.num_attention_heads + 2.0 * model.num_kv_heads) * head_dim_of(model) / t
    f_r = expert_ffn(model) * model.top_k * 1.0
    f_d = jnp.where(model.num_experts > 1, model.ffn_hidden_size * 1.0, expert_ffn(model) * 1.0)
    fs = shared_ffn(model) * 1.0
    inner = lambda f: 2.0 * s * b * f * (1.0 + gated) / t + lin * s * b * f / t   # fc1 out + act out
    saved = (module_on(wl, "mla_up_proj") * mla * qkv
             + module_on(wl, "layernorm") * (mla + w_moe) * normed
             + module_on(wl, "moe_act") * w_moe * lin * s * b * f_r / t
             + module_on(wl, "mlp") * ((1.0 - moe) + moe * x_dense) * (normed + inner(f_d))
             + module_on(wl, "shared_experts") * w_moe * inner(fs))
    return saved * el


def weight_bytes_per_param(model: Model, wl: Workload, lay: Layout, act_bytes, params,
                           fp8_transpose=1.0):
    """Mean bytes per local parameter of the weights a GPU holds (``params`` of them; the
    embedding and LM head, :func:`embedding_params_per_gpu`, always 16-bit):

    * 16-bit (4 B in fp32 training), plus with TE fp8 the cached fp8 copy of each
      linear's weight (1 B) -- Transformer Engine casts the weights on a step's first
      micro-batch and reuses the copy (``is_first_microbatch``) -- and, where
      ``fp8_transpose`` is 1, its transposed fp8 copy (1 B: TE 1.x
      ``module/linear.py`` ``get_fp8_weights_scratchpad`` returns ``[weight_fp8,
      weight_t_fp8]``; TE 2.x caches a ``Float8Tensor`` whose ``_transpose`` exists
      unless ``is_non_tn_fp8_gemm_supported()``):
      ``per_linear = base + 1 + FP8_TRANSPOSE_BYTES * fp8_transpose``;
    * fp8 primary weights (framework profile ``fp8_primary_weights``, Megatron-Core
      ``--fp8-param-gather``): the linears' parameters *are* TE ``Float8Tensor``s, 1 B of
      data plus, where ``fp8_transpose`` is 1 (Hopper), the 1 B column-wise copy
      (``_transpose``) the backward's dgrad GEMM reads (TransformerEngine
      transformer_engine/pytorch/tensor/float8_tensor.py: a transpose is materialised
      unless ``is_non_tn_fp8_gemm_supported()``, transformer_engine/pytorch/utils.py:
      compute capability 10.x / 11.x or >= 13); datacenter Blackwell keeps none
      (``Hardware.fp8_transpose`` = 0, :mod:`dse.spec.efficiency`):
      ``per_linear = 1 + FP8_TRANSPOSE_BYTES * fp8_transpose``;
    * NVFP4 (precision code 3): the same with ``q`` = 0.5625 B per element in place of
      fp8's 1 B, and always both copies (TE ``NVFP4Tensor`` keeps row- and column-wise data:
      the NVFP4 GEMM reads K-major operands with their block scales along K);
    * MXFP8 (code 5): ``q`` = 1 + 1/32 and both copies (TE ``MXFP8Tensor``: the fprop GEMM
      reads the row-wise, dgrad the column-wise copy, scales along each one's K)."""
    base = jnp.where(act_bytes > 2, 4.0, 2.0)
    fp8 = low_precision(wl.precision)
    q = linear_el_bytes(wl.precision, 2.0)
    # NVFP4 and MXFP8 keep both the row- and the column-wise copy on every GPU (TE
    # NVFP4Tensor; MXFP8Tensor's two usages, set_usage(rowwise, columnwise))
    both = (wl.precision == PRECISION_NVFP4) | (wl.precision == PRECISION_MXFP8)
    transpose = jnp.where(both, 1.0, FP8_TRANSPOSE_BYTES * fp8_transpose)
    linear = params - embedding_params_per_gpu(model, lay)
    if profile(wl.framework).fp8_primary_weights:
        per_linear = fp8 * q * (1.0 + transpose) + (1.0 - fp8) * base
    else:
        per_linear = base + fp8 * q * (1.0 + transpose)
    return (base * (params - linear) + per_linear * linear) / params


def peak_inflight(model: Model, wl: Workload, lay: Layout, inflight0, m):
    """Micro-batches' worth of ``L_st`` layers whose activations the peak pipeline rank
    holds.  An even split: the first rank's ``inflight0`` (the most in flight).  An
    uneven Megatron-Core split (``slack = pp L_st - L >= 2``: the
    ``account_for_embedding/loss_in_pipeline_split`` layout the step time assumes,
    :func:`dse.train.step.stage_balanced_head_s`) gives the first virtual stage one
    layer fewer, so rank 0 and rank 1 are compared (Megatron-Core
    ``pipeline_parallel/schedules.py``: rank r runs ``(pp - r - 1) 2 + (vpp - 1) pp``
    warm-up chunks, plus one in the steady state; without interleaving ``min(m, pp - r)``
    micro-batches):

      rank 0: ``inflight0 L_st - n_c0``, ``n_c0`` its in-flight first chunks (warm-up
              runs chunk c for groups of pp micro-batches in turn:
              ``pp floor(C / (pp vpp)) + min(C mod (pp vpp), pp)`` of ``C = inflight0 vpp``
              chunks; all ``inflight0`` without interleaving);
      rank 1: ``L_st`` layers, 2 chunks fewer (``min(m, pp - 1)`` micro-batches without
              interleaving);

    returning ``max(rank 0, rank 1) / L_st``.  Llama 3.1 405B (126 layers) at PP16 VPP4:
    rank 0 holds 127 layer-activations of one micro-batch, rank 1 154, against 158 for
    eight layers on rank 0.  Other frameworks keep ``inflight0``."""
    L_st = layers_per_stage(model, lay)
    slack = lay.pp * L_st - model.num_layers
    # the first stage is short only if the head's stage leaves it slack (head_stage_deficit)
    on = (lay.pp > 1) & (slack - head_stage_deficit(slack, model.mtp_layers, L_st) >= 1) \
        & (wl.framework == FRAMEWORK_MEGATRON)
    vpp = lay.vpp * 1.0
    chunks0 = inflight0 * vpp
    group = lay.pp * vpp
    first = jnp.where(vpp > 1, lay.pp * jnp.floor(chunks0 / group)
                      + jnp.minimum(jnp.mod(chunks0, group), lay.pp * 1.0), inflight0)
    rank0 = inflight0 * L_st - first
    rank1 = jnp.where(vpp > 1, jnp.maximum(inflight0 - 2.0 / vpp, 0.0),
                      jnp.minimum(m, lay.pp - 1.0)) * L_st
    return jnp.where(on, jnp.maximum(rank0, rank1) / L_st, inflight0)


def memory_per_gpu(model: Model, wl: Workload, lay: Layout, act_bytes, hbm_bytes=jnp.inf,
                   fp8_transpose=1.0) -> MemoryBreakdown:
    """Peak bytes per GPU (module docstring).  ``hbm_bytes`` is only used by block
    recompute, which recomputes the fewest whole layers (at least one) that bring the
    total under it; ``fp8_transpose`` is the hardware's (:func:`weight_bytes_per_param`)."""
    P = params_per_gpu(model, lay)
    shard = lay.dp * lay.cp * 1.0
    # one GPU's shard: dense parameters over dp*cp, routed experts over edp (MoE)
    Ps = sharded_params(P, expert_params_per_gpu(model, lay), lay)
    prof = profile(wl.framework)
    weights = P * weight_bytes_per_param(model, wl, lay, act_bytes, P, fp8_transpose)
    weight_b = weights / P
    L_st = layers_per_stage(model, lay)
    per_layer_w = (P / L_st) * weight_b
    weights = jnp.where(lay.zero >= 3, weights * Ps / P + 2.0 * per_layer_w, weights)
    grad_b = main_grad_bytes(wl)
    grads = jnp.where(lay.zero >= 2, grad_b * Ps, grad_b * P)
    if wl.framework == 1:
        bucket = jnp.where((lay.zero >= 1) & (shard > 1), DS_REDUCE_BUCKET_ELEMS * 2.0, 0.0)
        ds_grad_b = jnp.where(act_bytes > 2, 4.0, 6.0)
        grads = jnp.where(lay.zero >= 2, ds_grad_b * Ps, ds_grad_b * P) + bucket
    opt = jnp.where(lay.zero >= 1, 12.0 * Ps, 12.0 * P)
    if prof.z3_state_bytes_per_param is not None:
        # PyTorch FSDP (FULL_SHARD / fully_shard): the sharded parameter is the fp32
        # master (no 16-bit shard), fp32 sharded gradients, Adam m and v; 16-bit copies
        # only of the gathered units (the one computing and ``z3_prefetch_depth`` ahead)
        # plus one unit's unsharded gradient awaiting its reduce-scatter
        unit_p = (P - embedding_params_per_gpu(model, lay)) / (L_st * prof.z3_units_per_layer)
        z3 = lay.zero >= 3
        in_flight = (1.0 + prof.z3_prefetch_depth) * unit_p * weight_b
        unsharded_grad = prof.z3_grad_reduce_bytes * unit_p
        if not prof.z3_regather_with_pp:
            # with PP the stage's parameters stay gathered for the step and the 16-bit
            # gradients accumulate unsharded until the last micro-batch's reduce-scatter
            keep = lay.pp > 1
            in_flight = jnp.where(keep, P * weight_b, in_flight)
            unsharded_grad = jnp.where(keep, 2.0 * P, unsharded_grad)
        weights = jnp.where(z3, 4.0 * Ps + in_flight, weights)
        grads = jnp.where(z3, 4.0 * Ps + unsharded_grad, grads)
        opt = jnp.where(z3, 8.0 * Ps, opt)

    m = wl.global_batch / (lay.dp * lay.mbs)
    inflight = jnp.minimum(m, lay.pp * 1.0)
    inflight = jnp.where(lay.vpp > 1, inflight * (1.0 + (lay.pp - 1.0) / (lay.pp * lay.vpp)), inflight)
    if moe_a2a_overlap(wl.framework) or wl.moe_a2a_overlap:
        # MoE 1F1B A2A overlap (dse.train.moe_overlap): the forward of the next micro-batch
        # runs beside the backward of the current one *layer by layer* -- forward layer i
        # with backward layer L-1-i (Megatron-Core combined_1f1b.py "Phases 1: 1st
        # microbatch backward + 2nd microbatch forward"; model_chunk_schedule_plan.py:
        # backward layers ``pop_layer`` in FILO order), so each backward layer frees its
        # activations as the forward adds one: one layer more than a micro-batch
        # (1 / L_st), not a second micro-batch.  The interleaved schedule also runs one
        # more warm-up virtual micro-batch (one chunk, 1 / vpp; schedules.py)
        # Megatron-Core's conditions (overlap_allowed), read on the layout's recompute
        # setting: full or block (codes >= 2) refuse it, before the block count is chosen
        allowed = overlap_allowed(model, lay, jnp.where(lay.recompute >= RECOMPUTE_FULL, 1.0, 0.0))
        extra = jnp.where(lay.pp == 1, 1.0 / L_st, 1.0 / lay.vpp + 1.0 / L_st)
        inflight = inflight + jnp.where(allowed, jnp.minimum(m - inflight, 1.0) * extra, 0.0)
    inflight = peak_inflight(model, wl, lay, inflight, m)
    no_scores, scores = activation_bytes_per_layer(model, wl, lay, act_bytes)
    full_layer = no_scores + scores
    T = lay.mbs * wl.seq_len / lay.cp
    layer_input = 2.0 * T * model.hidden_size * (act_bytes / 2.0)
    layer_input = jnp.where(lay.sp > 0, layer_input / lay.tp, layer_input)
    logits = LOGIT_BYTES * T * model.vocab_size / lay.tp
    states = weights + grads + opt
    # block recompute: the fewest of the rank's L_st layers (at least one) whose inputs
    # alone are kept, so that the total fits: solve (A0 - k*saving + full_layer)*(1+frag)
    # + reserve <= hbm for k, A0 the allocation without recompute
    a0 = states + L_st * inflight * full_layer + logits
    a_max = (hbm_bytes - RESERVE_BYTES) / (1.0 + FRAGMENTATION)
    saving = jnp.maximum(inflight * (full_layer - layer_input), 1.0)
    k = jnp.clip(jnp.ceil((a0 + full_layer - a_max) / saving), 1.0, L_st)
    # with interleaving, --recompute-num-layers counts per virtual-pipeline chunk, so the
    # rank recomputes a multiple of vpp layers
    k = jnp.minimum(lay.vpp * jnp.ceil(k / lay.vpp), L_st)
    frac = jnp.where(lay.recompute == 2, 1.0, jnp.where(lay.recompute == 3, k / L_st, 0.0))
    # selective: the scores only with core_attn among the modules, less what the others free
    selective = jnp.maximum(no_scores + (1.0 - module_on(wl, "core_attn")) * scores
                            - module_savings(model, wl, lay, act_bytes), layer_input)
    per_layer = jnp.where(lay.recompute == 1, selective, frac * layer_input + (1.0 - frac) * full_layer)
    acts = L_st * inflight * per_layer + jnp.where(frac > 0, full_layer, 0.0) + logits
    allocated = states + acts
    total = allocated * (1.0 + FRAGMENTATION) + RESERVE_BYTES
    return MemoryBreakdown(weights, grads, opt, acts, total, P, frac, expert_params_per_gpu(model, lay))
