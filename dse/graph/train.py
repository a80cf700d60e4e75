"""The operator graph of one training step: one transformer layer's forward and backward
for one micro-batch on one GPU (:func:`layer_ops`), and the operators outside the
repeated layer (:func:`outer_ops`).  Costs are reductions of these lists
(:mod:`dse.train.layer`, :mod:`dse.train.step`), the per-operator table
(:mod:`dse.graph.table`) lists them, and the trace generator expands them into nodes.

Layer operators (Megatron-LM ``TransformerLayer``; Shoeybi et al. 2019 for the TP split,
Korthikanti et al. 2022 for sequence parallelism, Liu et al. 2023 ring attention for CP):

  norm1 -> [SP all-gather] -> QKV linear -> rotary -> attention core -> out linear
  -> [TP all-reduce | SP reduce-scatter] -> (dropout) + residual -> norm2 -> [SP AG]
  -> FC1 (gate+up) -> GeLU/SwiGLU -> FC2 -> [TP AR | SP RS] -> (dropout) + residual

With T = mbs*seq/cp tokens per GPU, h hidden, f FFN, a heads, g KV heads, d the head
dim, t = tp, the linear GEMMs are (M, N, K):
  QKV (T, (a+2g)d/t, h); out (T, h, ad/t); FC1 (T, f(1+gated)/t, h); FC2 (T, h, f/t).
The backward runs each linear twice: data gradient (M, K, N) and weight gradient
(K, N, M).  MoE layers replace the MLP by ``num_experts/ep`` local experts, each seeing
``T*top_k*ep/num_experts`` tokens, plus the (T, E, h) router, with two all-to-alls
(dispatch, combine) per pass over the EP group (Lepikhin et al. 2020, GShard).

Memory-bound bytes (forward, per layer): two norms (read+write), two residual adds
(2 reads, 1 write), rotary on Q and K, the activation function, dropout (if the model
uses it); element-wise work runs on T*h/t elements with SP and on T*h without it (the
replicated regions).  Backward moves twice the forward bytes.  FP8 (Transformer
Engine): each fp8 GEMM input is produced by a cast that reads bf16 and writes fp8
(3 bytes/element, amax reduction folded in).

MLA (DeepSeek-V2/V3, Megatron-Core ``MLASelfAttention``): QKV is replaced by q down
(T, q_lora, h) and kv down (T, r + rho, h), not split over TP (Megatron "duplicated"
linears), q up (T, a (n + rho)/t, q_lora) (K = h without a q latent) and kv up
(T, a (n + v)/t, r); out proj is (T, h, a v/t); the attention core is MHA over the
decompressed heads with the mean head dim of :func:`dse.spec.model.head_dim_of`; the two
lora RMSNorms add their bytes, rotary runs on the ``rho`` dims of the a/t query heads and
the one shared rotary key.  Shared experts (DeepSeekMoE, Qwen2-MoE, Llama 4) are an
always-active MLP (T, f_s (1+gated)/t, h), (T, h, f_s/t) beside the routed experts.
Dense layers of a MoE model (``first_k_dense``, ``moe_layer_step``): the layer is the
mean layer of the model, MoE operators (router, experts, shared experts, all-to-all)
``1 - x`` times and a dense MLP of ``ffn_hidden_size`` ``x`` times, x the dense share
(:func:`dse.spec.model.dense_layer_fraction`); the step multiplies it by the stage's
layers, so with PP the heaviest stage's time uses the mean per layer (exact for pp = 1;
for DeepSeek-V3 the dense MLP and the 8 + 1 active experts have equal FLOPs, so only the
all-to-all and router differ), while its memory counts the heaviest stage's real kinds
(:func:`dse.train.memory.params_per_gpu`).

Unfused attention runs Megatron's fused scale-mask-softmax only where its kernel exists
(:func:`dse.cost.attention.fused_softmax_available`: ``b * heads/tp`` a multiple of 4,
``16 < s <= 4096``), else the five-kernel fp32 PyTorch softmax.  After each backward the
framework accumulates each parameter tensor's gradient with a kernel of its own
(:func:`grad_accumulate_ops`; launches only, for the host-bound floor).

TP: 2 all-reduces forward + 2 backward, or with SP 2 all-gathers + 2 reduce-scatters
each way, of the T*h activations.  With ``--tp-comm-overlap`` (TE userbuffers) the GEMMs
next to a ring exchange run as ``tp`` chunks (QKV and FC1 forward, proj and FC2 dgrad),
those next to a pipelined reduce-scatter as :data:`TP_OVERLAP_SPLITS` chunks (proj and
FC2 forward).  CP: ring attention exchanges the K/V chunk with the next rank ``cp - 1``
times forward and twice that backward (K/V and dK/dV).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from dse.cost.attention import flash_available, flash_head_dim, fused_softmax_available
from dse.cost.collectives import TP_OVERLAP_SPLITS
from dse.cost.elementwise import (ADAM_BYTES_PER_PARAM, DS_GRAD_ACCUM_BYTES_PER_PARAM)
from dse.graph.moe import dp_shard_params, expert_dp_ops, expert_dp_size, expert_tp, moe_ops
from dse.graph.ops import P2P, Attention, Collective, Gemm, MemPass, causal_fraction, ddp_collectives, with_window
from dse.cost.rates import linear_el_bytes, low_precision, quant_cast_bytes
from dse.spec.layout import (ATTENTION_FA2, FRAMEWORK_DEEPSPEED, PRECISION_FP32, PRECISION_FP8, PRECISION_MXFP8,
                             RECOMPUTE_MODULES, Layout, Workload, fp8_recipe)
from dse.cost.attention_kernel import attention_kernel
from dse.cost.linear_attention import deltanet_chunk_flops
from dse.spec.model import (Model, dense_layer_fraction, expert_ffn, head_dim_of, is_mla,
                            kv_heads_per_rank, linear_projection_widths, linear_share, select,
                            shared_ffn, stage_layer_counts)

# Whether the training graph's TP collectives are costed with NCCL's protocol model
# (dse.cost.collectives ``protocols=True``) instead of the alpha-beta bound.  Off: measured
# on every suite (docs/accuracy.md, "NCCL's protocol model"), switching it on moved
# vtrain.csv 8.7 -> 8.6 %, calibration.csv 4.4 -> 4.5 % and the out-of-sample NeMo suite
# 14.4 -> 14.9 %: closer to A100 nccl-tests tables, but no better on training runs.
NCCL_PROTOCOLS = False
CE_FWD_BYTES_PER_LOGIT = 42.0
CE_BWD_BYTES_PER_LOGIT = 18.0


def weight_cast_bytes(q):
    """Bytes per linear parameter of the once-per-step weight cast (:func:`optimizer_ops`):
    read bf16, write the quantized copy and its transpose, ``2 + 2 q`` for ``q`` bytes per
    quantized element (fp8: 4; NVFP4 0.5625: both copies of the 16 x 16-block weight kept,
    TE ``NVFP4Tensor`` row- and column-wise data)."""
    return 2.0 + 2.0 * q


def primary_cast_bytes(q, mxfp8=False):
    """(per shard element, per local linear parameter) of the primary-weights cast
    (fp8: 5 and 2): read the fp32 master (4), write ``q``; then rebuild the transpose,
    read and write ``q``.  MXFP8 (``mxfp8``, a traced flag) cannot gather its block-scaled
    data (TE ``tensor/utils.py`` ``replace_raw_data`` raises for ``MXFP8Tensor``): the
    optimizer writes its fp32 shard as bf16 into the gradient buffer (read 4, write 2;
    Megatron-Core ``reuse_grad_buf_for_mxfp8_param_ag``, ``distrib_optimizer.py``), the
    gather moves bf16 (:func:`gather_bytes_per_param`) and every rank quantizes its whole
    gathered weight to both MXFP8 copies (read 2, write ``2 q``;
    ``param_and_grad_buffer.py``): (6, 2 + 2 q)."""
    return jnp.where(mxfp8, 6.0, 4.0 + q), jnp.where(mxfp8, 2.0 + 2.0 * q, 2.0 * q)


def tokens_per_micro_batch(wl: Workload, lay: Layout):
    """Tokens one GPU processes per micro-batch: ``mbs * seq / cp``."""
    return lay.mbs * wl.seq_len / lay.cp


def _linear(name, m, n, k, count, fwd_chunks, dgrad_chunks):
    """A linear's three GEMMs: forward (m, n, k), dgrad (m, k, n), wgrad (k, n, m)."""
    return (Gemm(m, n, k, count, fwd_chunks, name=f"{name}", phase="fwd"),
            Gemm(m, k, n, count, dgrad_chunks, name=f"{name} dgrad", phase="bwd"),
            Gemm(k, n, m, count, 1.0, name=f"{name} wgrad", phase="bwd"))


