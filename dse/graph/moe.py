"""The mixture-of-experts block of one training layer's operator graph: Megatron-Core
``MoELayer`` (``megatron/core/transformer/moe/moe_layer.py``) with the top-k router
(``router.py``), the all-to-all token dispatcher (``token_dispatcher.py``
``MoEAlltoAllTokenDispatcher``) and Transformer Engine's grouped experts
(``experts.py`` ``TEGroupedMLP`` over ``transformer_engine/pytorch/module/grouped_linear.py``
``GroupedLinear``), eager (no CUDA graph), dropless, ``moe_permute_fusion`` on (every
Megatron-Bridge performance recipe sets it).  :func:`dse.graph.train.layer_ops` calls
:func:`moe_ops`; every operator's ``calls`` is 0 for a dense model.

With T tokens per GPU per micro-batch, h hidden, k = top_k, E experts, ep, t = tp,
``n_local = E / ep`` local experts, each seeing ``tpe = T k ep / E`` tokens on average
(uniform routing), times the busiest rank's load factor (:func:`ep_busiest_factor`):

* router: (T, E, h) gating GEMM, its dgrad and wgrad;
* experts: fc1 ``n_local`` x (tpe, f (1+gated)/t, h), fc2 ``n_local`` x (tpe, h, f/t) and
  their dgrad / wgrad.  ``GroupedLinear`` (discrete-weight path) hands the list of
  ``n_local`` problems to ``general_grouped_gemm``, which issues one cuBLAS GEMM per
  expert from its C++ loop (``transformer_engine/pytorch/csrc/extensions/gemm.cpp``
  ``te_general_grouped_gemm``, spread over ``NVTE_NUM_GEMM_STREAMS`` streams): the host
  launches ``n_local`` GEMMs per grouped call (:func:`dse.graph.ops.host_kernels` counts
  a GEMM record's ``count`` problems);
* token movement (memory-bound, 16-bit tokens; the all-to-all dispatcher does not
  quantize what it sends): the fused permute (``moe_utils.permute(fused=True)`` -> TE
  ``moe_permute_with_probs``) reads T h and writes T k h; with more than one local
  expert the received tokens are regrouped by expert (``sort_chunks_by_idxs``) and
  regrouped back after the experts (read + write T k h each); the fused unpermute reads
  T k h and writes T h.  Backward moves the same bytes (:data:`PERMUTE_PASSES`);
* fp8 (Transformer Engine): each expert's fc1 input is quantized separately
  (``tex.split_quantize`` over ``m_splits``): T k h elements, where the dense cast of
  :func:`dse.graph.train.layer_ops` counts T h, so the difference (3 bytes an element)
  is added here (twice that backward, as the dense cast), with one quantize kernel per
  expert for fc1's and fc2's inputs forward and for the two gradients backward;
* bookkeeping kernels per layer: :data:`MOE_FWD_KERNELS`, :data:`MOE_BWD_KERNELS`;
* communication (group ``ep``): dispatch and combine all-to-alls of T k h 16-bit
  elements each way (GShard, Lepikhin et al. 2020), the all-to-all of the routing
  probabilities (``token_dispatch`` sends ``permuted_probs`` beside the tokens: T k fp32
  values), and forward only the all-gather of the per-expert token counts over the
  TP x EP group (``preprocess``: ``gather_from_sequence_parallel_region`` of E int64).

With the flex dispatcher (DeepEP / HybridEP backend, ``Workload.moe_dispatcher``) the
dispatch and combine all-to-alls keep their bytes but each token crosses to a remote
node only once (:func:`dse.cost.collectives.node_dedup_cross_bytes`); its fused permute
kernels are still counted as the all-to-all dispatcher's.

**Busiest EP rank (dropless).**  Without a capacity factor (``moe_expert_capacity_factor``
None, Megatron-Core's default and every Megatron-Bridge MoE performance recipe: "all
benchmarks are token-dropless") the ranks receive what the router sends, and the
combine all-to-all is a barrier, so a layer lasts as long as its most loaded EP rank.
The Megatron-Bridge benchmarks set ``moe_router_force_load_balancing``
(``scripts/performance/configs/qwen/qwen3_llm_pretrain.py`` ``set_qwen3_common_configs``),
which replaces the router logits by fresh standard normals per token
(``megatron/core/transformer/moe/router.py`` ``TopKRouter.forward`` ->
``moe_utils.apply_random_logits`` -> ``RandomSTE``: ``logits.clone().normal_()``): each
token's k experts are a uniform random k-subset, so the ``N = e T_m k ep`` pairs of the
EP group fall on the ranks multinomially and the busiest rank holds ``ep_load_factor(N,
ep)`` times the mean (the Gaussian extreme-value bound of the serving model,
:func:`dse.cost.load_balance.ep_load_factor`, shared with serving).  The busiest rank's expert GEMMs
(``tpe``), its regroupings, its per-expert casts and the received (dispatch) / sent
(combine) bytes of its all-to-alls carry the factor; what a rank permutes and sends on
dispatch (``T_m k``) does not.  The expert GEMMs' model FLOPs stay the mean rank's
(``Gemm.useful = 1 / factor``): the other ranks idle, they do no extra work.  It is a lower bound: a learned router (aux-loss
balancing) is more skewed, which no calibration row measures.  With token dropping and
padding to capacity (``moe_pad_expert_input_to_capacity``, the NeMo Mixtral
``performance_mode`` recipes' ``MegatronTokenDropCallback``, capacity factor 1.0) every
expert computes exactly the mean, factor 1 (``Workload.moe_drop_pad``; the
``moe_token_drop`` column of ``dse predict``); runs that state nothing are dropless.

Not modelled here: the dispatcher's device-to-host sync of the split sizes
(``_maybe_dtoh_and_synchronize``, one per layer forward), which stops the host running
ahead across layers; CUDA graphs of the router / preprocess (``cuda_graph_scope``) or of
the whole iteration (a full-iteration graph is ``Workload.cuda_graphs``,
:func:`dse.train.layer.reduce_layer`), which remove host launches.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from dse.cost.load_balance import ep_load_factor
from dse.graph.ops import Collective, Gemm, MemPass, ddp_collectives
from dse.cost.rates import low_precision, quant_cast_bytes
from dse.spec.model import expert_ffn

# Kernels (and device-to-host copies) one eager MoE layer issues beyond its GEMMs,
# all-to-alls and the shared element-wise pass, counted from Megatron-Core
# (megatron/core/transformer/moe/, the alltoall dispatcher, moe_permute_fusion and
# moe_router_fusion on):
#   forward  router.py: fused top-k with score function (1), the aux-loss scores and
#            loss (fused_compute_score_for_moe_aux_loss, fused_moe_aux_loss: 2);
#            token_dispatcher.py preprocess: routing_map.sum + .long (2), input_splits
#            (1), slice + contiguous (1), three sums (3); _maybe_dtoh_and_synchronize:
#            five non-blocking D2H copies (tokens_per_expert, input_splits,
#            output_splits, output_splits_tp, num_global_tokens_per_local_expert: 5);
#            fused permute: row-id map (3) + permute (1); sort_chunks_by_idxs (2);
#            combine: sort back (2) + fused unpermute (1)                        = 24
#   backward unpermute (1), the two regroupings (2), permute of tokens and probs (2),
#            top-k / softmax (1) and aux loss (2) backward, the probs gradient
#            accumulation (1)                                                     = 9
MOE_FWD_KERNELS = 24.0
MOE_BWD_KERNELS = 9.0
# token passes over T k h elements per direction (module docstring): permute write,
# two regroupings (read + write each), unpermute read = 6 T k h, plus T h read + T h
# written at the ends (the ``2 T h`` term of :func:`moe_ops`)
PERMUTE_PASSES = 6.0
PROB_BYTES = 4.0          # routing probabilities travel as fp32
COUNT_BYTES = 8.0         # per-expert token counts are int64


def _linear(name, m, n, k, count, fwd_chunks, dgrad_chunks):
    """A linear's three GEMMs: forward (m, n, k), dgrad (m, k, n), wgrad (k, n, m)."""
    return (Gemm(m, n, k, count, fwd_chunks, name=f"{name}", phase="fwd"),
            Gemm(m, k, n, count, dgrad_chunks, name=f"{name} dgrad", phase="bwd"),
            Gemm(k, n, m, count, 1.0, name=f"{name} wgrad", phase="bwd"))


