"""A Hugging Face ``config.json`` as a model table of the catalog schema (validated and
built into a :class:`dse.spec.model.Model` by :func:`dse.spec.model.model_from_hf_config`).

Keys read (the ``transformers`` configuration classes named; the first key present wins):

* shape: ``num_hidden_layers`` / ``n_layer``, ``hidden_size`` / ``n_embd``,
  ``num_attention_heads`` / ``n_head``, ``num_key_value_heads`` (default: the heads, MHA),
  ``vocab_size``, ``max_position_embeddings`` / ``n_positions``, ``head_dim`` (Qwen3,
  Gemma, gpt-oss: when it differs from hidden / heads), ``hidden_act`` /
  ``hidden_activation`` (silu / swiglu / geglu = a gated MLP; Gemma's GeGLU is gated with
  ``gelu_pytorch_tanh``), ``tie_word_embeddings`` (absent: False, Gemma's True),
  ``rms_norm_eps`` (RMSNorm).
* MoE: routed experts ``n_routed_experts`` (DeepseekV3Config) / ``num_local_experts``
  (MixtralConfig, Llama4TextConfig, GptOssConfig) / ``num_experts`` (Qwen2MoeConfig,
  Qwen3MoeConfig); ``num_experts_per_tok``; the expert width ``moe_intermediate_size``
  (DeepSeek, Qwen-MoE: ``intermediate_size`` is then the dense-layer / dense-model width),
  or for Llama 4 ``intermediate_size`` (experts) beside ``intermediate_size_mlp`` (dense
  layers); shared experts ``n_shared_experts`` (DeepSeek, each of the expert width),
  ``shared_expert_intermediate_size`` (Qwen2-MoE, one shared expert of that width), and
  Llama 4's one shared expert per MoE layer (``Llama4TextMoe.shared_expert``, the expert
  width; not a config key); dense layers ``first_k_dense_replace`` (DeepSeek; requires
  ``moe_layer_freq`` = 1), ``interleave_moe_layer_step`` (Llama 4) /
  ``decoder_sparse_step`` (Qwen-MoE; both: layer i is MoE when ``(i + 1) % step == 0``),
  ``mlp_only_layers`` (Qwen-MoE) only as a leading run of layers.
* MLA (DeepseekV2Config / DeepseekV3Config): ``kv_lora_rank``, ``q_lora_rank`` (null =
  a plain q projection, DeepSeek-V2-Lite), ``qk_rope_head_dim``, ``qk_nope_head_dim``,
  ``v_head_dim``.
* Multi-token prediction (DeepSeek-V3, GLM-4.5): ``num_nextn_predict_layers`` ->
  ``mtp_layers`` (the training graph's MTP modules; a serving engine loads them only to
  draft speculative tokens, which :mod:`dse.infer` prices from the row's engine flags).
* YaRN RoPE (``rope_scaling`` of type ``yarn``) whose attention factor is not 1
  (:func:`yarn_attention_factor`; gpt-oss) -> ``rope_mscale``.
* gpt-oss's experts: ``swiglu_limit`` -> ``clamped_swiglu``; model type ``gpt_oss`` ->
  ``expert_bias`` (``GptOssExperts`` has ``gate_up_proj_bias`` / ``down_proj_bias``); the
  training graph charges what Megatron-Core runs for them (:func:`dse.graph.moe.expert_extra_passes`).
* Checkpoint format: ``quantization_config.quant_method == "mxfp4"`` (gpt-oss: the routed
  experts in MXFP4, ``modules_to_not_convert`` the rest, bf16) -> ``mxfp4_experts``.
* Multimodal wrappers (Llama 4 ``Llama4ForConditionalGeneration``): the language model's
  ``text_config`` is read when the top level has no ``hidden_size``.

* Hybrid linear attention (Qwen3-Next ``Qwen3NextForCausalLM``, Qwen3.5): ``layer_types``
  ``"linear_attention"`` entries or ``full_attention_interval`` -> ``linear_layers``;
  ``linear_num_key_heads``, ``linear_num_value_heads``, ``linear_key_head_dim``,
  ``linear_value_head_dim``, ``linear_conv_kernel_dim`` -> the Gated DeltaNet fields;
  ``attn_output_gate`` (default true) (:func:`linear_attention_fields`).
* DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5 ``GlmMoeDsaForCausalLM``): ``index_topk``,
  ``index_n_heads``, ``index_head_dim`` -> ``index_topk``, ``index_heads``,
  ``index_head_dim`` (:mod:`dse.spec.model`, "Sparse attention").
* Windowed attention layers (-> ``sliding_window``, ``attention_chunk_size``,
  ``window_layers``: how many layers use the window, :func:`dse.spec.model.attention_window`):
  ``layer_types`` when the config lists it (transformers >= 4.54: ``"sliding_attention"``
  layers slide over ``sliding_window`` keys, GptOssConfig's alternating default, Gemma 3,
  Qwen; ``"chunked_attention"`` layers attend their ``attention_chunk_size`` chunk);
  otherwise, Llama 4 (``attention_chunk_size``): the RoPE layers are chunked
  (``Llama4TextAttention``: ``use_rope = no_rope_layers[i]``, chunked mask on them), the
  NoPE ones full, ``no_rope_layers`` or every ``no_rope_layer_interval``-th (default 4)
  layer NoPE; Qwen2/Qwen3 (``use_sliding_window``, default false: ``sliding_window`` is
  then ignored) layers ``i >= max_window_layers``; Gemma 2 and gpt-oss every even layer
  (``Gemma2DecoderLayer``: ``is_sliding = not bool(layer_idx % 2)``; ``GptOssConfig``'s
  default ``layer_types``); Gemma 3 all but every
  ``sliding_window_pattern``-th; any other config with a ``sliding_window`` (Mistral 7B
  v0.1: 4096, Mixtral: null) every layer (``MistralAttention``).

Not modelled (small in parameters, or a different attention pattern): biases, attention
sinks (gpt-oss), the Qwen2-MoE shared-expert gate (h parameters per layer), the
DeepSeek-V3 multi-token-prediction module (not part of the 671 B main model).
"""

