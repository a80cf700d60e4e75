"""Model spec: a decoder-only transformer (dense or MoE).

All architecture numbers are pytree leaves, so one compiled cost function serves every
model (the calibration set holds ~20 distinct architectures).  Sources are the catalog
(``catalog/models.toml``), a user TOML file, or a Hugging Face ``config.json``.

Parameter count per layer (Megatron-LM convention, biases and norms ignored except the
norm weights which are O(h)):
  attention  h*(a*d + 2*kv*d) + a*d*h        (Q, K, V and output projections; d = h/a
                                             unless ``kv_channels`` sets it, as Megatron's
                                             --kv-channels and HF's head_dim do: Qwen3,
                                             Gemma)
  MLP        (3 if gated else 2) * h * f      (SwiGLU has gate, up and down)
  MoE        MLP x num_experts (each of width ``moe_ffn_hidden_size``, else
             ``ffn_hidden_size``), plus the h*E router, plus ``num_shared_experts``
             always-active shared experts (DeepSeekMoE, Dai et al. 2024, arXiv:2401.06066;
             Qwen2-MoE ``shared_expert_intermediate_size``; Llama 4)
  MLA        (DeepSeek-V2 multi-head latent attention, arXiv:2405.04434 §2.1; HF
             ``DeepseekV3Attention``) with q_l = q_lora_rank, r = kv_lora_rank,
             rho = qk_rope_head_dim, n = qk_nope_head_dim, v = v_head_dim:
             q_a h q_l + q_b q_l a (n + rho)   (or h a (n + rho) when q_l = 0)
             + kv_a h (r + rho) + kv_b r a (n + v) + o a v h, plus the q_l + r lora norms

Layer kinds: the first ``first_k_dense`` layers (DeepSeek ``first_k_dense_replace``) and,
with ``moe_layer_step`` = s > 1, every layer whose index i has ``(i + 1) % s != 0``
(Llama 4 ``interleave_moe_layer_step``) are dense layers of width ``ffn_hidden_size``;
the rest are MoE layers (:func:`layer_counts`).  Every new field defaults to 0 = absent,
so models without them keep their exact arithmetic.

Attention layer kinds (:func:`attention_window`): ``window_layers`` of the layers attend
only the last ``sliding_window`` keys (gpt-oss, Mistral, Gemma) or only the keys of their
own ``attention_chunk_size``-token chunk (Llama 4); the rest attend the whole causal
prefix.  These three fields are static (pytree aux data: structural, they pick which
operators a layer has), so a model without a window traces exactly the graph it had.

Sparse attention (DeepSeek Sparse Attention, DSA: DeepSeek-V3.2-Exp technical report,
github.com/deepseek-ai/DeepSeek-V3.2-Exp ``DeepSeek_V3_2.pdf`` §2.1; GLM-5): every layer
has a "lightning indexer" that scores all cached keys with ``index_heads`` small heads of
``index_head_dim`` (fp8, one key per token shared by the heads, each score
``sum_j w_j ReLU(q_j . k_s)``) and keeps the ``index_topk`` best; the attention core then
attends only those keys.  The core costs what a ``index_topk``-key sliding window costs
(:func:`attention_window` returns it with ``sparse`` set), but the KV cache keeps every
token, plus the indexer's own key cache (:func:`dse.infer.kv_cache.kv_cache_bytes`), and
the indexer adds its projections (``q_lora_rank x index_heads index_head_dim``, ``h x
index_head_dim``, ``h x index_heads`` per layer, replicated on every TP rank: vLLM /
SGLang ``Indexer`` ``ReplicatedLinear``) and its scoring pass over the whole context
(:func:`dse.infer.forward.indexer_ops`).  Static like the window fields; 0 = dense.  The
training graph prices the sparse core (the window) but not the indexer's own training
(DeepSeek-V3.2-Exp's dense warm-up and the indexer's KL loss): not modelled.

Hybrid linear attention (Qwen3-Next, Qwen3.5: HF ``Qwen3NextGatedDeltaNet``; Gated
DeltaNet, Yang et al. 2024, arXiv:2412.06464): ``linear_layers`` of the layers replace
softmax attention by a gated delta-rule recurrence over a fixed state of
``linear_value_heads x linear_key_head_dim x linear_value_head_dim`` per sequence (the
rest, every ``full_attention_interval``-th layer, keep full attention, whose q projection
also emits a sigmoid output gate when ``attn_output_gate``).  A linear layer's parameters
are its projections ``in_proj_qkvz`` (h x (2 H_k d_k + 2 H_v d_v)), ``in_proj_ba`` (h x
2 H_v), the depthwise causal conv1d (``linear_conv_kernel`` x (2 H_k d_k + H_v d_v)),
``out_proj`` (H_v d_v x h) and 2 H_v + d_v gate / norm weights; it caches no keys, only
its state and the conv's last ``linear_conv_kernel - 1`` inputs
(:func:`dse.infer.kv_cache.kv_cache_bytes`); its serving cost is
:func:`dse.infer.forward.linear_attention_ops`.  The graphs carry the two kinds as one
mean layer, full attention ``1 - x`` times and the linear layer ``x`` times
(:func:`linear_share`).  Static like the window fields; 0 = none.

Checkpoint format: ``mxfp4_experts`` marks a checkpoint that ships its routed experts in
MXFP4 and every other weight in bf16 (gpt-oss: HF ``quantization_config`` ``quant_method
"mxfp4"`` with ``modules_to_not_convert`` = attention, router, embeddings, LM head;
TensorRT-LLM ``examples/models/core/gpt_oss/README.md``).  Only the serving cost reads it
(:func:`dse.infer.moe_serving.mxfp4_expert_rates`); 0 = absent.
"""