class MoEOps(NamedTuple):
    """The MLP block's operators in the order :func:`dse.graph.train.layer_ops` lists
    them (a dense model keeps its exact operator list: the MoE-only ones have
    ``calls`` 0)."""
    mlp: list        # fc1 / fc2 (a dense model's MLP, or the grouped experts)
    router: list     # the gating GEMMs
    passes: list     # token permutation, per-expert quantization, bookkeeping kernels
    comm: list       # EP all-to-alls and the token-count all-gather
    imbalance: object = 1.0   # the busiest EP rank's load over the mean (ep_busiest_factor)


def expert_tp(lay):
    """Expert tensor parallelism of the layout (MoE parallel folding, Megatron-Core
    ``megatron/core/parallel_state.py``: the expert grid ``etp x ep x edp`` tiles the
    ``tp x cp x dp`` ranks of a stage): ``tp`` -- ``ModelParallelConfig.__post_init__``
    sets ``expert_tensor_parallel_size = tensor_model_parallel_size`` when it is not given
    -- where ``ep`` divides ``dp*cp``, else 1 (the only expert TP with which an ``ep``
    that spans TP ranks tiles the grid; every Megatron-Bridge Qwen3 recipe sets it,
    ``scripts/performance/configs/qwen/qwen3_workload_base_configs.py``
    ``expert_tensor_parallel_size=1``)."""
    t = lay.tp * 1.0
    fits = jnp.mod(lay.dp * lay.cp * 1.0, lay.ep * 1.0) == 0
    return jnp.where(fits, t, 1.0)