from __future__ import annotations

import math

from pathlib import Path

from dse.errors import InputError, require
from dse.io import load_json
from dse.spec.schema import Field, Problems, check_table

GATED_ACTS = ("silu", "swiglu", "swish", "geglu")
# The other activation names ``transformers`` resolves (``transformers.activations.ACT2CLS``
# keys, v4.4x): a plain (non-gated) MLP.  Any other name is refused, not read as plain.
PLAIN_ACTS = ("gelu", "gelu_10", "gelu_fast", "gelu_new", "gelu_python", "gelu_pytorch_tanh",
              "gelu_accurate", "laplace", "leaky_relu", "linear", "mish", "quick_gelu", "relu",
              "relu2", "relu6", "sigmoid", "tanh", "prelu", "xielu")
INT_MAX = 2**31 - 1
# Families whose MLP is gated whatever its activation, and whose config class ties the
# embeddings unless told otherwise: Gemma's ``GemmaMLP`` (gemma, gemma2, gemma3) computes
# ``down_proj(act_fn(gate_proj(x)) * up_proj(x))`` with ``gelu_pytorch_tanh`` (GeGLU), and
# ``GemmaConfig`` / ``Gemma2Config`` / ``Gemma3TextConfig`` default ``tie_word_embeddings``
# to True (transformers ``models/gemma*/configuration_gemma*.py``); their configs name the
# activation ``hidden_activation`` (``hidden_act`` is the older key).
GEMMA_MODEL_TYPES = ("gemma", "gemma2", "gemma3", "gemma3_text")


def _hf_int(key: str, doc: str, lo: int = 1) -> Field:
    what = "a positive integer" if lo else "0 (= absent) or a positive integer"
    return Field(key, kind="integer", lo=lo, hi=INT_MAX, doc=doc,
                 rule=f"must be {what} <= {INT_MAX}, but got {{v!r}}")


