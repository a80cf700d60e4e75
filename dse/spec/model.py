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
  MoE        MLP x num_experts, plus the h*E router
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple
from pathlib import Path

import jax.numpy as jnp

from dse.errors import InputError, require
from dse.io import load_json, load_toml
from dse.spec.pytree import pytree_dataclass

CATALOG = Path(__file__).parent / "catalog" / "models.toml"


@pytree_dataclass(label=("name", "description", "norm"))
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
    name: str = ""
    description: str = ""
    norm: str = "layernorm"

    @property
    def head_dim(self) -> float:
        """The head dimension (:func:`head_dim_of`, the one definition)."""
        return float(head_dim_of(self))

    def replace(self, **kw) -> "Model":
        return dataclasses.replace(self, **kw)

    def params_per_layer(self) -> int:
        """Parameters of one layer (:func:`layer_params`, the one definition)."""
        p = layer_params(self)
        return int(round(float(p.attention + p.router + p.experts + p.norms)))

    def num_params(self) -> int:
        emb = self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)
        return self.num_layers * self.params_per_layer() + emb + self.hidden_size


_INT_FIELDS = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
               "num_kv_heads", "vocab_size", "seq_length", "num_experts", "top_k", "kv_channels")
_BOOL_FIELDS = ("gated_mlp", "dropout", "tied_embeddings")
_LABELS = ("description", "source", "norm", "name", "hf_ids")


def model_from_dict(d: dict, where: str, name: str) -> Model:
    """Validate a TOML table (catalog schema) and build a :class:`Model`."""
    allowed = set(_INT_FIELDS) | set(_BOOL_FIELDS) | set(_LABELS)
    unknown = sorted(set(d) - allowed)
    require(not unknown, where, f"{name}.{unknown[0] if unknown else ''}",
            f"unknown key; allowed keys are {sorted(allowed)}")
    kw = {}
    for k in _INT_FIELDS:
        if k not in d and k in ("seq_length", "num_experts", "top_k", "kv_channels"):
            continue
        require(k in d, where, f"{name}.{k}", "is required")
        v = d[k]
        require(isinstance(v, int) and not isinstance(v, bool) and (v > 0 or (k == "kv_channels" and v == 0)),
                where, f"{name}.{k}", f"must be a positive integer, but got {v!r}")
        kw[k] = v
    for k in _BOOL_FIELDS:
        v = d.get(k, False)
        require(isinstance(v, bool), where, f"{name}.{k}", f"must be true or false, but got {v!r}")
        kw[k] = int(v)
    m = Model(name=name, description=str(d.get("description", name)),
              norm=str(d.get("norm", "layernorm")), **kw)
    validate_model(m, where)
    return m


class LayerParams(NamedTuple):
    """Parameters of one layer by part (module docstring); the dense MLP is ``experts``
    with ``num_experts == 1``."""
    attention: object     # h(a d + 2 g d) + a d h
    router: object        # h E for MoE, else 0
    experts: object       # (2 + gated) h f per expert, times E
    norms: object         # 2 h


def layer_params(model: Model) -> LayerParams:
    """The one parameter count of a layer (works on traced leaves)."""
    h = model.hidden_size * 1.0
    d = head_dim_of(model)
    q = model.num_attention_heads * d
    kv = model.num_kv_heads * d
    E = model.num_experts * 1.0
    return LayerParams(attention=h * (q + 2 * kv) + q * h,
                       router=jnp.where(E > 1, h * E, 0.0),
                       experts=(2.0 + model.gated_mlp) * h * model.ffn_hidden_size * E,
                       norms=2.0 * h)


def kv_heads_per_rank(model: Model, tp):
    """KV heads one GPU holds under tensor parallelism: ``max(ceil(g / tp), 1)`` --
    Megatron-LM and vLLM split the KV heads over TP and replicate one per GPU when
    ``tp > g`` (the one definition, for training and serving)."""
    return jnp.maximum(jnp.ceil(model.num_kv_heads / tp), 1.0)


def head_dim_of(model: Model):
    """Head dimension as a float that works on traced leaves: ``kv_channels`` when set,
    else ``hidden_size / num_attention_heads``."""
    return jnp.where(model.kv_channels > 0, model.kv_channels * 1.0,
                     model.hidden_size / model.num_attention_heads)


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


def model_from_hf_config(path: Path) -> Model:
    """A Hugging Face ``config.json`` (Llama/Mistral/Mixtral/Qwen keys, or GPT-2 keys)."""
    where = str(path)
    c = load_json(path, where)

    def get(*keys, default=None):
        for k in keys:
            if k in c and c[k] is not None:
                return c[k]
        if default is None:
            raise InputError(where, keys[0], "is required in a Hugging Face config.json")
        return default

    h = get("hidden_size", "n_embd")
    heads = get("num_attention_heads", "n_head")
    act = get("hidden_act", "activation_function", default="gelu")
    require(isinstance(act, str), where, "hidden_act", f"must be a string, but got {act!r}")
    tied = get("tie_word_embeddings", default=False)
    require(isinstance(tied, bool), where, "tie_word_embeddings", f"must be true or false, but got {tied!r}")
    head_dim = c.get("head_dim") or 0
    require(isinstance(head_dim, int) and not isinstance(head_dim, bool) and head_dim >= 0, where,
            "head_dim", f"must be a positive integer, but got {head_dim!r}")
    d = {
        "num_layers": get("num_hidden_layers", "n_layer"),
        "hidden_size": h,
        "ffn_hidden_size": get("intermediate_size", "n_inner", default=4 * h),
        "num_attention_heads": heads,
        "num_kv_heads": get("num_key_value_heads", default=heads),
        "vocab_size": get("vocab_size"),
        "seq_length": get("max_position_embeddings", "n_positions", default=2048),
        "gated_mlp": act in ("silu", "swiglu", "swish", "geglu"),
        "tied_embeddings": tied,
        "num_experts": get("num_local_experts", "num_experts", default=1),
        "kv_channels": head_dim,   # Qwen3/Gemma: head_dim != hidden/heads
        "top_k": get("num_experts_per_tok", default=1),
        "norm": "rmsnorm" if "rms_norm_eps" in c else "layernorm",
        "description": str(get("_name_or_path", "model_type", default=Path(path).parent.name)),
    }
    return model_from_dict(d, where, Path(path).parent.name or "hf-model")


_CACHE: dict[str, Model] | None = None


def catalog() -> dict[str, Model]:
    global _CACHE
    if _CACHE is None:
        data = load_toml(CATALOG)
        _CACHE = {n: model_from_dict(t, str(CATALOG), n) for n, t in data.items()}
    return _CACHE


_HF_IDS: dict[str, str] | None = None


def hf_id_index() -> dict[str, str]:
    """Lower-cased Hugging Face repo id -> catalog name (the catalog's ``hf_ids``)."""
    global _HF_IDS
    if _HF_IDS is None:
        data = load_toml(CATALOG)
        _HF_IDS = {str(i).lower(): n for n, t in data.items() for i in t.get("hf_ids", [])}
    return _HF_IDS


def get_model(name: str, where: str = "--model") -> Model:
    """A catalog name, a Hugging Face repo id the catalog lists (``hf_ids``), a
    ``config.json`` path, or ``file.toml[:table]``."""
    cat = catalog()
    if name in cat:
        return cat[name]
    if name.strip().lower() in hf_id_index():
        return cat[hf_id_index()[name.strip().lower()]]
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
                     f"config.json path or a .toml path, but got {name!r}")