def linear_attention_train_ops(model: Model, T, t) -> list:
    """A hybrid's Gated DeltaNet layers in training (``x`` of the layers,
    :mod:`dse.spec.model`), heads split over TP: the three projections' GEMMs
    (:func:`_linear`) and the chunkwise delta-rule scan, forward
    (:func:`dse.cost.linear_attention.deltanet_chunk_flops` per token per value head) and backward
    at twice that (the gradients of every product of the chunk algorithm), on the 16-bit
    tensor cores; none without linear attention.  Its conv / gate / norm passes are left
    to the element-wise term."""
    if not model.linear_layers:
        return []
    x = linear_share(model)
    h = model.hidden_size * 1.0
    qkvz, ba, hv_dv = linear_projection_widths(model, t)
    k_scan = deltanet_chunk_flops(model) / (2.0 * model.linear_value_head_dim)
    ops = [*_linear("deltanet in_proj_qkvz", T, qkvz, h, 1.0, 1.0, 1.0),
           *_linear("deltanet in_proj_ba", T, ba, h, 1.0, 1.0, 1.0),
           *_linear("deltanet out_proj", T, h, hv_dv, 1.0, 1.0, 1.0),
           Gemm(T, hv_dv, k_scan, name="deltanet chunked scan", phase="fwd", rate="16"),
           Gemm(T, hv_dv, 2.0 * k_scan, name="deltanet chunked scan", phase="bwd", rate="16")]
    return [op.replace(calls=op.calls * x) for op in ops]