#: The keys of a ``config.json`` that are read (module docstring), with their types; every
#: other key is ignored and a ``null`` is absent.  Cross-key rules (``moe_layer_freq``,
#: ``mlp_only_layers``) are checked where the keys are combined.
#: Gated DeltaNet keys of a config.json -> model fields (:func:`linear_attention_fields`)
_LINEAR_KEYS = (("linear_num_key_heads", "linear_key_heads"),
                ("linear_num_value_heads", "linear_value_heads"),
                ("linear_key_head_dim", "linear_key_head_dim"),
                ("linear_value_head_dim", "linear_value_head_dim"),
                ("linear_conv_kernel_dim", "linear_conv_kernel"))

HF_FIELDS: tuple[Field, ...] = (
    _hf_int("num_hidden_layers", "-> num_layers"), _hf_int("n_layer", "GPT-2: -> num_layers"),
    _hf_int("hidden_size", "-> hidden_size"), _hf_int("n_embd", "GPT-2: -> hidden_size"),
    _hf_int("intermediate_size", "-> ffn_hidden_size (default 4 h)"),
    _hf_int("n_inner", "GPT-2: -> ffn_hidden_size"),
    _hf_int("num_attention_heads", "-> num_attention_heads"), _hf_int("n_head", "GPT-2: heads"),
    _hf_int("num_key_value_heads", "-> num_kv_heads (default: the heads)"),
    _hf_int("vocab_size", "-> vocab_size"),
    _hf_int("max_position_embeddings", "-> seq_length (default 2048)"),
    _hf_int("n_positions", "GPT-2: -> seq_length"),
    _hf_int("head_dim", "-> kv_channels (0: hidden_size / heads)", lo=0),
    _hf_int("n_routed_experts", "DeepSeek: -> num_experts", lo=0),
    _hf_int("num_local_experts", "Mixtral, Llama 4, gpt-oss: -> num_experts", lo=0),
    _hf_int("num_experts", "Qwen-MoE: -> num_experts", lo=0),
    _hf_int("num_experts_per_tok", "-> top_k", lo=0),
    _hf_int("moe_intermediate_size", "-> moe_ffn_hidden_size", lo=0),
    _hf_int("intermediate_size_mlp", "Llama 4: dense-layer width", lo=0),
    _hf_int("shared_expert_intermediate_size", "Qwen2-MoE: shared expert width", lo=0),
    _hf_int("n_shared_experts", "DeepSeek: -> num_shared_experts", lo=0),
    _hf_int("first_k_dense_replace", "DeepSeek: -> first_k_dense", lo=0),
    _hf_int("num_nextn_predict_layers", "DeepSeek-V3 / GLM-4.5: -> mtp_layers (training only)", lo=0),
    _hf_int("interleave_moe_layer_step", "Llama 4: -> moe_layer_step", lo=0),
    _hf_int("decoder_sparse_step", "Qwen-MoE: -> moe_layer_step", lo=0),
    Field("mlp_only_layers", kind="list", item="integer", lo=0, doc="Qwen-MoE: leading dense layers"),
    *(_hf_int(k, f"MLA: -> {k}", lo=0) for k in ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim",
                                                  "qk_nope_head_dim", "v_head_dim")),
    _hf_int("index_topk", "DeepSeek-V3.2 / GLM-5 sparse attention: -> index_topk", lo=0),
    _hf_int("index_n_heads", "DSA indexer: -> index_heads", lo=0),
    _hf_int("index_head_dim", "DSA indexer: -> index_head_dim", lo=0),
    _hf_int("full_attention_interval", "Qwen3-Next: every n-th layer full, the rest Gated "
            "DeltaNet (HF divides by it, so 0 is invalid)"),
    *(_hf_int(k, f"Gated DeltaNet: -> {v}", lo=0) for k, v in _LINEAR_KEYS),
    Field("attn_output_gate", kind="bool", doc="Qwen3-Next / Qwen3.5: full-attention output gate"),
    _hf_int("sliding_window", "-> sliding_window (keys of a sliding-window layer)", lo=0),
    _hf_int("attention_chunk_size", "Llama 4: -> attention_chunk_size", lo=0),
    _hf_int("no_rope_layer_interval", "Llama 4: every n-th layer NoPE (full attention; HF "
            "divides by it, so 0 is invalid)"),
    _hf_int("max_window_layers", "Qwen: layers below this index attend in full", lo=0),
    _hf_int("sliding_window_pattern", "Gemma 3: every n-th layer full (HF divides by it, so "
            "0 is invalid)"),
    Field("use_sliding_window", kind="bool", doc="Qwen: false ignores sliding_window"),
    Field("layer_types", kind="list", item="string", doc="per layer: full_attention / "
          "sliding_attention / chunked_attention"),
    Field("no_rope_layers", kind="list", item="integer", lo=0, hi=1,
          doc="Llama 4: 1 = RoPE (chunked) layer, 0 = NoPE (full) layer"),
    Field("hidden_act", kind="string", doc="silu / swiglu / swish / geglu: gated MLP"),
    Field("hidden_activation", kind="string", doc="Gemma: the activation (GeGLU: gated)"),
    Field("activation_function", kind="string", doc="GPT-2: the activation"),
    Field("tie_word_embeddings", kind="bool", doc="-> tied_embeddings"),
    Field("rms_norm_eps", kind="number", doc="present: RMSNorm"),
    Field("_name_or_path", kind="string", doc="-> description"),
    Field("model_type", kind="string", doc="-> description; llama4: one shared expert"),
    Field("text_config", kind="table", doc="a multimodal wrapper's language model (these keys)"),
)
_HF_KEYS = {f.key for f in HF_FIELDS}