def expert_dp_size(lay):
    """Ranks of the expert-data-parallel group, ``edp = tp cp dp / (etp ep)`` (MoE parallel
    folding, Megatron-Core ``megatron/core/parallel_state.py``: the expert rank generator
    tiles the ``tp x cp x dp`` ranks of a stage as ``etp x ep x edp``, order
    ``tp-ep-dp``, so the ``edp`` ranks of one expert shard are ``etp*ep`` apart).  The
    expert parameters' gradients are reduced, and their distributed-optimizer states
    sharded, over this group (``DistributedDataParallel`` keeps the expert parameters in
    their own buffers on ``intra_expt_dp_group``; ``distributed/distributed_data_parallel.py``
    ``expert_parallel_buffers``), not over ``dp cp``."""
    return lay.tp * lay.cp * lay.dp * 1.0 / (expert_tp(lay) * lay.ep)


def dp_shard_params(params_per_gpu, expert_params, lay):
    """Parameters of one GPU's distributed-optimizer / ZeRO shard when ``params_per_gpu``
    local parameters, ``expert_params`` of them routed experts, are sharded:
    ``(P - Pe) / (dp cp) + Pe / edp`` (:func:`expert_dp_size`).  Megatron-Core's
    ``DistributedOptimizer`` shards each gradient buffer over that buffer's own
    data-parallel group (``megatron/core/optimizer/distrib_optimizer.py``
    ``_build_model_gbuf_range``: ``data_parallel_world_size =
    param_and_grad_buffer.data_parallel_group.size()``; the expert buffers carry
    ``intra_expt_dp_group``, ``distributed/distributed_data_parallel.py``,
    ``parallel_state.get_expert_data_parallel_world_size``); DeepSpeed MoE likewise
    shards the expert parameters over the expert-data-parallel group
    (``deepspeed/moe/utils.py``).  A dense model (``Pe`` 0): ``P / (dp cp)``."""
    return (params_per_gpu - expert_params) / (lay.dp * lay.cp * 1.0) + expert_params / expert_dp_size(lay)