def layer_ops(model: Model, wl: Workload, lay: Layout, act_bytes) -> tuple:
    """Every operator of one layer, one micro-batch, forward and backward (module
    docstring); ``act_bytes`` bytes per activation element."""
    t = lay.tp * 1.0
    h = model.hidden_size * 1.0
    f = expert_ffn(model) * 1.0
    a = model.num_attention_heads * 1.0
    g = model.num_kv_heads * 1.0
    d = head_dim_of(model)
    T = tokens_per_micro_batch(wl, lay)
    gated = model.gated_mlp * 1.0
    moe = model.num_experts > 1
    E = model.num_experts * 1.0
    k_top = model.top_k * 1.0
    n_local = jnp.where(moe, E / lay.ep, 1.0)
    on = (lay.sp > 0) & (t > 1) if wl.tp_overlap else False
    ring = jnp.where(on, t, 1.0)
    pipe = jnp.where(on, TP_OVERLAP_SPLITS, 1.0)

    mla = is_mla(model)
    x_dense = dense_layer_fraction(model)          # dense share of the layers (0: one kind)
    w_moe = 1.0 - x_dense
    o_in = select(mla, a * model.v_head_dim, a * d)  # out proj input width
    full = 1.0 - linear_share(model)                  # full-attention share (hybrids < 1)
    q_out = a * (1.0 + model.attn_output_gate)       # q_proj rows (+ the output gate)
    ops = [*(op.replace(calls=select(mla, 0.0, full))
             for op in _linear("qkv", T, (q_out + 2 * g) * d / t, h, 1.0, ring, 1.0)),
           *(op.replace(calls=full) for op in _linear("out proj", T, h, o_in / t, 1.0, pipe, ring)),
           *linear_attention_train_ops(model, T, t)]
    # the MLP, or routed experts with router, token permutation, EP comm (dse.graph.moe)
    mo = moe_ops(model, wl, lay, act_bytes, T, t, ring, pipe, w_moe)
    # tokens per local expert of the busiest EP rank (dropless: dse.graph.moe.ep_busiest_factor)
    tpe = jnp.where(moe, T * k_top * lay.ep / E * mo.imbalance, T)
    routed_el = tpe * n_local * f / t              # the routed experts' activation elements
    ops += mo.mlp + mla_linears(model, T, t) + mlp_kind_linears(model, T, t, ring, pipe)
    router = mo.router

    # attention core: FlashAttention where a fused kernel exists (and the workload uses
    # it), else the unfused path; selective recompute re-runs the unfused forward
    s_q, s_kv = wl.seq_len / lay.cp, wl.seq_len * 1.0
    fused = jnp.logical_and(wl.attention > 0, flash_available(d)) * 1.0
    core = dict(batch=lay.mbs * 1.0, heads=a / t, kv_heads=kv_heads_per_rank(model, lay.tp),
                s_q=s_q, s_kv=s_kv, d=d, d_fused=flash_head_dim(d, attention_kernel(wl) == ATTENTION_FA2),
                causal=causal_fraction(s_kv), dropout=model.dropout * 1.0, fused=fused,
                softmax_fused=fused_softmax_available(lay.mbs * 1.0, a / t, s_q, s_kv),
                # FP8 attention (TE fp8_dpa) inside an FP8 recipe only (Workload.fp8_attention)
                fp8=wl.fp8_attention * fp8_recipe(wl.precision))
    attn = [with_window(op, model) for op in (   # sliding-window / chunked layers: the mix
        Attention(**core, calls=full, name="attention", phase="fwd"),
        Attention(**core, calls=full, name="attention", phase="bwd", backward=True),
        Attention(**core, calls=(1.0 - fused) * full * module_on(wl, "core_attn"),
                  name="attention (selective)", phase="recompute"))]

    el = act_bytes
    rep = jnp.where(lay.sp > 0, T * h / t, T * h)             # replicated-region elements
    # the mean layer's activation elements: routed + shared experts, or the dense MLP
    ffn_el = w_moe * (routed_el + T * shared_ffn(model) / t) + x_dense * T * model.ffn_hidden_size / t
    rope = model.qk_rope_head_dim
    fwd_bytes = el * (2 * 2 * rep                              # two norms: read + write
                      + 2 * 3 * rep                            # two residual adds
                      + select(mla, 2 * T * (a / t + 1.0) * rope,
                               2 * T * (a + g) * d / t)        # rotary on Q and K
                      + ffn_el * (2 + gated) + ffn_el          # activation: read, write
                      + model.dropout * 2 * 2.5 * rep          # two dropouts + 1-byte mask
                      + select(mla, 2.0 * T * (model.q_lora_rank + model.kv_lora_rank), 0.0))  # lora norms
    mla_in = select(mla, T * (model.q_lora_rank + model.kv_lora_rank), 0.0)  # q up, kv up inputs
    fp8_cast = quant_cast_bytes(wl.precision) * (2 * T * h + T * o_in / t + ffn_el + mla_in)
    ew_kernels = 8.0 + 2.0 * model.dropout
    elementwise = [MemPass(fwd_bytes + fp8_cast, ew_kernels, name="norms/rotary/act/residual", phase="fwd"),
                   MemPass(2.0 * (fwd_bytes + fp8_cast), 2.0 * ew_kernels,
                           name="norms/rotary/act/residual", phase="bwd"),
                   *unfused_rope_ops(model, T * (a + g) * d / t * el)]

    act = T * h * el
    # Transformer Engine quantizes a sequence-parallel all-gather's input before it
    # gathers under an fp8 / MXFP8 / NVFP4 recipe (:func:`sp_gather_bytes`)
    gathered = sp_gather_bytes(wl.precision, T * h, el)
    sp = lay.sp > 0
    tp_on = jnp.where(t > 1, 1.0, 0.0)
    # SP collectives per pass: attention's and the MLP's; a MoE layer's routed experts take
    # the sequence-parallel input as it is (dse.graph.moe.moe_input_tokens), so only its
    # shared experts gather and scatter (Megatron-Core moe/shared_experts.py)
    has_shared = jnp.where(shared_ffn(model) > 0, 1.0, 0.0)
    sp_calls = 2.0 - jnp.where(moe, w_moe * (1.0 - has_shared), 0.0)
    comm = []
    for phase in ("fwd", "bwd"):
        comm += [Collective(act, t, 1.0, calls=jnp.where(sp, 0.0, 2.0) * tp_on, name="tp all-reduce",
                            phase=phase, kind="all_reduce", group="tp", protocols=NCCL_PROTOCOLS),
                 Collective(gathered, t, 1.0, calls=jnp.where(sp, sp_calls, 0.0) * tp_on, name="sp all-gather",
                            phase=phase, kind="all_gather", group="tp", protocols=NCCL_PROTOCOLS),
                 Collective(act, t, 1.0, calls=jnp.where(sp, sp_calls, 0.0) * tp_on, name="sp reduce-scatter",
                            phase=phase, kind="reduce_scatter", group="tp", protocols=NCCL_PROTOCOLS)]
    # ring attention: cp - 1 K/V chunk exchanges forward, K/V and dK/dV backward
    kv_chunk = 2.0 * lay.mbs * s_q * core["kv_heads"] * d * el
    for phase, n_ex in (("fwd", 1.0), ("bwd", 2.0)):
        comm.append(P2P(kv_chunk, t, calls=jnp.where(lay.cp > 1, n_ex * (lay.cp - 1), 0.0),
                        name="cp kv exchange", phase=phase, group="cp"))
    recompute = module_recompute_ops(model, wl, lay, ops + mo.passes, T, el, w_moe, routed_el)
    return tuple(ops + router + attn + elementwise + mo.passes + recompute
                 + grad_accumulate_ops(model, wl, lay) + comm + mo.comm)


def sp_gather_bytes(precision, elements, act_bytes):
    """Bytes of a sequence-parallel all-gather of ``elements`` activation elements: the
    quantized linear element (:func:`dse.cost.rates.linear_el_bytes`: fp8 1, MXFP8 1 + 1/32,
    NVFP4 0.5 + 1/16) under a low-precision recipe, else ``act_bytes``.  Transformer
    Engine casts the local shard first and gathers the quantized tensor (row-wise data and
    scales): forward, the column-parallel input (``layernorm_linear.py``: ``ln_out =
    quantizer(ln_out)`` then ``gather_along_first_dim(ln_out, tp_group, quantizer=...)``;
    ``distributed.py`` ``_all_gather_fp8`` / ``_all_gather_mxfp8`` / ``_all_gather_nvfp4``;
    Userbuffers fill their buffer with the same quantized data,
    ``fill_userbuffers_buffer_for_all_gather``); backward, the row-parallel gradient
    output (``grad_output_preprocess`` with ``grad_output_quantizer``) and the
    column-parallel input re-gathered for wgrad (``set_quantizer_usage_for_wgrad_all_gather``).
    The reduce-scatters (the row-parallel output, the column-parallel dgrad) stay 16-bit."""
    return elements * jnp.where(low_precision(precision) > 0, linear_el_bytes(precision, act_bytes),
                                act_bytes)


def module_on(wl: Workload, name: str):
    """1 where ``wl.recompute_modules`` holds module ``name`` (:data:`dse.spec.layout.RECOMPUTE_MODULES`),
    else 0; traced-safe (the bit set is a leaf)."""
    bit = RECOMPUTE_MODULES[name]
    return jnp.floor(wl.recompute_modules / bit) % 2.0