def check_hf_keys(top: dict, c: dict, where: str) -> None:
    """Type and range of every key read, in ``top`` and (when the language model sits in
    ``text_config``) in ``c``; every problem at once."""
    out = Problems(where)
    for table, name in ((top, ""), (c, "text_config")) if c is not top else ((top, ""),):
        check_table({k: v for k, v in table.items() if k in _HF_KEYS and v is not None}, HF_FIELDS,
                    out, name)
    out.raise_if_any()


def _int_or_zero(c: dict, key: str, where: str) -> int:
    """An optional non-negative integer key (null or absent = 0)."""
    v = c.get(key)
    if v is None:
        return 0
    require(isinstance(v, int) and not isinstance(v, bool) and v >= 0, where, key,
            f"must be a non-negative integer, but got {v!r}")
    return v


def text_config(c: dict) -> dict:
    """The language model's keys: ``text_config`` of a multimodal wrapper (Llama 4) when
    the top level has no ``hidden_size``, else the config itself."""
    t = c.get("text_config")
    if "hidden_size" not in c and "n_embd" not in c and isinstance(t, dict):
        return t
    return c


def yarn_attention_factor(scaling) -> float:
    """The factor YaRN scales RoPE's cos / sin by (transformers
    ``modeling_rope_utils._compute_yarn_parameters``): ``attention_factor`` when given,
    else ``get_mscale(f, mscale) / get_mscale(f, mscale_all_dim)`` when both are set
    (DeepSeek-V3: 1.0 / 1.0 -> 1), else ``get_mscale(f)`` (gpt-oss, factor 32: 1.347), with
    ``get_mscale(f, m) = 0.1 m ln f + 1`` for ``f > 1``; 1.0 for any other scaling."""
    if not isinstance(scaling, dict) or str(scaling.get("rope_type", scaling.get("type", ""))) != "yarn":
        return 1.0
    num = lambda v: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    given = num(scaling.get("attention_factor"))
    if given is not None:
        return given
    f = num(scaling.get("factor")) or 1.0
    mscale = lambda m: 0.1 * m * math.log(f) + 1.0 if 1.0 < f < math.inf else 1.0
    m, m_all = num(scaling.get("mscale")), num(scaling.get("mscale_all_dim"))
    if m and m_all:
        return mscale(m) / mscale(m_all)
    return mscale(1.0)