def expert_dp_ops(lay, expert_params, grad_bytes=4.0, param_bytes=2.0, bucket_elems=4e7,
                  tensors=None) -> tuple:
    """The expert parameters' data-parallel collectives over the ``edp`` ranks
    (:func:`expert_dp_size`, ``etp*ep`` apart), the local expert buffer, in the order of
    :func:`dse.graph.train.dp_ops`: the main-gradient all-reduce (ZeRO-0) or
    reduce-scatter (ZeRO >= 1) of ``grad_bytes`` per element and the parameter
    all-gather (ZeRO >= 1) of ``param_bytes`` per element -- the dense buffer's bytes
    (:func:`dse.graph.train.main_grad_bytes`: fp32 main gradients, or the framework's
    ``fp8_main_grad_bytes`` in fp8 runs; :func:`dse.graph.train.gather_bytes_per_param`):
    Megatron-Core groups every parameter, expert or not, by ``(param_dtype, grad_dtype,
    is_expert_parallel)`` with the one ``grad_reduce_in_fp32`` of its
    ``DistributedDataParallelConfig`` (``megatron/core/distributed/distributed_data_parallel.py``
    ``group_params_for_buffers``), so the expert buffers (on ``intra_expt_dp_group``)
    hold main gradients of the dense buffers' dtype, bucketed with the same
    ``bucket_size`` (``bucket_elems``: one NCCL call per bucket, each paying the protocol
    latency, as :func:`dse.graph.train.dp_ops`; no bucket smaller than one of the buffer's
    ``tensors``).  Zero-sized for a dense model (``expert_params`` 0) and where ``edp`` is 1."""
    return ddp_collectives("edp", expert_params, grad_bytes, param_bytes, expert_dp_size(lay),
                           expert_tp(lay) * lay.ep, bucket_elems, on=jnp.where(expert_params > 0, 1.0, 0.0),
                           tensors=tensors)


def moe_input_tokens(T, lay):
    """Tokens one rank feeds the MoE layer: ``T / tp`` with sequence parallelism (the
    layer takes the sequence-parallel hidden states ``[S/TP, B, H]``; Megatron-Core
    ``MoELayer.forward`` refuses TP without SP in training), ``T`` without."""
    return jnp.where((lay.sp > 0) & (lay.tp > 1), T / lay.tp, T)


def ep_busiest_factor(model, lay, T, drop_pad=0):
    """Routed pairs of the busiest EP rank over the mean, dropless (module docstring):
    ``ep_load_factor(e T_m k ep, ep)`` with ``e`` the expert TP (:func:`expert_tp`) and
    ``T_m`` the rank's MoE input tokens (:func:`moe_input_tokens`); 1 for a dense model,
    for ``ep`` = 1 and with ``drop_pad`` (``Workload.moe_drop_pad``: padded to capacity)."""
    moe = model.num_experts > 1
    pairs = expert_tp(lay) * moe_input_tokens(T, lay) * model.top_k * lay.ep
    return jnp.where(moe & (lay.ep > 1) & (drop_pad == 0), ep_load_factor(pairs, lay.ep), 1.0)


# gpt-oss's experts in Megatron-Core (``transformer/moe/experts.py``), per element of the
# fc1 output (clamp) or of the fc2 output (bias), 16-bit elements (module docstring of
# :func:`expert_extra_passes`): (forward, backward) passes and kernels
CLAMP_PASSES, CLAMP_KERNELS = (4.0, 5.0), (3.0, 3.0)
FC2_BIAS_PASSES = (6.0, 7.0)
# the same bias path when the routing probabilities are fp32 and the expert outputs 16-bit
# (:func:`expert_extra_passes`): bytes per fc2-output element (forward, backward) and the
# extra cast kernels (forward, backward)
FC2_BIAS_FP32_BYTES = (28.0, 36.0)
FC2_BIAS_FP32_CASTS = (1.0, 2.0)