from __future__ import annotations

import re

import dataclasses
from typing import NamedTuple
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from dse.errors import InputError, require
from dse.io import catalog_key, load_toml
from dse.spec.hf_config import HF_FIELDS, hf_config_table  # noqa: F401 (HF_FIELDS re-exported)
from dse.spec.pytree import pytree_dataclass
from dse.spec.schema import Field, validate_table

CATALOG = Path(__file__).parent / "catalog" / "models.toml"


@pytree_dataclass(static=("sliding_window", "attention_chunk_size", "window_layers", "index_topk",
                          "index_heads", "index_head_dim", "linear_layers", "linear_key_heads",
                          "linear_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                          "linear_conv_kernel", "attn_output_gate", "mtp_layers", "clamped_swiglu",
                          "expert_bias", "rope_mscale"),
                  label=("name", "description", "norm"))
class Model:
    num_layers: int
    hidden_size: int
    ffn_hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    vocab_size: int
    seq_length: int = 2048
    gated_mlp: int = 0
    dropout: int = 0
    tied_embeddings: int = 0
    num_experts: int = 1
    top_k: int = 1
    kv_channels: int = 0
    moe_ffn_hidden_size: int = 0            # one routed expert's FFN width; 0 = ffn_hidden_size
    num_shared_experts: int = 0             # always-active shared experts (DeepSeekMoE, Llama 4)
    shared_expert_ffn_hidden_size: int = 0  # one shared expert's width; 0 = the expert width
    first_k_dense: int = 0                  # leading dense layers (width ffn_hidden_size)
    moe_layer_step: int = 0                 # every s-th layer is MoE (Llama 4); 0 or 1 = all
    kv_lora_rank: int = 0                   # MLA latent KV width r; 0 = no MLA
    q_lora_rank: int = 0                    # MLA query latent; 0 = plain q projection
    qk_rope_head_dim: int = 0               # MLA decoupled rotary key/query dims per head
    qk_nope_head_dim: int = 0               # MLA non-rotary key/query dims per head
    v_head_dim: int = 0                     # MLA value dims per head
    sliding_window: int = 0                 # keys a sliding-window layer attends; 0 = none
    attention_chunk_size: int = 0           # chunk of a chunked-attention layer; 0 = none
    window_layers: int = 0                  # layers with the window / chunk (the rest full)
    index_topk: int = 0                     # DSA: keys each query attends, chosen by the indexer; 0 = dense
    index_heads: int = 0                    # DSA lightning-indexer heads
    index_head_dim: int = 0                 # DSA indexer head (and cached index key) width
    linear_layers: int = 0                  # Gated DeltaNet (linear attention) layers; the rest full
    linear_key_heads: int = 0               # DeltaNet query / key heads H_k
    linear_value_heads: int = 0             # DeltaNet value heads H_v (one state per value head)
    linear_key_head_dim: int = 0            # d_k
    linear_value_head_dim: int = 0          # d_v
    linear_conv_kernel: int = 0             # depthwise causal conv1d width before the recurrence
    attn_output_gate: int = 0               # full-attention layers gate their output (q_proj x 2)
    mtp_layers: int = 0                     # multi-token-prediction depths trained (DeepSeek-V3); serving ignores them
    clamped_swiglu: int = 0                 # routed experts clamp the gated activation's inputs (gpt-oss swiglu_limit)
    expert_bias: int = 0                    # routed experts' linears carry biases (gpt-oss)
    rope_mscale: int = 0                    # YaRN RoPE scales q / k by an attention factor != 1 (gpt-oss)
    max_context: int = 0                    # longest context served (HF max_position_embeddings); 0 = seq_length
    mxfp4_experts: int = 0                  # checkpoint: MXFP4 routed experts, bf16 rest (gpt-oss)
    name: str = ""
    description: str = ""
    norm: str = "layernorm"

    @property
    def head_dim(self) -> float:
        """The head dimension (:func:`head_dim_of`, the one definition)."""
        return float(head_dim_of(self))

    def replace(self, **kw) -> "Model":
        return dataclasses.replace(self, **kw)

    def params_per_layer(self, dense: bool = False) -> int:
        """Parameters of one (MoE, or with ``dense`` the dense) layer (:func:`layer_params`,
        the one definition)."""
        p = layer_params(self, dense)
        return int(round(float(p.attention + p.router + p.experts + p.norms + p.shared)))

    def num_params(self) -> int:
        emb = self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)
        if not _mixed_layers(self):
            return self.num_layers * self.params_per_layer() + emb + self.hidden_size
        moe, dense = layer_counts(self)
        return (int(moe) * self.params_per_layer() + int(dense) * self.params_per_layer(True)
                + emb + self.hidden_size)

    def active_params(self, input_embedding: bool = True) -> int:
        """Parameters one token uses: per layer the attention, router, shared experts,
        norms and ``top_k`` of the routed experts; plus the LM head, the final norm and
        (unless ``input_embedding`` is False, the convention of OpenAI's gpt-oss model
        card, which counts only the unembedding) the input embedding lookup."""
        emb = self.vocab_size * self.hidden_size
        emb *= (1 if self.tied_embeddings or not input_embedding else 2)
        total = 0.0
        for kind, n in zip((False, True), layer_counts(self)):
            p = layer_params(self, kind)
            E = 1.0 if kind else float(self.num_experts)
            k = 1.0 if kind else float(self.top_k)
            total += float(n) * float(p.attention + p.router + p.norms + p.shared
                                      + p.experts * k / E)
        return int(round(total)) + emb + self.hidden_size