def _mxfp4_experts(top: dict) -> bool:
    """Whether the checkpoint ships MXFP4 experts (``quantization_config.quant_method ==
    "mxfp4"``, gpt-oss; the MoE experts only, the rest bf16: ``modules_to_not_convert``)."""
    q = top.get("quantization_config")
    return isinstance(q, dict) and str(q.get("quant_method", "")).lower() == "mxfp4"


def hf_config_table(path: Path) -> tuple[dict, str]:
    """(catalog-schema table, model name) of a Hugging Face ``config.json`` (module
    docstring for the keys)."""
    where = str(path)
    top = load_json(path, where)
    c = text_config(top)
    check_hf_keys(top, c, where)

    def get(*keys, default=None):
        for k in keys:
            if k in c and c[k] is not None:
                return c[k]
        if default is None:
            raise InputError(where, keys[0], "is required in a Hugging Face config.json")
        return default

    h = get("hidden_size", "n_embd")
    heads = get("num_attention_heads", "n_head")
    model_type = str(top.get("model_type", c.get("model_type", "")))
    act = get("hidden_act", "hidden_activation", "activation_function", default="gelu")
    require(isinstance(act, str) and act in GATED_ACTS + PLAIN_ACTS, where, "hidden_act",
            f"must be an activation name transformers knows ({', '.join(GATED_ACTS)}: gated; "
            f"gelu, gelu_new, relu, ...: plain), but got {act!r}")
    tied = get("tie_word_embeddings", default=top.get("tie_word_embeddings",
                                                      model_type in GEMMA_MODEL_TYPES))
    require(isinstance(tied, bool), where, "tie_word_embeddings", f"must be true or false, but got {tied!r}")
    head_dim = c.get("head_dim") or 0
    require(isinstance(head_dim, int) and not isinstance(head_dim, bool) and head_dim >= 0, where,
            "head_dim", f"must be a positive integer, but got {head_dim!r}")
    experts = get("n_routed_experts", "num_local_experts", "num_experts", default=1)
    top_k = get("num_experts_per_tok", default=1) if experts != 1 else 1
    arch = _moe_fields(c, where, h, experts, model_type)
    arch.update(_mla_fields(c, where))
    arch.update(window_fields(c, where, get("num_hidden_layers", "n_layer"), model_type))
    arch.update(linear_attention_fields(c, where, get("num_hidden_layers", "n_layer")))
    arch.update(_dsa_fields(c, where))
    arch["mtp_layers"] = _int_or_zero(c, "num_nextn_predict_layers", where)
    if arch.get("kv_lora_rank", 0) > 0:
        head_dim = 0                      # MLA: the head dims are the qk/v fields
    d = {
        "num_layers": get("num_hidden_layers", "n_layer"),
        "hidden_size": h,
        "ffn_hidden_size": arch.pop("ffn_hidden_size"),
        "num_attention_heads": heads,
        "num_kv_heads": get("num_key_value_heads", default=heads),
        "vocab_size": get("vocab_size"),
        "seq_length": get("max_position_embeddings", "n_positions", default=2048),
        "max_context": get("max_position_embeddings", "n_positions", default=0),
        "gated_mlp": act in GATED_ACTS or model_type in GEMMA_MODEL_TYPES,
        "tied_embeddings": tied,
        "num_experts": experts,
        "kv_channels": head_dim,   # Qwen3/Gemma: head_dim != hidden/heads
        "top_k": top_k,
        "mxfp4_experts": _mxfp4_experts(top),
        # gpt-oss: swiglu_limit clamps the experts' activation; GptOssExperts has biases
        "clamped_swiglu": bool(c.get("swiglu_limit")) and experts != 1,
        "expert_bias": model_type == "gpt_oss",
        "rope_mscale": yarn_attention_factor(c.get("rope_scaling")) != 1.0,
        "norm": "rmsnorm" if "rms_norm_eps" in c else "layernorm",
        "description": str(top.get("_name_or_path") or c.get("_name_or_path")
                           or model_type or Path(path).parent.name),
        **{k: v for k, v in arch.items() if v},
    }
    return d, Path(path).parent.name or "hf-model"