def module_recompute_ops(model: Model, wl: Workload, lay: Layout, fwd_ops, T, el, w_moe, routed_el) -> list:
    """The extra forward work of Megatron-Core's selective recompute modules beside
    ``core_attn`` (phase ``recompute``: charged once per micro-batch's backward, only when the
    layout's ``recompute`` is selective, :mod:`dse.train.step`), each op's ``calls`` times its
    module's bit of ``wl.recompute_modules`` (megatron/core/transformer/transformer_config.py
    ``recompute_modules``; the activations each frees: :func:`dse.train.memory.module_savings`):

    * ``mla_up_proj`` (``multi_latent_attention.py`` ``qkv_up_proj_and_rope_apply`` under
      ``CheckpointWithoutOutput``): the q up and kv up forward GEMMs, the two lora RMSNorms
      and RoPE on the ``a/t + 1`` rotary heads, ``el (2 T (q_lora + r) + 2 T (a/t + 1) rho)``
      bytes in 3 kernels, and the fp8 casts of the two GEMM inputs;
    * ``layernorm`` (``transformer_layer.py``: the input and pre-MLP norms where they are
      separate modules -- the input norm of an MLA layer, whose down projections are plain
      linears, and the pre-MLP norm of a MoE layer, whose router reads it; with Transformer
      Engine a dense layer's norms are fused into ``LayerNormLinear`` and nothing is
      recomputed): ``2 x rep x el`` bytes (read + write) per separate norm;
    * ``moe_act`` (``experts.py`` ``activation_recompute``): the routed experts' activation,
      read fc1's output and write the activation, ``(3 + gated) routed_el el`` bytes, plus the
      clamped-SwiGLU passes of a model that has them (:func:`dse.graph.moe.expert_extra_passes`);
    * ``mlp`` (the dense MLP submodule; Megatron-Core skips a MoE layer's): its fc1 and fc2
      forward GEMMs (with its fused pre-MLP norm) and activation, on a dense model's every
      layer or a MoE model's dense share;
    * ``shared_experts``: the shared experts' fc1 and fc2 forward GEMMs and activation.

    Not charged again: the TP collectives inside a recomputed dense MLP or shared expert
    (its fc2 all-reduce, or the SP all-gather / reduce-scatter around it)."""
    t = lay.tp * 1.0
    h = model.hidden_size * 1.0
    gated = model.gated_mlp * 1.0
    moe_on = jnp.where(model.num_experts > 1, 1.0, 0.0)
    x_dense = dense_layer_fraction(model)
    rep = jnp.where(lay.sp > 0, T * h / t, T * h)
    cast = quant_cast_bytes(wl.precision)
    mla = is_mla(model)

    def again(names, on):
        return [op.replace(phase="recompute", calls=op.calls * on, name=f"{op.name} (recompute)")
                for op in fwd_ops if op.phase == "fwd" and op.name in names]

    out = []
    if mla is not False:
        on = module_on(wl, "mla_up_proj") * jnp.where(mla, 1.0, 0.0)
        a, rope = model.num_attention_heads * 1.0, model.qk_rope_head_dim * 1.0
        lora = T * (model.q_lora_rank + model.kv_lora_rank)
        out += again({"q up", "kv up"}, on)
        out.append(MemPass(el * (2.0 * lora + 2.0 * T * (a / t + 1.0) * rope) + cast * lora, 3.0, calls=on,
                           name="mla lora norms/rotary (recompute)", phase="recompute"))
    norms = jnp.where(mla, 1.0, 0.0) + moe_on * w_moe
    out.append(MemPass(2.0 * rep * el * norms, norms, calls=module_on(wl, "layernorm"),
                       name="norms (recompute)", phase="recompute"))
    act = module_on(wl, "moe_act") * moe_on * w_moe
    out += again({"moe clamped swiglu"}, module_on(wl, "moe_act"))
    out.append(MemPass((3.0 + gated) * routed_el * el, 1.0, calls=act, name="moe activation (recompute)",
                       phase="recompute"))
    mlp = module_on(wl, "mlp")
    dense_el = (1.0 - moe_on) * T * expert_ffn(model) / t + moe_on * x_dense * T * model.ffn_hidden_size / t
    dense_share = (1.0 - moe_on) + moe_on * x_dense
    out += again({"fc1", "fc2"}, mlp * (1.0 - moe_on)) + again({"dense fc1", "dense fc2"}, mlp)
    out.append(MemPass((3.0 + gated) * dense_el * el + 2.0 * rep * el * dense_share
                       + cast * (T * h * dense_share + dense_el), 2.0, calls=mlp * dense_share,
                       name="mlp norm/activation (recompute)", phase="recompute"))
    fs = shared_ffn(model)
    if not (isinstance(fs, float) and fs == 0.0):
        sh = module_on(wl, "shared_experts")
        shared_el = T * fs / t
        out += again({"shared fc1", "shared fc2"}, sh)
        out.append(MemPass((3.0 + gated) * shared_el * el + cast * (T * h + shared_el), 1.0,
                           calls=sh * moe_on * w_moe * jnp.where(fs > 0, 1.0, 0.0),
                           name="shared experts activation (recompute)", phase="recompute"))
    return out


def grad_accumulate_ops(model: Model, wl: Workload, lay: Layout) -> list:
    """The per-tensor gradient accumulation kernels of one layer after one micro-batch's
    backward, as the framework issues them (:mod:`dse.spec.frameworks`
    ``grad_accum_tensors``): one small kernel per parameter tensor -- a launch the host
    must issue (the host-bound floor of :mod:`dse.train.layer`); their bytes are tiny
    (norms, biases) or counted elsewhere (DeepSpeed's fp32 pass,
    :func:`accumulation_ops`), so the op carries kernels only.

    Tensors of a dense layer: four linear weights (QKV, out, FC1, FC2) and two norm
    weights, plus, for GPT-style (non-gated) models, Megatron's linear biases
    (``add_bias_linear``) and the LayerNorm biases: 12 (GPT) or 6 (Llama).  ``unfused``
    (Megatron) leaves out the four weights, whose wgrad GEMM accumulates into
    ``main_grad`` itself.  With ``grad_accum_first_microbatch`` off the first of the
    ``m`` micro-batches stores its gradients without a kernel: ``(m - 1) / m`` per pass.
    MoE layers' expert tensors are not counted (the dense structure only)."""
    from dse.spec.frameworks import profile
    prof = profile(wl.framework)
    if prof.grad_accum_tensors == "none":
        return []
    biased = jnp.where(model.gated_mlp > 0, 0.0, 1.0)
    weights = 4.0 if prof.grad_accum_tensors == "all" else 0.0
    tensors = weights + 2.0 + 6.0 * biased
    m = wl.global_batch / (lay.dp * lay.mbs)
    share = 1.0 if prof.grad_accum_first_microbatch else jnp.maximum(m - 1.0, 0.0) / m
    return [MemPass(0.0, tensors, calls=share, name="grad accumulate (per tensor)", phase="bwd")]