INT_MAX = 2**31 - 1          # the sweep's int32 arrays (dse.spec.numerics)


def _int(key: str, doc: str, default=None, lo: int = 1) -> Field:
    what = "a positive integer" if lo else "0 (= hidden_size / num_attention_heads) or a positive integer"
    return Field(key, key, kind="integer", lo=lo, hi=INT_MAX, default=default, required=default is None,
                 doc=doc, rule=f"must be {what} <= {INT_MAX}, but got {{v!r}}")


def _arch(key: str, doc: str) -> Field:
    return Field(key, key, kind="integer", lo=0, hi=INT_MAX, default=0, doc=doc,
                 rule=f"must be a non-negative integer (0 = absent) <= {INT_MAX}, but got {{v!r}}")


# MoE / MLA architecture fields: optional, 0 = absent (module docstring)
ARCH_FIELDS = ("moe_ffn_hidden_size", "num_shared_experts", "shared_expert_ffn_hidden_size",
               "first_k_dense", "moe_layer_step", "kv_lora_rank", "q_lora_rank",
               "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "sliding_window",
               "attention_chunk_size", "window_layers", "max_context", "index_topk", "index_heads",
               "index_head_dim", "linear_layers", "linear_key_heads", "linear_value_heads",
               "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel", "mtp_layers")

#: The model table schema (catalog/models.toml, a user ``file.toml[:table]``, and what
#: :func:`dse.spec.hf_config.hf_config_table` makes of a config.json).
MODEL_FIELDS: tuple[Field, ...] = (
    _int("num_layers", "transformer layers"),
    _int("hidden_size", "model width h"),
    _int("ffn_hidden_size", "MLP width (dense layers; HF intermediate_size)"),
    _int("num_attention_heads", "query heads a"),
    _int("num_kv_heads", "key/value heads g (GQA; = a for MHA)"),
    _int("vocab_size", "vocabulary"),
    _int("seq_length", "training context length", default=2048),
    _int("num_experts", "routed MoE experts per layer (1: dense)", default=1),
    _int("top_k", "experts each token is routed to", default=1),
    _int("kv_channels", "head dimension d when not h / a (Megatron --kv-channels, HF head_dim)",
         default=0, lo=0),
    _arch("moe_ffn_hidden_size", "one routed expert's FFN width (0: ffn_hidden_size)"),
    _arch("num_shared_experts", "always-active shared experts (DeepSeekMoE, Llama 4)"),
    _arch("shared_expert_ffn_hidden_size", "one shared expert's width (0: the expert width)"),
    _arch("first_k_dense", "leading dense layers (width ffn_hidden_size)"),
    _arch("moe_layer_step", "every s-th layer is MoE (Llama 4); 0 or 1: all"),
    _arch("kv_lora_rank", "MLA latent KV width r (0: no MLA)"),
    _arch("q_lora_rank", "MLA query latent (0: plain q projection)"),
    _arch("qk_rope_head_dim", "MLA decoupled rotary key/query dims per head"),
    _arch("qk_nope_head_dim", "MLA non-rotary key/query dims per head"),
    _arch("v_head_dim", "MLA value dims per head"),
    _arch("sliding_window", "keys a sliding-window layer attends (HF sliding_window; 0: none)"),
    _arch("attention_chunk_size", "tokens per chunk of a chunked-attention layer (Llama 4; 0: none)"),
    _arch("window_layers", "layers with the sliding window or chunk (0: all when one is set)"),
    _arch("index_topk", "DeepSeek Sparse Attention: keys each query attends, picked by the "
          "lightning indexer (HF index_topk; 0: dense attention)"),
    _arch("index_heads", "DSA lightning-indexer heads (HF index_n_heads)"),
    _arch("index_head_dim", "DSA indexer head width, also its cached key per token (HF index_head_dim)"),
    _arch("linear_layers", "layers with Gated DeltaNet linear attention (Qwen3-Next / Qwen3.5: "
          "all but every full_attention_interval-th; 0: none)"),
    _arch("linear_key_heads", "Gated DeltaNet key heads (HF linear_num_key_heads)"),
    _arch("linear_value_heads", "Gated DeltaNet value heads (HF linear_num_value_heads)"),
    _arch("linear_key_head_dim", "Gated DeltaNet key head width (HF linear_key_head_dim)"),
    _arch("linear_value_head_dim", "Gated DeltaNet value head width (HF linear_value_head_dim)"),
    _arch("linear_conv_kernel", "Gated DeltaNet causal conv1d width (HF linear_conv_kernel_dim)"),
    _arch("mtp_layers", "multi-token-prediction modules trained beside the main model (DeepSeek-V3 "
          "MTP, HF num_nextn_predict_layers; training only: a serving engine loads them only "
          "for speculative decoding)"),
    _arch("max_context", "longest context the checkpoint serves, HF max_position_embeddings "
          "(a serving engine's default max_model_len; 0: seq_length)"),
    Field("gated_mlp", kind="bool", default=False, doc="SwiGLU-style MLP (gate, up, down)"),
    Field("dropout", kind="bool", default=False, doc="trained with dropout"),
    Field("tied_embeddings", kind="bool", default=False, doc="LM head shares the embedding"),
    Field("attn_output_gate", kind="bool", default=False,
          doc="full-attention layers gate their output: q_proj emits q and a sigmoid gate (Qwen3-Next)"),
    Field("clamped_swiglu", kind="bool", default=False,
          doc="the routed experts clamp their gated activation's inputs (gpt-oss: HF swiglu_limit)"),
    Field("expert_bias", kind="bool", default=False,
          doc="the routed experts' linears carry biases (gpt-oss GptOssExperts)"),
    Field("rope_mscale", kind="bool", default=False,
          doc="YaRN rotary embedding with an attention factor != 1 (HF rope_scaling; gpt-oss)"),
    Field("mxfp4_experts", kind="bool", default=False,
          doc="checkpoint ships the routed experts in MXFP4, the rest in bf16 (gpt-oss)"),
    Field("norm", kind="string", default="layernorm", choices=("layernorm", "rmsnorm"),
          doc="normalization layer"),
    Field("description", kind="string", default=None, doc="free text (default: the table name)"),
    Field("source", kind="string", default="", doc="where the numbers come from"),
    Field("name", kind="string", default=None, doc="label (default: the table name)"),
    Field("hf_ids", kind="list", item="string", default=(),
          doc="Hugging Face repo ids with this architecture (catalog)"),
    Field("aliases", kind="list", item="string", default=(), doc="other short names of this table"),
)
_BOOL_FIELDS = ("gated_mlp", "dropout", "tied_embeddings", "mxfp4_experts", "attn_output_gate",
                "clamped_swiglu", "expert_bias", "rope_mscale")