def expert_extra_passes(model, fc1_out, fc2_out, n_local, el, on, probs_fp32=0.0) -> list:
    """Memory passes Megatron-Core adds to the grouped experts of a model with a clamped
    SwiGLU or expert biases (gpt-oss; ``Model.clamped_swiglu`` / ``expert_bias``); none
    for other models.  From ``megatron/core/transformer/moe/experts.py``:

    * clamped SwiGLU (``activation_func_clamp_value``, commit 2e29a5e1e3): the two halves
      of the fc1 output are clamped and concatenated *before* the fused bias-GeGLU kernel
      -- ``torch.cat((x_glu.clamp(max=c), x_linear.clamp(-c, c)), -1)`` -- so forward reads
      and writes the ``fc1_out`` elements twice (the clamps, the cat), backward runs the
      two clamp gradients (read the gradient and the input, write) and the cat's split
      back (read, write): :data:`CLAMP_PASSES`, three kernels each way;
    * expert biases: fc1's is added in the grouped GEMM's epilogue (``skip_bias_add``
      False), fc2's after it in ``_apply_bias``'s Python loop over the local experts
      (``skip_bias_add`` True, commit a329dd6da5): per expert ``t + b * p`` (write ``b p``,
      read both, write the sum) and a cat of the results (read, write) forward; backward
      ``grad * p`` and ``grad * b`` and their reductions for the bias and the routing
      probability: :data:`FC2_BIAS_PASSES` over the ``fc2_out`` elements, two kernels per
      local expert (+ the cat) forward and four backward.  With fp32 routing probabilities
      (``probs_fp32``: the flex dispatcher, whose DeepEP and HybridEP managers cast them --
      ``token_dispatcher.py`` "DeepEP only supports float32 probs" / "HybridEP only supports
      float32 probs", ``self.token_probs.float()`` -- while gpt-oss's router runs in the
      16-bit params dtype, ``moe_router_dtype`` unset in Megatron-Bridge's provider) ``b * p``
      promotes to fp32: forward writes ``b p`` (4), reads ``t`` and it and writes the fp32 sum
      (2 + 4 + 4), the cat copies fp32 (4 + 4) and ``.to(intermediate.dtype)`` casts back
      (4 + 2) = 28 bytes; backward casts the gradient up (2 + 4) and down for ``t`` (4 + 2) and
      forms ``grad p`` and ``grad b`` in fp32 with their reductions (2 x (4 + 4 + 4)) = 36
      bytes (:data:`FC2_BIAS_FP32_BYTES`, :data:`FC2_BIAS_FP32_CASTS` more kernels).  A
      full-iteration CUDA graph cannot run this eager loop (its ``.tolist()`` reads the counts
      on the host), so those runs keep the 16-bit count.

    Serving engines fuse both (TensorRT-LLM's and vLLM's gpt-oss MoE kernels clamp in the
    activation and add biases in the GEMM epilogue): the serving graph has neither."""
    out = []
    if model.clamped_swiglu:
        out += [MemPass(CLAMP_PASSES[i] * fc1_out * el, CLAMP_KERNELS[i], calls=on,
                        name="moe clamped swiglu", phase=ph) for i, ph in enumerate(("fwd", "bwd"))]
    if model.expert_bias:
        per_el = [jnp.where(probs_fp32 > 0, FC2_BIAS_FP32_BYTES[i], FC2_BIAS_PASSES[i] * el)
                  for i in (0, 1)]
        casts = [probs_fp32 * FC2_BIAS_FP32_CASTS[i] for i in (0, 1)]
        out += [MemPass(per_el[0] * fc2_out, 2.0 * n_local + 1.0 + casts[0], calls=on,
                        name="moe fc2 bias (per expert)", phase="fwd"),
                MemPass(per_el[1] * fc2_out, 4.0 * n_local + casts[1], calls=on,
                        name="moe fc2 bias (per expert)", phase="bwd")]
    return out


def fp32_routing_probs(wl):
    """1 where the expert biases meet fp32 routing probabilities in Megatron-Core's eager
    bias loop (:func:`expert_extra_passes`): the flex dispatcher (DeepEP / HybridEP cast the
    probabilities to fp32) without a full-iteration CUDA graph; else 0.  Traced."""
    return jnp.where((wl.moe_dispatcher > 0) & (wl.cuda_graphs == 0), 1.0, 0.0)