def mla_linears(model: Model, T, t) -> list:
    """The MLA projections of one layer (module docstring), each with its dgrad and wgrad;
    ``calls`` 0 without MLA."""
    h = model.hidden_size * 1.0
    a = model.num_attention_heads * 1.0
    mla = is_mla(model)
    if mla is False:
        return []
    ql, r = model.q_lora_rank * 1.0, model.kv_lora_rank * 1.0
    rope, nope, v = model.qk_rope_head_dim * 1.0, model.qk_nope_head_dim * 1.0, model.v_head_dim * 1.0
    has_q = model.q_lora_rank > 0
    on = jnp.where(mla, 1.0, 0.0)
    one = lambda x: jnp.maximum(x, 1.0)           # benign shapes while switched off
    lins = [(_linear("q down", T, one(ql), h, 1.0, 1.0, 1.0), on * jnp.where(has_q, 1.0, 0.0)),
            (_linear("q up", T, one(a * (nope + rope) / t), jnp.where(has_q, one(ql), h), 1.0, 1.0, 1.0), on),
            (_linear("kv down", T, one(r + rope), h, 1.0, 1.0, 1.0), on),
            (_linear("kv up", T, one(a * (nope + v) / t), one(r), 1.0, 1.0, 1.0), on)]
    return [op.replace(calls=c) for ops, c in lins for op in ops]


def mlp_kind_linears(model: Model, T, t, ring, pipe) -> list:
    """The shared experts of a MoE layer (calls ``1 - x``) and the dense MLP of a MoE
    model's dense layers (calls ``x``), x = :func:`dse.spec.model.dense_layer_fraction`
    (module docstring); none for models without them."""
    h = model.hidden_size * 1.0
    gated = model.gated_mlp * 1.0
    x_dense = dense_layer_fraction(model)
    fs = shared_ffn(model) * 1.0
    out = []
    if not (isinstance(fs, float) and fs == 0.0):
        fs1 = jnp.maximum(fs, 1.0)
        c = (1.0 - x_dense) * jnp.where(fs > 0, 1.0, 0.0)
        out += [op.replace(calls=c) for op in (*_linear("shared fc1", T, fs1 * (1 + gated) / t, h, 1.0, ring, 1.0),
                                               *_linear("shared fc2", T, h, fs1 / t, 1.0, pipe, ring))]
    if not (isinstance(x_dense, float) and x_dense == 0.0):
        fd = model.ffn_hidden_size * 1.0
        out += [op.replace(calls=x_dense) for op in (*_linear("dense fc1", T, fd * (1 + gated) / t, h, 1.0, ring, 1.0),
                                                     *_linear("dense fc2", T, h, fd / t, 1.0, pipe, ring))]
    return out


def head_ops(model: Model, wl: Workload, lay: Layout, act_bytes) -> tuple:
    """LM head (last stage): the vocab-parallel output GEMM (T, V/tp, h) on the 16-bit
    path and its dgrad/wgrad; cross-entropy memory-bound over the ``T*V/tp`` logits,
    counted from Megatron-Core's unfused ``compute_language_model_loss`` +
    ``VocabParallelCrossEntropy`` (``--cross-entropy-loss-fusion`` is opt-in): forward
    transpose-contiguous (r2 w2), ``.float()`` (r2 w4), max (r4), subtract max (r4 w4),
    exp (r4 w4), sum (r4), divide (r4 w4) = 42 B in 7 kernels; backward scale by the
    loss gradient (r4 w4), cast to bf16 (r4 w2), transpose back (r2 w2) = 18 B in 3."""
    T = tokens_per_micro_batch(wl, lay)
    V = model.vocab_size * 1.0
    h = model.hidden_size * 1.0
    logits = T * V / lay.tp
    fwd, dgrad, wgrad = _linear("lm head", T, V / lay.tp, h, 1.0, 1.0, 1.0)
    return (fwd.replace(rate="16"), dgrad.replace(rate="16"), wgrad.replace(rate="16"),
            MemPass(CE_FWD_BYTES_PER_LOGIT * logits, 7.0, name="cross-entropy", phase="fwd"),
            MemPass(CE_BWD_BYTES_PER_LOGIT * logits, 3.0, name="cross-entropy", phase="bwd"))


# Megatron-Core's unfused rotary embedding (``_apply_rotary_pos_emb_bshd``): the rotary
# slice, rotate_half (chunk, negate, cat), t cos m, rotate_half(t) sin m, their sum and
# the cat with the pass-through dims -- 7 kernels, each reading and writing q or k, where
# the fused kernel the element-wise pass counts reads and writes once; backward alike
UNFUSED_ROPE_KERNELS = 7.0


def unfused_rope_ops(model: Model, qk_bytes) -> list:
    """The extra passes of Megatron-Core's unfused RoPE over the ``qk_bytes`` of one
    layer's Q and K, forward and backward, for a model whose YaRN attention factor is not
    1 (``Model.rope_mscale``): ``apply_rotary_pos_emb`` falls back to it ("mscale ... is
    not supported by TE's fused RoPE. Using unfused implementation.",
    ``megatron/core/models/common/embeddings/rope_utils.py``, commit 987395813b "Fixes for
    gpt-oss").  MLA models rotate their own rope dims (DeepSeek-V3's factor is 1).  None
    for other models."""
    if not model.rope_mscale:
        return []
    extra = 2.0 * (UNFUSED_ROPE_KERNELS - 1.0) * qk_bytes
    on = select(is_mla(model), 0.0, 1.0)
    return [MemPass(extra, 2.0 * UNFUSED_ROPE_KERNELS, calls=on, name="rotary (unfused, YaRN mscale)",
                    phase=ph) for ph in ("fwd", "bwd")]


def mtp_ops(model: Model, wl: Workload, lay: Layout, act_bytes, layer: tuple, head: tuple) -> tuple:
    """Multi-token prediction (DeepSeek-V3, arXiv:2412.19437 §2.2; Megatron-Core
    ``transformer/multi_token_prediction.py`` ``MultiTokenPredictionLayer``), on the stage
    with the LM head, per micro-batch and per depth (``model.mtp_layers``): RMSNorm of the
    hidden state and of the shifted tokens' embeddings (``hnorm``, ``enorm``), their
    concatenation projected ``2h -> h`` (``eh_proj``, split over TP like the layers'
    linears), one transformer layer -- the mean layer's operators ``layer`` (a MoE model's
    is its MoE layer to within its dense share), less any recompute -- its final norm, and
    the shared output layer and cross-entropy again (``head``; the MTP loss is scaled,
    ``mtp_loss_scaling_factor``, not skipped).  The main model's embedding output is
    reused for the shifted tokens (no second gather of note).  Its memory -- one more
    layer's weights on the last stage, which holds one micro-batch's activations in
    1F1B -- is not charged.  None when ``mtp_layers`` is 0."""
    if not model.mtp_layers:
        return ()
    k = model.mtp_layers * 1.0
    T = tokens_per_micro_batch(wl, lay)
    h = model.hidden_size * 1.0
    norms = MemPass(2.0 * 3.0 * T * h * act_bytes, 3.0, name="mtp norms", phase="fwd")
    ops = (*_linear("mtp eh_proj", T, h / lay.tp, 2.0 * h, 1.0, 1.0, 1.0), norms,
           norms.replace(bytes_moved=2.0 * norms.bytes_moved, phase="bwd"),
           *(op for op in layer if op.phase != "recompute"), *head)
    return tuple(op.replace(calls=op.calls * k, name=f"mtp {op.name}") for op in ops)