def model_from_dict(d: dict, where: str, name: str) -> Model:
    """Validate a TOML table (:data:`MODEL_FIELDS`, every problem at once) and build a
    :class:`Model`."""
    v = validate_table(d, MODEL_FIELDS, where, name)
    kw = {f.key: v[f.key] for f in MODEL_FIELDS if f.kind == "integer"}
    kw.update({k: int(v[k]) for k in _BOOL_FIELDS})
    if (kw["sliding_window"] or kw["attention_chunk_size"]) and not kw["window_layers"]:
        kw["window_layers"] = kw["num_layers"]          # Mistral: every layer slides
    m = Model(name=name, description=v["description"] if v["description"] is not None else name,
              norm=v["norm"], **kw)
    validate_model(m, where)
    return m


class LayerParams(NamedTuple):
    """Parameters of one layer by part (module docstring); the dense MLP is ``experts``
    with ``num_experts == 1``."""
    attention: object     # h(a d + 2 g d) + a d h, or the MLA projections
    router: object        # h E for MoE, else 0
    experts: object       # (2 + gated) h f per expert, times E
    norms: object         # 2 h (+ the MLA lora norms)
    shared: object = 0.0  # (2 + gated) h f_s per shared expert, times their number


def select(cond, a, b):
    """``a`` where ``cond`` else ``b``: a plain Python choice when ``cond`` is concrete
    (a Python or NumPy bool), so that a model without the optional fields keeps its
    exact arithmetic; ``jnp.where`` for traced leaves."""
    if isinstance(cond, (bool, np.bool_)):
        return a if cond else b
    return jnp.where(cond, a, b)


def max_context_of(model: Model) -> int:
    """The longest context a serving engine admits by default (its ``max_model_len`` when
    none is given: vLLM ``ModelConfig`` derives it from the HF ``max_position_embeddings``):
    ``max_context``, else ``seq_length``."""
    return int(model.max_context or model.seq_length)


def is_mla(model: Model):
    """Whether the model uses multi-head latent attention (``kv_lora_rank`` > 0)."""
    return model.kv_lora_rank > 0


def expert_ffn(model: Model):
    """Width of one routed expert: ``moe_ffn_hidden_size``, else ``ffn_hidden_size``."""
    return select(model.moe_ffn_hidden_size > 0, model.moe_ffn_hidden_size, model.ffn_hidden_size)


def shared_ffn(model: Model):
    """Total width of the always-active shared experts of a MoE layer (0 without):
    ``num_shared_experts x (shared_expert_ffn_hidden_size or the expert width)``; DeepSeek
    runs them as one MLP of that width (HF ``DeepseekV3MoE.shared_experts``)."""
    each = select(model.shared_expert_ffn_hidden_size > 0, model.shared_expert_ffn_hidden_size,
                  expert_ffn(model))
    return select((model.num_shared_experts > 0) & (model.num_experts > 1),
                  model.num_shared_experts * each, 0)