def moe_ops(model, wl, lay, act_bytes, T, t, ring, pipe, w_moe) -> MoEOps:
    """The MLP block of one layer, one micro-batch (module docstring): the dense MLP of a
    dense model, else the routed experts with their router, token movement and EP
    communication; ``w_moe`` the MoE share of the layers, ``ring`` / ``pipe`` the
    TP-overlap chunks of :func:`dse.graph.train.layer_ops`."""
    h = model.hidden_size * 1.0
    f = expert_ffn(model) * 1.0
    gated = model.gated_mlp * 1.0
    moe = model.num_experts > 1
    on = jnp.where(moe, 1.0, 0.0) * w_moe
    E = model.num_experts * 1.0
    k = model.top_k * 1.0
    e = jnp.where(moe, expert_tp(lay), t)                   # expert TP (dense: tp)
    Tm = moe_input_tokens(T, lay)
    # tokens per local expert of the busiest rank: the etp x ep ranks' Tm k routed
    # tokens over E experts, times the busiest rank's load factor (dropless)
    imb = ep_busiest_factor(model, lay, T, wl.moe_drop_pad)
    tpe = jnp.where(moe, e * Tm * k * lay.ep / E * imb, T)
    n_local = jnp.where(moe, E / lay.ep, 1.0)
    # the busiest rank's shape sets the time; the mean rank's FLOPs are the model's
    mlp = [op.replace(calls=w_moe, useful=jnp.where(moe, 1.0 / imb, 1.0))
           for op in (*_linear("fc1", tpe, f * (1 + gated) / e, h, n_local, ring, 1.0),
                      *_linear("fc2", tpe, h, f / e, n_local, pipe, ring))]
    router = [op.replace(calls=on) for op in _linear("router", Tm, E, h, 1.0, 1.0, 1.0)]

    el = act_bytes
    Tk = tpe * n_local                         # routed tokens on this GPU, after the ETP gather
    Tks = Tm * k                               # routed tokens this rank permutes and sends
    sort = jnp.where(n_local > 1, 1.0, 0.0)
    # permute write + unpermute read of the sent tokens, the regroupings of the received
    token_bytes = el * h * (2.0 * Tm + 2.0 * Tks + (PERMUTE_PASSES - 2.0) * sort * Tk)
    fp8 = low_precision(wl.precision)
    quant_bytes = quant_cast_bytes(wl.precision) * jnp.maximum(Tk - T, 0.0) * h   # fc1 input beyond the dense cast
    quant_kernels = fp8 * 2.0 * n_local
    # backward: the same token bytes; the casts twice over, as the dense cast's backward
    passes = [MemPass(token_bytes + quant_bytes, MOE_FWD_KERNELS + quant_kernels, calls=on,
                      name="moe permute/route", phase="fwd"),
              MemPass(token_bytes + 2.0 * quant_bytes, MOE_BWD_KERNELS + quant_kernels, calls=on,
                      name="moe permute/route", phase="bwd"),
              *expert_extra_passes(model, Tk * f * (1 + gated) / e, Tk * h, n_local, el, on,
                                   fp32_routing_probs(wl))]

    # the busiest rank receives (dispatch) and sends back (combine) imb x the mean
    a2a = Tks * h * el * imb
    probs = Tks * PROB_BYTES * imb
    etp_on = jnp.where(e > 1, 1.0, 0.0) * on
    # DeepEP / HybridEP (Workload.moe_dispatcher): each token sent once per remote node
    flex = wl.moe_dispatcher > 0
    dd_k, dd_E = jnp.where(flex, k, 0.0), jnp.where(flex, E, 0.0)
    comm = []
    for phase in ("fwd", "bwd"):
        comm += [Collective(a2a, lay.ep * 1.0, e, calls=2.0 * on, name="ep all-to-all",
                            phase=phase, kind="all_to_all", group="ep",
                            dedup_topk=dd_k, dedup_experts=dd_E),
                 Collective(probs, lay.ep * 1.0, e, calls=on, name="ep probs all-to-all",
                            phase=phase, kind="all_to_all", group="ep"),
                 # expert TP > 1: the received tokens all-gathered over the expert-TP
                 # group before the experts and reduce-scattered after them
                 # (``dispatch_postprocess`` / ``combine_preprocess``)
                 Collective(e * a2a, e, 1.0, calls=etp_on, name="etp all-gather",
                            phase=phase, kind="all_gather", group="ep"),
                 Collective(e * a2a, e, 1.0, calls=etp_on, name="etp reduce-scatter",
                            phase=phase, kind="reduce_scatter", group="ep")]
    comm.append(Collective(COUNT_BYTES * E * lay.ep * e, lay.ep * e, 1.0, calls=on,
                           name="ep token-count all-gather", phase="fwd", kind="all_gather",
                           group="ep"))
    return MoEOps(mlp, router, passes, comm, imb)