def embedding_ops(model: Model, wl: Workload, lay: Layout, act_bytes) -> tuple:
    """Embedding (first stage): gather, dropout and the backward scatter, three passes of
    ``T h`` elements in two kernels."""
    T = tokens_per_micro_batch(wl, lay)
    return (MemPass(3.0 * T * model.hidden_size * act_bytes, 2.0, name="embedding", phase="fwd"),)


def p2p_ops(model: Model, wl: Workload, lay: Layout, act_bytes) -> tuple:
    """One stage-to-stage activation transfer of one micro-batch (stages ``tp*cp*dp``
    ranks apart, RankGrid order).  Megatron sends only each TP rank's ``1/tp`` slice
    (scatter-gather, Narayanan et al. SC'21 §4.1, on by default) and, without sequence
    parallelism, the receiver all-gathers the slices over NVLink; DeepSpeed's pipeline
    engine (``runtime/pipe/engine.py``) sends the whole tensor from every TP rank."""
    full = tokens_per_micro_batch(wl, lay) * model.hidden_size * act_bytes
    stride = lay.tp * lay.cp * lay.dp * 1.0
    if wl.framework == FRAMEWORK_DEEPSPEED:
        return (P2P(full, stride, name="pp send", group="pp"),)
    gather = jnp.where((lay.sp == 0) & (lay.tp > 1), 1.0, 0.0)
    return (P2P(full / lay.tp, stride, name="pp send", group="pp"),
            Collective(full, lay.tp * 1.0, 1.0, calls=gather, name="pp slice all-gather",
                       kind="all_gather", group="tp", protocols=NCCL_PROTOCOLS))


def optimizer_ops(model: Model, wl: Workload, lay: Layout, params_per_gpu, embedding_params,
                  expert_params=0.0) -> tuple:
    """Once per step: Adam over the local shard (with ZeRO >= 1 the dense parameters over
    ``dp*cp`` and the ``expert_params`` routed-expert ones over the expert-data-parallel
    group, :func:`dse.graph.moe.dp_shard_params`;
    :data:`dse.cost.elementwise.ADAM_BYTES_PER_PARAM`), plus, with Transformer Engine
    fp8, the once-per-step re-quantisation of the layers' linear weights (TE casts weights
    on the first micro-batch and reuses them; the embedding and LM head stay bf16): read
    bf16, write the fp8 copy and its transpose, :func:`weight_cast_bytes` per
    parameter.  With fp8 primary weights (profile ``fp8_primary_weights``) the optimizer
    instead writes its updated fp32 shard straight into the fp8 parameters (read 4, write
    1 per shard element: Megatron-Core ``quantize_param_shard``) and, after the gather,
    TE rebuilds each linear's transpose (read 1, write 1; :func:`primary_cast_bytes`).  NVFP4
    runs the same with its 0.5625-byte elements.
    The delayed-scaling amax all-reduce is latency only (not charged)."""
    from dse.spec.frameworks import profile
    shard = jnp.where(lay.zero >= 1, dp_shard_params(params_per_gpu, expert_params, lay), params_per_gpu)
    q = linear_el_bytes(wl.precision, 2.0)
    fp8_params = low_precision(wl.precision) * (params_per_gpu - embedding_params)
    cast = weight_cast_bytes(q) * fp8_params
    if profile(wl.framework).fp8_primary_weights:
        # the shard's linear (non-embedding) elements: the dense share of the embedding
        # parameters is sharded over dp*cp
        emb_shard = jnp.where(lay.zero >= 1, embedding_params / (lay.dp * lay.cp), embedding_params)
        fp8_shard = low_precision(wl.precision) * (shard - emb_shard)
        shard_b, param_b = primary_cast_bytes(q, wl.precision == PRECISION_MXFP8)
        cast = shard_b * fp8_shard + param_b * fp8_params
    return (MemPass(ADAM_BYTES_PER_PARAM * shard + cast, 4.0,
                    name="optimizer step", phase="step"),)


def accumulation_ops(wl: Workload, params_per_gpu) -> tuple:
    """DeepSpeed's separate fp32 gradient-accumulation pass after every micro-batch
    (:data:`dse.cost.elementwise.DS_GRAD_ACCUM_BYTES_PER_PARAM`); none under Megatron,
    which fuses it into the weight-gradient GEMM (``gradient_accumulation_fusion``)."""
    on = 1.0 if wl.framework == FRAMEWORK_DEEPSPEED else 0.0
    return (MemPass(DS_GRAD_ACCUM_BYTES_PER_PARAM * params_per_gpu, 2.0, calls=on,
                    name="grad accumulation", phase="bwd"),)


def ddp_bucket_elems(framework, lay: Layout, stated=0):
    """Elements per gradient bucket of framework ``framework``'s data-parallel buffers over
    the ``dp*cp`` ranks: the run's ``stated`` size where it gives one
    (``Workload.ddp_bucket_elems`` > 0: Megatron-Core ``--ddp-bucket-size``), else
    ``max(ddp_bucket_min_elems, ddp_bucket_per_rank_elems * dp*cp)``
    (:class:`dse.spec.frameworks.FrameworkProfile`): Megatron-Core ``max(4e7, 1e6 x
    dp*cp)`` (``distributed_data_parallel.py``, the data-parallel size with context
    parallelism), DeepSpeed ``reduce_bucket_size`` 5e8, PyTorch DDP 25 MB of fp32."""
    from dse.spec.frameworks import profile
    prof = profile(framework)
    rule = jnp.maximum(prof.ddp_bucket_min_elems, prof.ddp_bucket_per_rank_elems * lay.dp * lay.cp)
    return jnp.where(stated > 0, stated * 1.0, rule)