def mla_attention_params(model: Model):
    """(down, up) parameters of one MLA block (module docstring): ``down`` = q_a + kv_a,
    which Megatron-Core (``MLASelfAttention``, ``linear_q_down_proj`` /
    ``linear_kv_down_proj`` not split) and vLLM (``ReplicatedLinear``
    ``fused_qkv_a_proj``) replicate on every TP rank, plus a sparse-attention model's
    indexer (:func:`indexer_params`, replicated too); ``up`` = q_b + kv_b + o, split over
    TP."""
    h = model.hidden_size * 1.0
    a = model.num_attention_heads * 1.0
    ql, r = model.q_lora_rank * 1.0, model.kv_lora_rank * 1.0
    rope, nope, v = model.qk_rope_head_dim * 1.0, model.qk_nope_head_dim * 1.0, model.v_head_dim * 1.0
    has_q = model.q_lora_rank > 0
    down = select(has_q, h * ql, 0.0) + h * (r + rope) + indexer_params(model)
    up = select(has_q, ql, h) * a * (nope + rope) + r * a * (nope + v) + a * v * h
    return down, up


def linear_share(model: Model) -> float:
    """Share of the layers with linear (Gated DeltaNet) attention, ``linear_layers /
    num_layers`` (0 without; static)."""
    return model.linear_layers / model.num_layers if model.linear_layers else 0.0


def linear_conv_dim(model: Model) -> float:
    """Channels of a Gated DeltaNet layer's causal conv1d: q, k and v, ``2 H_k d_k + H_v d_v``
    (HF ``Qwen3NextGatedDeltaNet.conv_dim``)."""
    return (2.0 * model.linear_key_heads * model.linear_key_head_dim
            + model.linear_value_heads * model.linear_value_head_dim)


def linear_projection_widths(model: Model, tp=1.0) -> tuple:
    """The widths of one Gated DeltaNet layer's projections on one of ``tp`` GPUs (heads
    split over TP; HF ``Qwen3NextGatedDeltaNet``): ``in_proj_qkvz`` output ``(2 H_k d_k + 2
    H_v d_v) / tp``, ``in_proj_ba`` output ``2 H_v / tp``, ``out_proj`` input ``H_v d_v /
    tp`` -- the one definition the parameter count and both operator graphs read."""
    hk, dk = model.linear_key_heads * 1.0, model.linear_key_head_dim * 1.0
    hv, dv = model.linear_value_heads * 1.0, model.linear_value_head_dim * 1.0
    return (2.0 * hk * dk + 2.0 * hv * dv) / tp, 2.0 * hv / tp, hv * dv / tp


def linear_attention_params(model: Model) -> float:
    """Parameters of one Gated DeltaNet layer's token mixer (module docstring):
    ``h (2 H_k d_k + 2 H_v d_v) + 2 h H_v + K conv_dim + H_v d_v h + 2 H_v + d_v``."""
    h = model.hidden_size * 1.0
    qkvz, ba, o_in = linear_projection_widths(model)
    return (h * (qkvz + ba + o_in) + model.linear_conv_kernel * linear_conv_dim(model)
            + 2.0 * model.linear_value_heads + model.linear_value_head_dim)


def indexer_params(model: Model):
    """Parameters of one layer's DSA lightning indexer (module docstring): its query
    projection from the query latent (``q_lora_rank``, else ``h``) to ``index_heads x
    index_head_dim``, its key projection ``h x index_head_dim`` and the per-head weights
    ``h x index_heads`` (DeepSeek-V3.2-Exp ``inference/model.py`` ``Indexer``: ``wq_b``,
    ``wk``, ``weights_proj``; the key LayerNorm's 2 d_I omitted), replicated on every TP
    rank; 0 without sparse attention."""
    if not model.index_topk:
        return 0.0
    h, hi, di = model.hidden_size * 1.0, model.index_heads * 1.0, model.index_head_dim * 1.0
    q_in = select(model.q_lora_rank > 0, model.q_lora_rank * 1.0, h)
    return q_in * hi * di + h * di + h * hi


def layer_params(model: Model, dense: bool = False) -> LayerParams:
    """The one parameter count of a layer (works on traced leaves): the MoE layer of a
    MoE model (its dense MLP for dense models), or with ``dense`` a dense layer of width
    ``ffn_hidden_size`` (the first / interleaved dense layers, :func:`layer_counts`)."""
    h = model.hidden_size * 1.0
    d = head_dim_of(model)
    q = model.num_attention_heads * d
    kv = model.num_kv_heads * d
    mla = is_mla(model)
    down, up = mla_attention_params(model) if not (mla is False) else (0.0, 0.0)
    gate = h * q * model.attn_output_gate                       # q_proj's gate half
    attention = select(mla, down + up, h * (q + 2 * kv) + q * h + gate + indexer_params(model))
    if model.linear_layers:                  # the mean layer of a hybrid (module docstring)
        x = linear_share(model)
        attention = (1.0 - x) * attention + x * linear_attention_params(model)
    norms = 2.0 * h + select(mla, (model.q_lora_rank + model.kv_lora_rank) * 1.0, 0.0)
    if dense:
        return LayerParams(attention=attention, router=0.0,
                           experts=(2.0 + model.gated_mlp) * h * model.ffn_hidden_size,
                           norms=norms, shared=0.0)
    E = model.num_experts * 1.0
    return LayerParams(attention=attention,
                       router=select(E > 1, h * E, 0.0),
                       experts=(2.0 + model.gated_mlp) * h * expert_ffn(model) * E,
                       norms=norms,
                       shared=(2.0 + model.gated_mlp) * h * shared_ffn(model))