def _moe_fields(c: dict, where: str, h, experts, model_type: str) -> dict:
    """The FFN widths and the MoE layer structure (module docstring); ``ffn_hidden_size``
    is the dense width, ``moe_ffn_hidden_size`` the routed expert's."""
    inter = c.get("intermediate_size", c.get("n_inner"))
    out = {"ffn_hidden_size": inter if inter is not None else 4 * h}
    if experts == 1:
        return out
    moe_inter = _int_or_zero(c, "moe_intermediate_size", where)
    mlp_inter = _int_or_zero(c, "intermediate_size_mlp", where)
    if moe_inter:
        out["moe_ffn_hidden_size"] = moe_inter
    elif mlp_inter:                                   # Llama 4: experts / dense layers
        out["moe_ffn_hidden_size"] = out["ffn_hidden_size"]
        out["ffn_hidden_size"] = mlp_inter
    shared_w = _int_or_zero(c, "shared_expert_intermediate_size", where)
    n_shared = _int_or_zero(c, "n_shared_experts", where)
    if shared_w:                                      # Qwen2-MoE: one shared expert
        out["num_shared_experts"] = max(n_shared, 1)
        out["shared_expert_ffn_hidden_size"] = shared_w
    elif n_shared:
        out["num_shared_experts"] = n_shared          # DeepSeek: of the expert width
    elif model_type.startswith("llama4"):
        out["num_shared_experts"] = 1                 # Llama4TextMoe.shared_expert
    freq = c.get("moe_layer_freq", 1)
    require(freq == 1, where, "moe_layer_freq", f"must be 1 (every layer after "
            f"first_k_dense_replace is MoE), but got {freq!r}")
    out["first_k_dense"] = _int_or_zero(c, "first_k_dense_replace", where)
    step = _int_or_zero(c, "interleave_moe_layer_step", where) or _int_or_zero(c, "decoder_sparse_step", where)
    out["moe_layer_step"] = step if step > 1 else 0
    only = c.get("mlp_only_layers") or []
    require(isinstance(only, list) and only == list(range(len(only))), where, "mlp_only_layers",
            f"must be empty or a leading run [0, 1, ..., k-1] of dense layers, but got {only!r}")
    if only:
        require(not out["first_k_dense"], where, "mlp_only_layers",
                "must not be combined with first_k_dense_replace")
        out["first_k_dense"] = len(only)
    return out


def _dsa_fields(c: dict, where: str) -> dict:
    """DeepSeek Sparse Attention's indexer (module docstring); {} without ``index_topk``."""
    if not _int_or_zero(c, "index_topk", where):
        return {}
    return {"index_topk": _int_or_zero(c, "index_topk", where),
            "index_heads": _int_or_zero(c, "index_n_heads", where),
            "index_head_dim": _int_or_zero(c, "index_head_dim", where)}


def _mla_fields(c: dict, where: str) -> dict:
    """Multi-head latent attention dims (DeepSeek-V2/V3), all 0 without MLA."""
    r = _int_or_zero(c, "kv_lora_rank", where)
    if not r:
        return {}
    return {"kv_lora_rank": r, "q_lora_rank": _int_or_zero(c, "q_lora_rank", where),
            "qk_rope_head_dim": _int_or_zero(c, "qk_rope_head_dim", where),
            "qk_nope_head_dim": _int_or_zero(c, "qk_nope_head_dim", where),
            "v_head_dim": _int_or_zero(c, "v_head_dim", where)}


_WINDOWED_TYPES = {"sliding_attention": "sliding_window", "chunked_attention": "attention_chunk_size"}