def param_tensors(model: Model, lay: Layout, layers_on_stage):
    """(dense buffer, expert buffer) parameter tensors one GPU of the heaviest stage holds,
    the most buckets each can be split into (:func:`dse.graph.ops.ddp_buckets`), counted
    on Megatron-Core's Transformer Engine layer spec (``megatron/core/models/gpt/
    gpt_layer_specs.py``): self-attention ``linear_qkv`` (weight and the fused input
    norm's weight) and ``linear_proj``, 3 tensors -- MLA 7 (``linear_q_down_proj``,
    ``linear_q_up_proj`` with its norm, ``linear_kv_down_proj``, ``linear_kv_up_proj`` with
    its norm, ``linear_proj``, the input norm); a dense MLP ``linear_fc1`` (weight, fused
    norm weight) and ``linear_fc2``, 3; a MoE layer's ``pre_mlp_layernorm`` and router, 2,
    and 2 per shared expert in the dense buffer, and ``linear_fc1.weight<i>`` /
    ``linear_fc2.weight<i>`` of each of the ``E / ep`` local experts (``TEGroupedMLP``),
    twice that with expert biases (gpt-oss), in the expert buffer.  A LayerNorm model
    (``norm = layernorm``, GPT-3 / BLOOM with ``add_bias_linear``) adds the biases of
    ``linear_qkv`` and ``linear_proj`` and its fused norm's (3), of ``linear_fc1`` and
    ``linear_fc2`` and theirs (3) in a dense layer, of ``pre_mlp_layernorm`` (1) in a MoE
    layer.  The embedding, final norm and output layer add 3."""
    n_moe, n_dense = stage_layer_counts(model, layers_on_stage)
    attn = jnp.where(is_mla(model), 7.0, 3.0)
    ln = 1.0 if model.norm == "layernorm" else 0.0
    dense = (n_dense * (attn + 3.0 + 6.0 * ln)
             + n_moe * (attn + 2.0 + 2.0 * model.num_shared_experts + 4.0 * ln) + 3.0)
    local = model.num_experts / lay.ep
    experts = n_moe * 2.0 * local * jnp.where(model.expert_bias > 0, 2.0, 1.0)
    return dense, experts


def dp_ops(lay: Layout, params_per_gpu, grad_bytes=4.0, param_bytes=2.0, bucket_elems=4e7,
           tensors=None) -> tuple:
    """Data-parallel collectives over the ``dp*cp`` ranks of one TP coordinate (``tp``
    apart): the gradient all-reduce (ZeRO-0) or reduce-scatter (ZeRO >= 1) of the main
    gradients (``grad_bytes`` per element: fp32, or bf16 where the framework's fp8 recipes
    reduce in bf16, :func:`dse.train.memory.main_grad_bytes`) and the parameter
    all-gather (ZeRO >= 1) of ``param_bytes`` per parameter on average (bf16, or fp8 for
    fp8 primary weights: Megatron-Core ``--fp8-param-gather`` gathers the Float8Tensor
    data, 1 B); how often they run and what they overlap is the step's schedule
    (:mod:`dse.train.step`).

    The framework issues each as one NCCL call per bucket of ``bucket_elems`` elements
    (:func:`ddp_bucket_elems`; ``calls`` = :func:`ddp_buckets`), and each call pays NCCL's
    protocol latency -- base plus one hop latency per ring step, ``2(n-1)`` or ``n-1``
    steps over the ``n`` ranks (``protocols``, :func:`dse.cost.collectives.group_collective_terms`,
    NCCL ``src/graph/tuning.cc``) -- on top of its bytes over the bus bandwidth: one call
    for the whole buffer would count the latency once where a 256-rank, 32-bucket
    reduce-scatter pays it 32 times.  No bucket is smaller than one of the buffer's
    ``tensors`` (:func:`param_tensors`; None: no bound)."""
    return ddp_collectives("dp", params_per_gpu, grad_bytes, param_bytes, lay.dp * lay.cp * 1.0,
                           lay.tp * 1.0, bucket_elems, tensors=tensors)


def dp_bucket_ops(lay: Layout, params_per_gpu, layers_per_stage, kind: str, grad_bytes=4.0,
                  param_bytes=2.0, expert_params=0.0) -> list:
    """One layer's buckets of DP collective ``kind`` as the trace tier issues them, the
    bytes of :func:`dp_ops` and :func:`dse.graph.moe.expert_dp_ops` split over the
    stage's layers: the dense parameters' bucket (``params_per_gpu - expert_params``
    local parameters; ``grad_bytes`` per element for all-reduce and reduce-scatter,
    ``param_bytes`` for all-gather) over the ``cp`` ranks of one DP coordinate on the
    whole bucket, then over the ``dp`` groups on ``1/cp`` of it (the hierarchical split),
    and the routed experts' bucket (``expert_params``) over the expert-data-parallel
    group (``edp``, :func:`dse.graph.moe.expert_dp_size`, ``etp*ep`` ranks apart; the
    trace's ``edp`` grid axis) in the same bytes per element: Megatron-Core keeps the
    expert parameters in their own buffers reduced over ``intra_expt_dp_group``
    (``megatron/core/distributed/distributed_data_parallel.py``
    ``expert_parallel_buffers``).  Returns ``[(dim, Collective)]`` for dims ``cp``,
    ``dp``, ``edp``; the expert step has ``calls`` 0 for a dense model."""
    per_param = param_bytes if kind == "all_gather" else grad_bytes
    size = per_param * (params_per_gpu - expert_params) / layers_per_stage
    inner = Collective(size, lay.cp * 1.0, lay.tp * 1.0, name=f"dp {kind} cp", phase="step",
                       kind=kind, group="cp")
    outer = Collective(size / lay.cp, lay.dp * 1.0, lay.tp * lay.cp * 1.0, name=f"dp {kind}",
                       phase="step", kind=kind, group="dp")
    expert = Collective(per_param * expert_params / layers_per_stage, expert_dp_size(lay),
                        expert_tp(lay) * lay.ep, calls=jnp.where(expert_params > 0, 1.0, 0.0),
                        name=f"edp {kind}", phase="step", kind=kind, group="dp")
    return [("cp", inner), ("dp", outer), ("edp", expert)]