def _mixed_layers(model: Model) -> bool:
    """Whether a (concrete) MoE model also has dense layers (:func:`layer_counts`)."""
    return model.num_experts > 1 and (model.first_k_dense > 0 or model.moe_layer_step > 1)


def layer_counts(model: Model):
    """(MoE layers, dense layers): layers ``i`` in ``[first_k_dense, L)`` with ``(i + 1) %
    s == 0`` (s = ``moe_layer_step`` or 1) are MoE -- HF ``DeepseekV3DecoderLayer``
    (``layer_idx >= first_k_dense_replace``) and ``Llama4TextConfig.moe_layers``
    (``range(s - 1, L, s)``) -- so there are ``floor(L/s) - floor(k/s)`` of them; a dense
    model has ``(0, L)``, a MoE model without dense layers ``(L, 0)``."""
    L = model.num_layers
    s = jnp.maximum(model.moe_layer_step, 1)
    moe = jnp.floor(L / s) - jnp.floor(model.first_k_dense / s)
    moe = jnp.where(model.num_experts > 1, moe, 0.0)
    return moe, L - moe


def dense_layer_fraction(model: Model):
    """Share of a MoE model's layers that are dense (0 for dense models and for MoE models
    without dense layers, where the one repeated layer is exact): the operator graphs
    carry both layer kinds as one mean layer, MoE operators ``1 - x`` times and dense
    operators ``x`` times per layer (:mod:`dse.graph.train`, :mod:`dse.infer.forward`)."""
    mixed = (model.num_experts > 1) & ((model.first_k_dense > 0) | (model.moe_layer_step > 1))
    if isinstance(mixed, (bool, np.bool_)) and not mixed:
        return 0.0
    moe, dense = layer_counts(model)
    return jnp.where(mixed, dense / model.num_layers, 0.0)


def stage_layer_counts(model: Model, layers_on_stage):
    """(MoE, dense) layers on the heaviest pipeline stage of ``layers_on_stage`` layers:
    the dense layers are few and leading (or interleaved), so the heaviest stage holds
    ``min(layers_on_stage, MoE layers)`` MoE layers and the rest dense."""
    moe, _ = layer_counts(model)
    n_moe = jnp.minimum(layers_on_stage * 1.0, moe)
    return n_moe, layers_on_stage - n_moe


def kv_heads_per_rank(model: Model, tp):
    """KV heads one GPU holds under tensor parallelism: ``max(ceil(g / tp), 1)`` --
    Megatron-LM and vLLM split the KV heads over TP and replicate one per GPU when
    ``tp > g`` (the one definition, for training and serving)."""
    return jnp.maximum(jnp.ceil(model.num_kv_heads / tp), 1.0)


def head_dim_of(model: Model):
    """Head dimension as a float that works on traced leaves: ``kv_channels`` when set,
    else ``hidden_size / num_attention_heads``.  With MLA, the mean of the q.k head dim
    (``qk_nope + qk_rope``) and the value head dim: the (decompressed, MHA) attention
    core's FLOPs ``2 s^2 (d_qk + d_v)`` per head and its Q, K, V, O bytes are then those
    of the real kernel (FlashAttention-3 runs d_qk = 192, d_v = 128 for DeepSeek)."""
    plain = select(model.kv_channels > 0, model.kv_channels * 1.0,
                   model.hidden_size / model.num_attention_heads)
    return select(is_mla(model), (model.qk_nope_head_dim + model.qk_rope_head_dim
                                  + model.v_head_dim) / 2.0, plain)


def kv_cache_elems_per_token(model: Model, tp):
    """KV-cache elements one token holds per layer on one GPU: ``2 g_t d`` (K and V of the
    ``g_t`` local KV heads), or with MLA the latent ``kv_lora_rank + qk_rope_head_dim``
    (the compressed c_KV plus the shared rotary key, DeepSeek-V2 arXiv:2405.04434 §2.1.2
    and Table 1), which every TP rank holds whole: vLLM's MLA backends
    (``vllm/v1/attention/backends/mla/common.py``: one latent "head" of
    ``kv_lora_rank + qk_rope_head_dim`` per token) and SGLang's ``MLATokenToKVPool``."""
    plain = 2.0 * kv_heads_per_rank(model, tp) * head_dim_of(model)
    return select(is_mla(model), (model.kv_lora_rank + model.qk_rope_head_dim) * 1.0, plain)