def linear_attention_fields(c: dict, where: str, layers: int) -> dict:
    """Hybrid linear attention (Qwen3-Next / Qwen3.5, module docstring): ``linear_layers``
    from ``layer_types`` (its ``"linear_attention"`` entries) or, without it,
    ``full_attention_interval`` (HF ``Qwen3NextConfig``: layer i is full when ``(i + 1) %
    interval == 0``), the Gated DeltaNet head fields, and ``attn_output_gate`` (default
    true for these families: ``Qwen3NextAttention`` always gates); {} for other models."""
    types = c.get("layer_types")
    interval = _int_or_zero(c, "full_attention_interval", where)
    if isinstance(types, list) and "linear_attention" in types:
        n = sum(t == "linear_attention" for t in types)
    elif interval and _int_or_zero(c, "linear_num_value_heads", where):
        n = sum((i + 1) % interval != 0 for i in range(layers))
    else:
        return {}
    out = {"linear_layers": n}
    for key, field in _LINEAR_KEYS:
        out[field] = _int_or_zero(c, key, where)
        require(out[field] > 0, where, key, f"must be a positive integer in a hybrid "
                f"linear-attention config ({n} linear_attention layers), but got {c.get(key)!r}")
    gate = c.get("attn_output_gate", True)
    require(isinstance(gate, bool), where, "attn_output_gate", f"must be true or false, but got {gate!r}")
    out["attn_output_gate"] = gate
    return out


def window_fields(c: dict, where: str, layers: int, model_type: str) -> dict:
    """``sliding_window`` / ``attention_chunk_size`` and ``window_layers`` (module
    docstring); {} when every layer attends its whole prefix."""
    types = c.get("layer_types")
    chunk = _int_or_zero(c, "attention_chunk_size", where)
    window = _int_or_zero(c, "sliding_window", where)
    if types is not None:
        require(isinstance(types, list) and len(types) == layers, where, "layer_types",
                f"must list one type per layer ({layers}), but got {types!r}")
        kinds = {t for t in types if t not in ("full_attention", "linear_attention")}
        require(kinds <= set(_WINDOWED_TYPES) and len(kinds) <= 1, where, "layer_types",
                f"must hold full_attention and one of {sorted(_WINDOWED_TYPES)}, but got {sorted(kinds)}")
        if not kinds:
            return {}
        key = _WINDOWED_TYPES[kinds.pop()]
        size = chunk if key == "attention_chunk_size" else window
        require(size > 0, where, key, f"must be a positive integer when layer_types has windowed "
                f"layers, but got {c.get(key)!r}")
        return {key: size, "window_layers": sum(t != "full_attention" for t in types)}
    require(not (chunk and window), where, "sliding_window",
            f"must be null or 0 when attention_chunk_size is set without layer_types (one "
            f"windowed layer kind), but got (sliding_window={window}, attention_chunk_size={chunk})")
    if chunk:                                         # Llama 4: the RoPE layers are chunked
        rope = c.get("no_rope_layers")
        if rope:
            require(len(rope) >= layers, where, "no_rope_layers",
                    f"must list at least one entry per layer ({layers}), but got {len(rope)}")
            n = sum(int(v) for v in rope[:layers])
        else:
            every = _int_or_zero(c, "no_rope_layer_interval", where) or 4
            n = sum((i + 1) % every != 0 for i in range(layers))
        return {"attention_chunk_size": chunk, "window_layers": n} if n else {}
    if not window or c.get("use_sliding_window") is False or (
            model_type.startswith("qwen") and not c.get("use_sliding_window")):
        return {}
    if model_type.startswith("qwen"):
        n = layers - min(_int_or_zero(c, "max_window_layers", where), layers)
    elif model_type in ("gemma2", "gpt_oss"):     # even layers slide (GptOssConfig default)
        n = (layers + 1) // 2
    elif model_type.startswith("gemma3"):
        every = _int_or_zero(c, "sliding_window_pattern", where) or 6
        n = sum((i + 1) % every != 0 for i in range(layers))
    else:
        n = layers
    return {"sliding_window": window, "window_layers": n} if n else {}