def zero3_ops(wl: Workload, lay: Layout, params_per_gpu, embedding_params, layers_per_stage,
              weight_bytes) -> tuple:
    """The per-unit collectives of ZeRO-3 / FSDP over the ``dp*cp`` ranks of one TP
    coordinate, as the framework issues them (:mod:`dse.spec.frameworks`): one unit is
    ``1/z3_units_per_layer`` of a layer's local parameters (one transformer block for
    FSDP and Megatron-FSDP, one linear for DeepSpeed), the root unit the embedding and LM
    head.  Returns ``(unit all-gather, unit reduce-scatter, root all-gather, root
    reduce-scatter, unit copy-out)``: parameters gathered in ``weight_bytes`` per element,
    gradients reduced in the profile's ``z3_grad_reduce_bytes`` from a bucket of
    ``max(unit, z3_reduce_bucket_elems)`` elements (``calls`` = the unit's share of one
    bucket), and FSDP2's copy of the gathered bytes into the parameters (a read and a
    write, on the compute stream)."""
    from dse.spec.frameworks import profile
    prof = profile(wl.framework)
    n = lay.dp * lay.cp * 1.0
    stride = lay.tp * 1.0
    unit = (params_per_gpu - embedding_params) / (layers_per_stage * prof.z3_units_per_layer)
    chunk = jnp.maximum(unit, prof.z3_reduce_bucket_elems)
    gb = prof.z3_grad_reduce_bytes
    return (Collective(weight_bytes * unit, n, stride, name="zero3 unit all-gather", phase="fwd",
                       kind="all_gather", group="dp"),
            Collective(gb * chunk, n, stride, calls=unit / chunk, name="zero3 unit reduce-scatter",
                       phase="bwd", kind="reduce_scatter", group="dp"),
            Collective(weight_bytes * embedding_params, n, stride, name="zero3 root all-gather",
                       phase="fwd", kind="all_gather", group="dp"),
            Collective(gb * embedding_params, n, stride, name="zero3 root reduce-scatter",
                       phase="bwd", kind="reduce_scatter", group="dp"),
            MemPass(prof.z3_copy_out_bytes_per_param * unit * weight_bytes / 2.0, 1.0,
                    name="zero3 all-gather copy-out", phase="fwd"))


def main_grad_bytes(wl: Workload):
    """Bytes per element of the main-gradient buffer and of its reduce: by default 4
    (Megatron-LM forces fp32 accumulation for bf16, ``--accumulate-allreduce-grads-in-fp32``,
    megatron/training/arguments.py), or the framework profile's ``fp8_main_grad_bytes`` in
    fp8 runs (2 for the megatron family, whose fp8 recipes run
    ``grad_reduce_in_fp32=False``: :mod:`dse.spec.frameworks`); where the run states
    Megatron-Core's ``grad_reduce_in_fp32`` (``Workload.grad_reduce_fp32`` 1 / 0), 4 or 2
    (fp32 training: 4 always).  DeepSpeed's and FSDP's own accounting is
    :mod:`dse.train.memory`'s."""
    from dse.spec.frameworks import profile
    default = jnp.where(wl.precision >= PRECISION_FP8, profile(wl.framework).fp8_main_grad_bytes, 4.0)
    stated = jnp.where(wl.grad_reduce_fp32 > 0, 4.0, 2.0)
    return jnp.where(wl.precision == PRECISION_FP32, 4.0, jnp.where(wl.grad_reduce_fp32 < 0, default, stated))


def gather_bytes_per_param(wl: Workload, act_bytes, params_per_gpu, embedding_params):
    """Bytes per parameter the distributed optimizer's all-gather moves: the 16-bit
    weights, or with fp8 primary weights (profile ``fp8_primary_weights``, Megatron-Core
    ``--fp8-param-gather``) the linears' fp8 data (1 B; the Hopper transpose is rebuilt
    after the gather) and the 16-bit embedding / LM head (so 1 B for a buffer of linears
    only, ``embedding_params`` 0, e.g. the routed experts')."""
    from dse.spec.frameworks import profile
    base = jnp.where(act_bytes > 2, 4.0, 2.0)
    if not profile(wl.framework).fp8_primary_weights:
        return base
    # MXFP8 gathers bf16 and quantizes after the gather (:func:`primary_cast_bytes`)
    fp8 = (wl.precision >= PRECISION_FP8) & (wl.precision != PRECISION_MXFP8)
    q = linear_el_bytes(wl.precision, 2.0)
    safe_P = jnp.where(params_per_gpu > 0, params_per_gpu, 1.0)
    mixed = jnp.where(params_per_gpu > 0,
                      (base * embedding_params + q * (params_per_gpu - embedding_params)) / safe_P, q)
    return jnp.where(fp8, mixed, base)


class StepGraph(NamedTuple):
    """Every operator of one training step on one GPU of the heaviest stage, by group;
    how often each group runs is the schedule's (:class:`dse.train.step.StepSchedule`)."""
    layer: tuple          # one layer, one micro-batch (fwd, bwd, recompute)
    head: tuple           # LM head + loss, one micro-batch (last stage)
    embedding: tuple      # one micro-batch (first stage)
    p2p: tuple            # one stage-to-stage transfer
    accumulation: tuple   # per micro-batch (DeepSpeed)
    optimizer: tuple      # once per step
    dp: tuple             # (grad all-reduce, grad reduce-scatter, param all-gather), whole buffer
    zero3: tuple = ()     # per-unit ZeRO-3 / FSDP collectives (:func:`zero3_ops`)
    expert_dp: tuple = ()  # MoE: the routed experts' share of ``dp``, over edp (dse.graph.moe.expert_dp_ops)


def step_graph(model: Model, wl: Workload, lay: Layout, act_bytes, params_per_gpu,
               embedding_params, layers_per_stage=None, expert_params=0.0) -> StepGraph:
    """The operator graph of one training step (module docstring); ``expert_params`` the
    routed-expert share of ``params_per_gpu``, reduced over the expert-data-parallel group."""
    L_st = model.num_layers * 1.0 if layers_per_stage is None else layers_per_stage
    gb = main_grad_bytes(wl)
    bucket = ddp_bucket_elems(wl.framework, lay, wl.ddp_bucket_elems)
    dense_tensors, expert_tensors = param_tensors(model, lay, L_st)
    layer, head = layer_ops(model, wl, lay, act_bytes), head_ops(model, wl, lay, act_bytes)
    return StepGraph(layer=layer,
                     head=(*head, *mtp_ops(model, wl, lay, act_bytes, layer, head)),
                     embedding=embedding_ops(model, wl, lay, act_bytes),
                     p2p=p2p_ops(model, wl, lay, act_bytes),
                     accumulation=accumulation_ops(wl, params_per_gpu),
                     optimizer=optimizer_ops(model, wl, lay, params_per_gpu, embedding_params,
                                             expert_params),
                     dp=dp_ops(lay, params_per_gpu - expert_params, gb,
                               gather_bytes_per_param(wl, act_bytes, params_per_gpu - expert_params,
                                                      embedding_params), bucket, dense_tensors),
                     expert_dp=expert_dp_ops(lay, expert_params, gb,
                                             gather_bytes_per_param(wl, act_bytes, expert_params, 0.0),
                                             bucket, expert_tensors),
                     zero3=zero3_ops(wl, lay, params_per_gpu, embedding_params, L_st,
                                     jnp.where(act_bytes > 2, 4.0, 2.0)))