def decode_kv_geometry(model: Model, tp):
    """(KV heads, head dim) of the decode attention kernel (:class:`dse.graph.ops.KVRead`,
    which reads ``2 c g d`` cached elements and does ``4 a c d`` FLOPs per sequence).
    MLA decodes with the up-projections absorbed (DeepSeek-V2 §2.1.2 "absorbed into W^Q /
    W^O"; vLLM ``MLACommonImpl._forward_decode``, FlashMLA): each of the ``a/tp`` query
    heads attends over the shared latent, q.k over ``r + rho`` and p.v over ``r`` dims,
    so ``d = r + rho/2`` makes the FLOPs ``2 a c (2r + rho)`` exact and ``g = (r + rho) /
    (2 d)`` makes the bytes the latent's ``c (r + rho)``."""
    d_plain = head_dim_of(model)
    g_plain = kv_heads_per_rank(model, tp)
    if is_mla(model) is False:
        return g_plain, d_plain
    r, rope = model.kv_lora_rank * 1.0, model.qk_rope_head_dim * 1.0
    d_abs = r + rope / 2.0
    mla = is_mla(model)
    return (select(mla, (r + rope) / (2.0 * jnp.maximum(d_abs, 1.0)), g_plain),
            select(mla, d_abs, d_plain))


class AttentionWindow(NamedTuple):
    """The windowed layer kind of a model (:func:`attention_window`)."""
    keys: int          # the sliding window, or the chunk, in tokens
    share: object      # windowed layers / all layers (num_layers is a leaf: may be traced)
    chunked: bool      # chunks (Llama 4) instead of a sliding window
    sparse: bool = False  # DSA top-k selection: the core attends ``keys``, the cache keeps all


def attention_window(model: Model) -> AttentionWindow | None:
    """The one reading of the window fields (static, so plain Python): None when every
    layer attends its whole causal prefix; else the window (or chunk) in tokens, the share
    ``window_layers / num_layers`` of layers that use it, and whether it is a chunk.  The
    operator graph costs each attention operator as that mix of its full and windowed
    kernels (:func:`dse.graph.ops.with_window`) and the KV cache holds ``min(c, keys)``
    tokens in the windowed layers (:func:`dse.infer.kv_cache.kv_cache_bytes`).  A sparse-
    attention model (``index_topk``, module docstring) gets its top-k as a window on every
    layer with ``sparse`` set: the same core cost, the whole context cached."""
    if int(model.index_topk) > 0:
        return AttentionWindow(int(model.index_topk), 1.0, False, True)
    keys = int(model.sliding_window or model.attention_chunk_size)
    if keys <= 0 or int(model.window_layers) <= 0:
        return None
    return AttentionWindow(keys, int(model.window_layers) / model.num_layers,
                           bool(model.attention_chunk_size))


def validate_model(m: Model, where: str) -> None:
    require(m.kv_channels > 0 or m.hidden_size % m.num_attention_heads == 0, where, "hidden_size",
            f"`hidden_size % num_attention_heads == 0` must hold, but got "
            f"(hidden_size={m.hidden_size}, num_attention_heads={m.num_attention_heads})")
    require(m.num_attention_heads % m.num_kv_heads == 0, where, "num_kv_heads",
            f"`num_attention_heads % num_kv_heads == 0` must hold, but got "
            f"(num_attention_heads={m.num_attention_heads}, num_kv_heads={m.num_kv_heads})")
    require(m.top_k <= m.num_experts, where, "top_k",
            f"`top_k <= num_experts` must hold, but got (top_k={m.top_k}, "
            f"num_experts={m.num_experts})")
    if m.kv_lora_rank > 0:
        for k in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            require(getattr(m, k) > 0, where, k, f"`{k} > 0` must hold with MLA (kv_lora_rank="
                    f"{m.kv_lora_rank}), but got ({k}={getattr(m, k)})")
    require(not (m.sliding_window and m.attention_chunk_size), where, "attention_chunk_size",
            f"must be 0 when sliding_window is set (one windowed layer kind), but got "
            f"(sliding_window={m.sliding_window}, attention_chunk_size={m.attention_chunk_size})")
    require(m.window_layers <= m.num_layers, where, "window_layers",
            f"`window_layers <= num_layers` must hold, but got (window_layers={m.window_layers}, "
            f"num_layers={m.num_layers})")
    require(m.window_layers == 0 or m.sliding_window or m.attention_chunk_size, where,
            "window_layers", f"must be 0 without sliding_window or attention_chunk_size, but got "
            f"{m.window_layers}")
    if m.index_topk:
        for k in ("index_heads", "index_head_dim"):
            require(getattr(m, k) > 0, where, k, f"`{k} > 0` must hold with sparse attention "
                    f"(index_topk={m.index_topk}), but got ({k}={getattr(m, k)})")
        require(not (m.sliding_window or m.attention_chunk_size), where, "index_topk",
                f"must be 0 with a sliding window or chunk (one windowed layer kind), but got "
                f"(index_topk={m.index_topk}, sliding_window={m.sliding_window}, "
                f"attention_chunk_size={m.attention_chunk_size})")
    if m.linear_layers:
        require(m.linear_layers < m.num_layers, where, "linear_layers",
                f"`linear_layers < num_layers` must hold (a hybrid keeps full-attention layers), "
                f"but got (linear_layers={m.linear_layers}, num_layers={m.num_layers})")
        for k in ("linear_key_heads", "linear_value_heads", "linear_key_head_dim",
                  "linear_value_head_dim", "linear_conv_kernel"):
            require(getattr(m, k) > 0, where, k, f"`{k} > 0` must hold with linear attention "
                    f"(linear_layers={m.linear_layers}), but got ({k}={getattr(m, k)})")
        require(not (m.sliding_window or m.attention_chunk_size or m.index_topk or m.kv_lora_rank),
                where, "linear_layers", "must be 0 with a sliding window, chunk, sparse attention "
                "or MLA (the full-attention layers of a hybrid are plain GQA)")
    require(m.first_k_dense < m.num_layers, where, "first_k_dense",
            f"`first_k_dense < num_layers` must hold, but got (first_k_dense={m.first_k_dense}, "
            f"num_layers={m.num_layers})")


def model_from_hf_config(path: Path) -> Model:
    """A Hugging Face ``config.json`` (keys read: :mod:`dse.spec.hf_config`)."""
    table, name = hf_config_table(path)
    return model_from_dict(table, str(path), name)


_CACHE: dict[str, Model] | None = None


def catalog() -> dict[str, Model]:
    global _CACHE
    if _CACHE is None:
        data = load_toml(CATALOG)
        _CACHE = {n: model_from_dict(t, str(CATALOG), n) for n, t in data.items()}
    return _CACHE


_HF_IDS: dict[str, str] | None = None


def hf_id_index() -> dict[str, str]:
    """Lower-cased Hugging Face repo id or short alias -> catalog name (the catalog's
    ``hf_ids`` and ``aliases``: point releases with the same layer shapes, e.g.
    ``llama3.1-70b``)."""
    global _HF_IDS
    if _HF_IDS is None:
        data = load_toml(CATALOG)
        _HF_IDS = {str(i).lower(): n for n, t in data.items()
                   for i in [*t.get("hf_ids", []), *t.get("aliases", [])]}
    return _HF_IDS


#: a re-published checkpoint's quantization suffix ("-FP8", "-FP8-KV", "-FP8-dynamic",
#: "-FP4-v2", "-MXFP4-Preview", "-NVFP4", "-W4A16", "-AWQ", ...): the weights' format, which the
#: row's ``precision`` states, on the same architecture
_QUANT_SUFFIX = re.compile(r"[-_](?:w[-_])?(?:fp8|fp4|nvfp4|mxfp4|w4a16|w8a8|w4a8|int4|int8|awq|gptq)"
                           r"(?:[-_][a-z0-9.]+)*$", re.IGNORECASE)


def requantized_base(name: str) -> str | None:
    """The catalog model a re-published checkpoint of a catalog repo denotes: quantized
    (``nvidia/Llama-3.3-70B-Instruct-FP4``, ``amd/Llama-3.1-70B-Instruct-FP8-KV``,
    ``RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8``, ``amd/gpt-oss-120b-w-mxfp4-a-fp8``), mirrored under another organisation
    (``unsloth/Llama-3.3-70B-Instruct``) or named without its organisation
    (``Llama-3.1-8B``): its repo name without the quantization suffix equals the repo name
    of one catalog ``hf_ids`` entry (any organisation, any letter case).  None if there is
    no such entry or more than one catalog model has it."""
    repo = name.strip().rsplit("/", 1)[-1]
    base = _QUANT_SUFFIX.sub("", repo).lower()
    if not base:
        return None
    hits = {n for i, n in hf_id_index().items() if i.rsplit("/", 1)[-1] == base}
    return next(iter(hits)) if len(hits) == 1 else None


def get_model(name: str, where: str = "--model") -> Model:
    """A catalog name (any letter case), a Hugging Face repo id the catalog lists
    (``hf_ids``) or a re-published, mirrored or organisation-less name of one
    (:func:`requantized_base`), a ``config.json`` path, or ``file.toml[:table]``."""
    cat = catalog()
    key = catalog_key(name, cat)
    if key is not None:
        return cat[key]
    if name.strip().lower() in hf_id_index():
        return cat[hf_id_index()[name.strip().lower()]]
    if not name.endswith((".json", ".toml")) and ".toml:" not in name:
        base = requantized_base(name)
        if base is not None:
            return cat[base]
    if name.endswith(".json"):
        return model_from_hf_config(Path(name))
    path, _, table = name.partition(":")
    if path.endswith(".toml"):
        data = load_toml(Path(path))
        require(bool(data), path, "table", "must define at least one model table")
        table = table or next(iter(data))
        require(table in data, path, table, f"must be one of {sorted(data)}")
        require(isinstance(data[table], dict), path, table,
                f"must be a table ([{table}]), but got {type(data[table]).__name__}")
        return model_from_dict(data[table], path, table)
    raise InputError(where, "model", f"must be a catalog name ({', '.join(sorted(cat))}), a "
                     f"Hugging Face repo id the catalog lists (hf_ids in "
                     f"dse/spec/catalog/models.toml), a config.json path or a .toml path, "
                     f"but got {name!r}")
