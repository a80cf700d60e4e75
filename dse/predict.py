"""`dse predict` / `dse validate`: one prediction per row of the validation schema
(../shared/validation/README.md).

A blank layout field is *unknown*: the sweep searches every value the grid allows for it
(with the given fields held) and keeps the fastest layout that fits in memory, as a
practitioner tuning that run would; the chosen values are written back in
``chosen_<field>`` columns (and ``chosen_recompute_modules``, the list selective recompute
re-ran; blank for the other recompute settings).  Architecture heuristics the schema leaves implicit, each
documented: a gated (SwiGLU) MLP when ``ffn_hidden_size != 4*hidden_size``; dropout for
non-gated (GPT-style) models; tied input/output embeddings for non-gated models (Megatron-LM
ties them unless ``--untie-embeddings-and-output-weights``, which every Llama-style SwiGLU
recipe passes).  Optional ``num_experts`` and ``top_k`` columns (or Megatron's
``num_moe_experts`` / ``moe_router_topk``) make the row a mixture-of-experts model whose
experts each have ``ffn_hidden_size`` (or ``moe_ffn_hidden_size``, when given, beside the
dense layers' ``ffn_hidden_size``); an optional ``mtp_layers`` (Megatron's
``mtp_num_layers``; 0 = none) column the multi-token-prediction modules the run trained
(:func:`dse.graph.train.mtp_ops`); an optional ``head_dim`` (or ``kv_channels``) column
sets a head dimension other than ``hidden_size / num_attention_heads`` (Qwen3, Gemma).
A ``model`` label naming a catalog model whose architecture columns agree with it takes
the catalog's table, with what the columns cannot say (MLA, shared experts, dense first
layers; :func:`row_model`); the architecture columns may then be blank or absent, and the
``model_arch`` output column names the catalog entry (or ``columns``).
An optional ``attention`` column (``flash`` | ``unfused``) says which attention kernel the
run used; blank or absent means FlashAttention (or unfused where the head dim has no fused
kernel).  An optional ``framework`` column (``megatron`` | ``deepspeed`` | ``fsdp`` (PyTorch FSDP1:
llm-foundry, Composer) | ``fsdp2`` or ``torchtitan`` (PyTorch ``fully_shard``); blank =
megatron) says which framework profile (:mod:`dse.spec.frameworks`: memory accounting,
pipeline transfers, ZeRO-3 gathers) applies; an optional
``tp_comm_overlap`` column (true | false; blank = false, Megatron's default) whether TP
collectives were overlapped with GEMMs (``--tp-comm-overlap``); an optional
``moe_a2a_overlap`` column (true | false; blank = the framework profile's default, off)
whether the run used Megatron-Core's 1F1B expert-parallel all-to-all overlap
(Megatron-Bridge ``moe_a2a_overlap=True``: ``overlap_moe_expert_parallel_comm`` +
``delay_wgrad_compute``; :mod:`dse.train.moe_overlap`); an optional ``cuda_graphs``
column (``none`` | ``full_iteration``; blank = none) whether the whole iteration was one
CUDA graph (Megatron-Core ``--cuda-graph-impl full_iteration``: no host launch floor);
an optional ``moe_dispatcher`` column (``alltoall`` | ``deepep`` | ``hybridep``; blank =
alltoall) which token dispatcher ran (the flex dispatcher's DeepEP / HybridEP backends
send each token once per remote node); an optional ``moe_token_drop`` column (``pad`` |
``dropless``; blank = dropless): ``pad`` is a capacity factor with the expert inputs
padded to capacity (NeMo's ``MegatronTokenDropCallback``), where every expert computes
its capacity and no EP rank waits for a busier one; an optional ``recompute_modules``
column (Megatron-Core's list: ``core_attn``, ``mla_up_proj``, ``layernorm``, ``moe_act``,
``mlp``, ``shared_experts``, separated by ``+``, commas or spaces, brackets allowed; ``none``
= the empty list; blank = ``core_attn``) which modules selective recompute re-runs -- a
stated list makes a blank ``recompute`` cell selective (:func:`dse.graph.train.module_recompute_ops`,
:func:`dse.train.memory.module_savings`); an optional ``grad_reduce_in_fp32`` column (true |
false; blank = the framework's default: fp32 main gradients in bf16, 16-bit in the Megatron
family's fp8) -- Megatron-Core's setting, false in every Megatron-Bridge / NeMo performance
recipe (:func:`dse.graph.train.main_grad_bytes`); an optional ``ddp_bucket_size`` column
(parameters per data-parallel gradient bucket, Megatron-Core ``--ddp-bucket-size``; blank =
the framework's rule, :func:`dse.graph.train.ddp_bucket_elems`); an optional ``fp8_attention`` column (or
Megatron's name, ``fp8_dot_product_attention``; true | false; blank = false): the fused
attention in FP8 (Transformer Engine's ``fp8_dpa``), precision fp8 or mxfp8 only
(:class:`dse.graph.ops.Attention`'s ``fp8``).

Outputs beside the prediction: the per-GPU memory breakdown ``predicted_mem_<part>_gib``
(weights, grads, optimizer, activations, reserve; :mod:`dse.train.memory_parts`), the
80 % band ``predicted_iter_time_lo_s`` / ``_hi_s`` with its ``interval_basis``
(:mod:`dse.intervals`) and ``mem_within_margin``: blank settings are chosen within the
memory safety margin; a row whose given fields leave nothing within it is judged against
the full HBM (the published run ran) and gets False.
"""

from __future__ import annotations

import dataclasses
import difflib
import math

import numpy as np
import pandas as pd

from dse.na_cells import NA_CELLS, blank_cell, na_word_cells, na_word_status
from dse.errors import InputError, require
from dse.row_status import has_prediction  # noqa: F401  (re-exported: dse.predict.has_prediction)
from dse.spec.hardware import GIB, get_hardware, missing_tensor_cores
from dse.spec.layout import (ATTENTION, CUDA_GRAPHS, FRAMEWORK, MOE_DISPATCHERS, PRECISION, RECOMPUTE,
                             RECOMPUTE_MODULES_DEFAULT, recompute_modules_code, recompute_modules_names,
                             Workload, canonical_framework, ddp_bucket_code, fp8_attention_code)
from dse.spec.model import Model, catalog, expert_ffn, head_dim_of, validate_model
from dse.spec.model_names import catalog_name_of
from dse.sweep.grid import GridOptions, enumerate_layouts
from dse.sweep.run import sweep_points, to_dataframe
from dse.train.memory_parts import MEM_COLUMNS, PREDICT_MEM_MARGIN

REQUIRED = ("id", "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
            "vocab_size", "seq_length", "global_batch_size", "gpu", "num_gpus", "precision")
# architecture columns a row may leave blank (or a file omit) when `model` names a
# catalog model (row_model)
ARCH_REQUIRED = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "vocab_size")
LAYOUT_COLS = {"tp": "tp", "pp": "pp", "dp": "dp", "cp": "cp", "ep": "ep",
               "micro_batch_size": "mbs", "vpp": "vpp"}
CHUNK = 1 << 14
# optional columns read by predict / validate (any other column is carried through,
# unless its name is a near-miss of one of these: then it is an error, not ignored)
KNOWN_COLS = {"source", "model", "num_kv_heads", "sequence_parallel", "recompute", "zero_stage",
              "attention", "framework", "tp_comm_overlap", "moe_a2a_overlap", "cuda_graphs",
              "moe_dispatcher", "moe_token_drop", "recompute_modules", "grad_reduce_in_fp32",
              "fp8_attention", "fp8_dot_product_attention", "ddp_bucket_size",
              "measured_iter_time_s",
              "measured_mem_gib", "target_basis"}
# optional architecture columns (Megatron's argument names accepted as aliases): mixture
# of experts (ffn_hidden_size is then each expert's MLP width, unless moe_ffn_hidden_size
# gives it and ffn_hidden_size is the dense layers') and a decoupled head dim
ARCH_COLS = {"num_experts": "num_experts", "num_moe_experts": "num_experts",
            "top_k": "top_k", "moe_router_topk": "top_k",
            "head_dim": "kv_channels", "kv_channels": "kv_channels",
            "moe_ffn_hidden_size": "moe_ffn_hidden_size",
            "mtp_layers": "mtp_layers", "mtp_num_layers": "mtp_layers"}
# architecture columns that may be 0 (0 = none)
ARCH_ZERO_OK = {"mtp_layers"}


def _word(v) -> str:
    """A word column's cell, lower-cased, as the file wrote it: pandas reads a column of
    numbers as floats, so a ``1`` in a text column is quoted back as ``'1'``, not ``'1.0'``."""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v).strip().lower()


def _true_false(row, col: str, where: str):
    """A ``true | false | blank`` column's cell: True / False, None where blank."""
    v = row.get(col)
    if blank_cell(v):
        return None
    w = _word(v)
    require(w in ("true", "false"), where, col, f"must be true, false or blank, but got {w!r}")
    return w == "true"


# Upper bounds on the integer columns: sizes the sweep's int32 arrays hold, and GPU
# counts / batches whose divisor enumeration (dse.sweep.grid) finishes in seconds.
INT_MAX = 2**31 - 1
MAX_INT = {"num_gpus": 1 << 20, "global_batch_size": 1 << 20, "seq_length": 1 << 24}
MAX_TOKENS = INT_MAX   # global_batch_size x seq_length (tokens per step, int32)


def _int(row, col, where, positive=True):
    v = row[col]
    top = MAX_INT.get(col, INT_MAX)
    rule = f"must be a {'positive' if positive else 'non-negative'} integer <= {top}, but got {v!r}"
    try:
        f = float(v)
        ok = math.isfinite(f) and f == int(f) and (f > 0 or (not positive and f == 0)) and f <= top
    except (TypeError, ValueError, OverflowError):
        ok = False
    require(ok, where, col, rule)
    return int(f)


def row_model(row, where) -> tuple[Model, str]:
    """The row's model and where its architecture came from: a catalog name, or
    ``"columns"``.  When the ``model`` label names a catalog model
    (:func:`dse.spec.model_names.catalog_name_of`: ``DeepSeekV3``, ``Llama3.1-405B``, a
    Hugging Face repo id) and every architecture column the row gives agrees with it
    (:func:`_agrees`; a blank one takes the catalog's value), the catalog's table stands
    for the row -- it carries what the schema's columns cannot (multi-head latent
    attention, shared experts, dense first layers, a routed expert's own width, untied
    embeddings, no dropout) -- with the row's ``seq_length`` and ``vocab_size`` (the run's
    padded vocabulary) and, when the row gives it, its ``mtp_layers`` (a run may train
    without the catalog model's MTP modules).  Otherwise the row's own columns alone
    describe it (module docstring), blanks read as there."""
    name = catalog_name_of(row.get("model"))
    if name is not None:
        cat = catalog()[name]
        filled = {**_catalog_columns(cat), **{k: v for k, v in row.items() if not blank_cell(v)}}
        m = _columns_model(filled, where)
        if _agrees(m, cat):
            mtp = cat.mtp_layers if all(blank_cell(row.get(c)) for c in ("mtp_layers", "mtp_num_layers")) \
                else m.mtp_layers
            return dataclasses.replace(cat, seq_length=m.seq_length, vocab_size=m.vocab_size,
                                       mtp_layers=mtp, name=m.name), name
    for c in ARCH_REQUIRED:
        require(c in row and not blank_cell(row[c]), where, c,
                "must be given (or `model` must name a catalog model: dse/spec/catalog/models.toml)")
    return _columns_model(row, where), "columns"


def _catalog_columns(cat: Model) -> dict:
    """The schema's architecture columns of a catalog model (blank ones of a row that
    names it take these)."""
    return {"num_layers": cat.num_layers, "hidden_size": cat.hidden_size,
            "ffn_hidden_size": cat.ffn_hidden_size, "num_attention_heads": cat.num_attention_heads,
            "num_kv_heads": cat.num_kv_heads, "vocab_size": cat.vocab_size,
            "num_experts": cat.num_experts, "top_k": cat.top_k}


def _agrees(m: Model, cat: Model) -> bool:
    """Whether the columns' model ``m`` can be the catalog model ``cat``: the same layers,
    width, heads, KV heads (MLA: also 1, the latent), experts and top-k;
    ``ffn_hidden_size`` either the dense layers' or one routed expert's width (tables give
    either for a MoE model); a head dim column, when given, equal to the catalog's (MLA:
    its q.k or value head dim)."""
    same = all(getattr(m, f) == getattr(cat, f) for f in
               ("num_layers", "hidden_size", "num_attention_heads", "num_experts", "top_k"))
    # MLA caches one latent per token: a table may count it as one KV head
    kv = m.num_kv_heads == cat.num_kv_heads or (cat.kv_lora_rank > 0 and m.num_kv_heads == 1)
    ffn = m.ffn_hidden_size in (cat.ffn_hidden_size, int(expert_ffn(cat))) and \
        m.moe_ffn_hidden_size in (0, int(expert_ffn(cat)))
    heads = {float(head_dim_of(cat)), float(cat.kv_channels),
             float(cat.qk_nope_head_dim + cat.qk_rope_head_dim), float(cat.v_head_dim)}
    head = m.kv_channels == 0 or float(m.kv_channels) in heads
    return bool(same and kv and ffn and head)


def _columns_model(row, where) -> Model:
    """The model the row's architecture columns describe (module docstring)."""
    h = _int(row, "hidden_size", where)
    f = _int(row, "ffn_hidden_size", where)
    heads = _int(row, "num_attention_heads", where)
    kv = heads if blank_cell(row.get("num_kv_heads")) else _int(row, "num_kv_heads", where)
    gated = f != 4 * h
    arch, named = {}, {}
    for col, field in ARCH_COLS.items():
        if col in row and not blank_cell(row[col]):
            v = _int(row, col, where, positive=field not in ARCH_ZERO_OK)
            require(arch.get(field, v) == v, where, col,
                    f"must agree with {named.get(field)} ({arch.get(field)}), but got {v}")
            arch[field], named[field] = v, col
    if arch.get("top_k", 1) > arch.get("num_experts", 1):
        raise InputError(where, named["top_k"], f"must be <= the number of experts "
                         f"({arch.get('num_experts', 1)}), but got {arch['top_k']}")
    m = Model(num_layers=_int(row, "num_layers", where), hidden_size=h, ffn_hidden_size=f,
              num_attention_heads=heads, num_kv_heads=kv, vocab_size=_int(row, "vocab_size", where),
              seq_length=_int(row, "seq_length", where), gated_mlp=int(gated), dropout=int(not gated), tied_embeddings=int(not gated),
              name=str(row.get("model", "")), **arch)
    validate_model(m, where)
    return m


def row_options(row, where) -> tuple[GridOptions, dict]:
    """Grid restricted to the row's known fields; returns (options, fixed values)."""
    fixed = {}
    for col, f in LAYOUT_COLS.items():
        if col in row and not blank_cell(row[col]):
            fixed[f] = _int(row, col, where)
    kw = {k: (v,) for k, v in fixed.items() if k != "dp"}
    sp = row.get("sequence_parallel")
    if not blank_cell(sp):
        s = _word(sp)
        require(s in ("true", "false"), where, "sequence_parallel", f"must be true or false, but got {s!r}")
        kw["sp"] = (1,) if s == "true" else (0,)
        fixed["sp"] = kw["sp"][0]
    rc = row.get("recompute")
    if not blank_cell(rc):
        rc_ = _word(rc)
        require(rc_ in RECOMPUTE, where, "recompute", f"must be one of {sorted(RECOMPUTE)}, but got {rc_!r}")
        kw["recompute"] = (RECOMPUTE[rc_],)
    if not blank_cell(row.get("recompute_modules")):
        # a module list is Megatron-Core's selective granularity (recompute_modules only
        # applies there): a blank recompute cell reads as selective, any other is refused
        require(kw.get("recompute", (RECOMPUTE["selective"],)) == (RECOMPUTE["selective"],), where,
                "recompute_modules", f"applies only to recompute = selective, but recompute is {rc!r}")
        kw["recompute"] = (RECOMPUTE["selective"],)
    z = row.get("zero_stage")
    if not blank_cell(z):
        zi = _int(row, "zero_stage", where, positive=False)
        require(zi in (0, 1, 2, 3), where, "zero_stage", f"must be 0, 1, 2 or 3, but got {z!r}")
        kw["zero"] = (zi,)
    return GridOptions(pow2_only=False, max_tp=1024, max_cp=64, max_mbs=64, max_vpp=64, **kw), fixed


def _run_facts(row, where) -> tuple[str, str, bool]:
    """The optional ``attention``, ``framework`` and ``tp_comm_overlap`` columns."""
    att = row.get("attention")
    att = "flash" if blank_cell(att) else _word(att)
    require(att in ATTENTION, where, "attention", f"must be one of {sorted(ATTENTION)} or blank, but got {att!r}")
    fw = row.get("framework")
    fw = "megatron" if blank_cell(fw) else _word(fw)
    require(fw in FRAMEWORK, where, "framework", f"must be one of {sorted(FRAMEWORK)} or blank, but got {fw!r}")
    fw = canonical_framework(fw)
    return att, fw, bool(_true_false(row, "tp_comm_overlap", where))


def _schedule_facts(row, where) -> tuple[int, int, int]:
    """The optional ``moe_a2a_overlap`` (true | false | blank), ``cuda_graphs``
    (none | full_iteration | blank) and ``moe_dispatcher`` (alltoall | deepep | hybridep |
    blank) columns, as ``Workload`` codes."""
    a2a = bool(_true_false(row, "moe_a2a_overlap", where))
    cg = row.get("cuda_graphs")
    cg = "none" if blank_cell(cg) else _word(cg)
    require(cg in CUDA_GRAPHS, where, "cuda_graphs",
            f"must be one of {sorted(CUDA_GRAPHS)} or blank, but got {cg!r}")
    disp = row.get("moe_dispatcher")
    disp = "alltoall" if blank_cell(disp) else _word(disp)
    require(disp in MOE_DISPATCHERS, where, "moe_dispatcher",
            f"must be one of {sorted(MOE_DISPATCHERS)} or blank, but got {disp!r}")
    return int(a2a), CUDA_GRAPHS[cg], MOE_DISPATCHERS[disp]


def _grad_reduce(row, where) -> int:
    """The optional ``grad_reduce_in_fp32`` column (true | false | blank = the framework's
    default) as ``Workload.grad_reduce_fp32``."""
    v = _true_false(row, "grad_reduce_in_fp32", where)
    return -1 if v is None else int(v)


def _ddp_bucket(row, where) -> int:
    """The optional ``ddp_bucket_size`` column (parameters per data-parallel gradient bucket,
    Megatron-Core ``--ddp-bucket-size``; blank = the framework's rule) as
    ``Workload.ddp_bucket_elems`` (:func:`dse.spec.layout.ddp_bucket_code`)."""
    v = row.get("ddp_bucket_size")
    return ddp_bucket_code(None if blank_cell(v) else v, where)


def _fp8_attention(row, where, precision: int) -> int:
    """The optional ``fp8_attention`` column, or its Megatron name ``fp8_dot_product_attention``
    (true | false | blank = off; both given: they must agree) as ``Workload.fp8_attention``,
    refused outside an FP8 recipe (:func:`dse.spec.layout.fp8_attention_code`)."""
    given = {c: v for c in ("fp8_attention", "fp8_dot_product_attention")
             if (v := _true_false(row, c, where)) is not None}
    require(len(set(given.values())) <= 1, where, "fp8_attention",
            f"and fp8_dot_product_attention must agree when both are given, but got {given}")
    return fp8_attention_code(next(iter(given.values()), None), precision, where)


def _recompute_modules(row, where) -> int:
    """The optional ``recompute_modules`` column (Megatron-Core's list, e.g.
    ``mla_up_proj+mlp`` or ``[layernorm, moe_act]``; ``none`` = the empty list; blank =
    ``core_attn``, Megatron-Core's default) as ``Workload.recompute_modules``."""
    v = row.get("recompute_modules")
    if blank_cell(v):
        return RECOMPUTE_MODULES_DEFAULT
    return recompute_modules_code(_word(v), where)


MOE_TOKEN_DROP = {"dropless": 0, "pad": 1}


def _token_drop(row, where) -> int:
    """The optional ``moe_token_drop`` column (dropless | pad | blank) as
    ``Workload.moe_drop_pad``."""
    v = row.get("moe_token_drop")
    v = "dropless" if blank_cell(v) else _word(v)
    require(v in MOE_TOKEN_DROP, where, "moe_token_drop",
            f"must be one of {sorted(MOE_TOKEN_DROP)} or blank, but got {v!r}")
    return MOE_TOKEN_DROP[v]


def _layout_conflict(model: Model, gpus: int, fixed: dict) -> str:
    """The first rule the row's given layout fields break, naming the field (or "")."""
    tp = fixed.get("tp")
    if tp is not None:
        for heads, name in ((model.num_attention_heads, "num_attention_heads"),
                            (model.num_kv_heads, "num_kv_heads")):
            if heads % tp:
                return f"tp: `{name} % tp == 0` must hold, but got ({name}={heads}, tp={tp})"
    prod, given = 1, []
    for f in ("tp", "pp", "cp", "dp"):
        if f in fixed:
            prod *= fixed[f]
            given.append(f"{f}={fixed[f]}")
    if given and (gpus % prod or ("dp" in fixed and prod != gpus)):
        op = "==" if "dp" in fixed else "divides"
        return (f"num_gpus: `{'*'.join(g.split('=')[0] for g in given)} {op} num_gpus` must hold, "
                f"but got ({', '.join(given)}, num_gpus={gpus})")
    return ""


def _row_layouts(model: Model, gpus: int, gbs: int, seq: int, opt: GridOptions, fixed: dict,
                 framework: int = 0) -> dict:
    """The valid layouts (under ``framework``'s rules) the row's given fields allow: the
    grid of ``opt``, held to the given dp (the grid derives dp from the other degrees)."""
    cols = enumerate_layouts(model, gpus, gbs, seq, opt, framework=framework)
    if "dp" in fixed:
        keep = cols["dp"] == fixed["dp"]
        cols = {k: v[keep] for k, v in cols.items()}
    return cols


def _framework_conflict(model: Model, gpus: int, gbs: int, seq: int, opt: GridOptions,
                        fixed: dict, framework: int) -> str:
    """When the framework's rules leave no layout but the general ones do, the first
    framework rule the row's layouts break ("field: rule"), else ""."""
    from dse.spec.layout_rules import layout_violations
    cols = _row_layouts(model, gpus, gbs, seq, opt, fixed)
    if len(cols["tp"]) == 0:
        return ""
    _, reason = layout_violations(model, gpus, gbs, seq, cols, framework)
    return next((str(r) for r in reason if r), "")


#: a layout rule's field (dse.spec.layout_rules) as the column a row states it in
RULE_COLUMN = {**{f: c for c, f in LAYOUT_COLS.items()}, "sp": "sequence_parallel", "zero": "zero_stage",
               "gpus": "num_gpus"}


def _grid_conflict(model: Model, gpus: int, gbs: int, seq: int, opt: GridOptions, framework: int) -> str:
    """When the row's fields leave no valid layout, the rule its candidates break most
    often ("column: rule", the column as the row names it), else "" (no candidate at all:
    no tp x pp x cp x dp split of the GPUs divides the global batch)."""
    from dse.spec.layout_rules import layout_violations
    from dse.sweep.grid import candidate_layouts
    cols = candidate_layouts(model, gpus, gbs, opt)
    if len(cols["tp"]) == 0:
        return ""
    _, reason = layout_violations(model, gpus, gbs, seq, cols, framework)
    said = pd.Series([r for r in reason if r])
    if said.empty:
        return ""
    field, rule = said.value_counts().index[0].split(": ", 1)
    return f"{RULE_COLUMN.get(field, field)}: {rule}"


def predict_row(row: dict, where: str, mem_margin: float = PREDICT_MEM_MARGIN) -> dict:
    """Prediction for one row: the fastest feasible layout consistent with its fields.
    Blank settings are chosen within ``(1 - mem_margin) x HBM`` (default the full HBM:
    a measured run's blanks are what it ran, :data:`dse.train.memory_parts.PREDICT_MEM_MARGIN`);
    when nothing fits the margin, the row's layout is judged against the full HBM (the
    published run ran: ``mem_within_margin`` is then False); when nothing fits that either
    but the least-memory layout is within :data:`OVER_MEMORY_TOLERANCE` of it, that layout
    is timed as if it fit (status ``ok (over memory: ...)``), else the row gets no time."""
    out = {"predicted_iter_time_s": np.nan, "predicted_mem_gib": np.nan, "predicted_mfu": np.nan}
    for c in REQUIRED:
        require(c in row or c in ARCH_REQUIRED, where, c, "column is required")
    try:
        hw = get_hardware(str(row["gpu"]).strip(), where=where)
    except InputError as e:
        raise InputError(where, "gpu", e.rule if e.field == "hardware" else f"{e.where}: {e.field}: {e.rule}") from None
    prec = _word(row["precision"])
    require(prec in PRECISION, where, "precision", f"must be one of {sorted(PRECISION)}, but got {prec!r}")
    # every column is validated before any early return
    model, arch = row_model(row, where)
    out["model_arch"] = arch
    gpus = _int(row, "num_gpus", where)
    gbs = _int(row, "global_batch_size", where)
    seq = _int(row, "seq_length", where)
    opt, fixed = row_options(row, where)
    att, fw, ov = _run_facts(row, where)
    a2a, graphs, dispatcher = _schedule_facts(row, where)
    drop_pad = _token_drop(row, where)
    modules = _recompute_modules(row, where)
    grad_fp32 = _grad_reduce(row, where)
    bucket = _ddp_bucket(row, where)
    fp8_att = _fp8_attention(row, where, PRECISION[prec])
    require(gbs * seq <= MAX_TOKENS, where, "global_batch_size",
            f"`global_batch_size * seq_length <= {MAX_TOKENS}` (tokens per step) must hold, "
            f"but got (global_batch_size={gbs}, seq_length={seq})")
    reason = _layout_conflict(model, gpus, fixed)
    if reason:
        return {**out, "status": f"infeasible: {reason}"}
    lack = missing_tensor_cores(hw, PRECISION[prec])
    if lack:
        recipe = {3: " (NVFP4 training)", 5: " (MXFP8 training)"}.get(PRECISION[prec], "")
        return {**out, "status": f"infeasible: {hw.name} has no {lack}{recipe}"}
    framework = FRAMEWORK[fw]
    # the framework's own layout rules (dse.spec.layout_rules: DeepSpeed's pipeline
    # engine runs ZeRO <= 1 and no interleaving) bound the blank fields too
    cols = _row_layouts(model, gpus, gbs, seq, opt, fixed, framework)
    if fixed.get("ep", 1) > 1 and model.num_experts == 1:
        return {**out, "status": "infeasible: ep > 1 needs a mixture-of-experts model "
                                 "(give num_experts and top_k columns)"}
    if len(cols["tp"]) == 0:
        why = (_framework_conflict(model, gpus, gbs, seq, opt, fixed, framework)
               or _grid_conflict(model, gpus, gbs, seq, opt, framework))
        return {**out, "status": "infeasible: " + (why or "no valid layout matches the given fields "
                                 "(dp*tp*pp*cp must equal num_gpus; tp must divide heads and "
                                 "kv heads; global batch must split into micro-batches)")}
    wl = Workload(global_batch=gbs, seq_len=seq, precision=PRECISION[prec], attention=ATTENTION[att],
                  framework=framework, tp_overlap=int(ov),
                  moe_a2a_overlap=a2a, cuda_graphs=graphs, moe_dispatcher=dispatcher,
                  moe_drop_pad=drop_pad, recompute_modules=modules, grad_reduce_fp32=grad_fp32,
                  ddp_bucket_elems=bucket,
                  fp8_attention=fp8_att)
    df = to_dataframe(sweep_points(model, wl, [hw], cols, chunk=CHUNK, mem_margin=mem_margin))
    within = True
    if not df["feasible"].any() and mem_margin > 0:
        df = to_dataframe(sweep_points(model, wl, [hw], cols, chunk=CHUNK))
        within = False
    ok = df[df["feasible"]]
    mem_cols = lambda b: {f"predicted_{c}": b[c] for c in MEM_COLUMNS}
    status = "ok"
    if ok.empty:
        least = df.nsmallest(1, "mem_gib").iloc[0]
        if least["mem_gib"] > least["hbm_gib"] * (1.0 + OVER_MEMORY_TOLERANCE):
            return {**out, "predicted_mem_gib": least["mem_gib"], **mem_cols(least),
                    "status": least["status"]}
        # over the full HBM, but within the memory model's own error: time the layout that
        # needs the least memory as if it fit (over_memory_point), and say so
        status = f"ok (over memory: {least['status'].removeprefix('out of memory: ')}, " \
                 f"within the memory model's {OVER_MEMORY_TOLERANCE:.0%}; timed as if it fit)"
        ok = over_memory_point(model, wl, hw, cols, int(least.name), least["mem_gib"] * GIB)
        within = False
    best = ok.nsmallest(1, "step_time_s").iloc[0]
    res = {"predicted_iter_time_s": best["step_time_s"], "predicted_mem_gib": best["mem_gib"],
           "predicted_mfu": best["mfu"], **mem_cols(best), "mem_within_margin": within,
           "model_arch": arch, "status": status}
    for f in ("tp", "pp", "dp", "cp", "ep", "mbs", "vpp", "recompute", "zero", "sp"):
        res[f"chosen_{f}"] = best[f]
    # what selective recompute re-ran (blank for the other settings, which ignore the list)
    res["chosen_recompute_modules"] = (recompute_modules_names(wl.recompute_modules)
                                       if best["recompute"] == "selective" else "")
    return res


#: How far over the HBM a row's least-memory layout may be and still be timed (status
#: ``ok (over memory: ...)``): the memory model's own error, the issue's memory bound of
#: 10 % (calibration: 5.7 % mean, 8.2 % max on the measured peaks, docs/accuracy.md).  A
#: published run the model puts a few percent over capacity did run; one far over is a
#: layout that cannot, and gets no time.
OVER_MEMORY_TOLERANCE = 0.10


def over_memory_point(model: Model, wl, hw, cols: dict, index: int, need_bytes: float) -> pd.DataFrame:
    """The sweep row of layout ``cols[...][index]`` costed on ``hw`` with its HBM raised to
    the layout's own need ``need_bytes`` (its memory on ``hw``, as the caller's sweep found
    it), so that the memory mask passes it: a published run the memory
    model calls over capacity (by a few percent, typically) still gets its time.  HBM
    capacity enters the cost model only through block recompute, which picks the fewest
    layers that fit (:mod:`dse.sweep.run`); at exactly the need it keeps the layers the
    least-memory point had.  One row, its ``mem_gib`` the need."""
    one = {k: v[index:index + 1] for k, v in cols.items()}
    roomy = dataclasses.replace(hw, hbm_bytes=float(need_bytes) * (1.0 + 1e-6))
    row = to_dataframe(sweep_points(model, wl, [roomy], one))
    return row[row["feasible"]]


def predict_frame(df: pd.DataFrame, where: str, mem_margin: float = PREDICT_MEM_MARGIN,
                  intervals: bool = True) -> pd.DataFrame:
    """Every row predicted; a row that breaks a rule of the schema gets the status
    ``invalid: <column>: <rule>`` (and no prediction), the other rows are unaffected.
    A frame with a ``scenario`` column is in the inference schema
    (:mod:`dse.infer.predict_rows`)."""
    if "scenario" in df.columns:
        from dse.infer.predict_rows import predict_inference_frame
        return predict_inference_frame(df, where, mem_margin, intervals)
    rows = []
    for i, (label, row) in enumerate(zip(df.index, df.to_dict("records"))):
        bad = na_word_status(df, label)
        if bad:
            rows.append({"predicted_iter_time_s": np.nan, "predicted_mem_gib": np.nan,
                         "predicted_mfu": np.nan, "status": bad})
            continue
        try:
            rows.append(predict_row(row, f"{where}: row {i + 2} (id {row.get('id', '?')})", mem_margin))
        except InputError as e:
            rows.append({"predicted_iter_time_s": np.nan, "predicted_mem_gib": np.nan,
                         "predicted_mfu": np.nan, "status": f"invalid: {e.field}: {e.rule}"})
    out = pd.concat([df.reset_index(drop=True), pd.DataFrame(rows)], axis=1)
    if intervals:
        from dse.intervals import add_training_band
        out = add_training_band(out)
    return out


def read_table(path: str, what: str = "CSV") -> pd.DataFrame:
    """A CSV file as text columns' frame, or one :class:`InputError` naming the file: it
    must be a readable UTF-8 file (dse.io.read_text: not a directory, not binary), parse
    as CSV, hold a header of distinct, non-blank names and at least one row, and every
    row must have as many fields as the header (pandas would otherwise shift a long row
    into the index or pad a short one silently)."""
    import csv
    import io

    from dse.io import read_text
    require(str(path).strip() != "", repr(str(path)), "file", f"must be a {what} file path, but got an "
            "empty string")
    text = read_text(path)
    require("\x00" not in text, path, "csv", f"must be a {what} text file, but it holds NUL bytes "
            "(a binary file?)")
    try:
        recs = [r for r in csv.reader(io.StringIO(text)) if r]
    except csv.Error as e:
        raise InputError(path, "csv", f"must be a readable {what} ({' '.join(str(e).split())})") from None
    require(bool(recs), path, "csv", f"must be a readable {what} with a header line, but the file is empty")
    header = [h.strip() for h in recs[0]]
    seen: set[str] = set()
    for h in header:
        require(h not in seen, path, h or "header", "column is given twice: give each column once")
        seen.add(h)
    require(len(recs) > 1, path, "rows", "must hold at least one row below the header")
    for i, r in enumerate(recs[1:]):
        require(len(r) == len(header), path, f"line {i + 2}",
                f"must have {len(header)} fields like the header, but has {len(r)}")
    try:
        df = pd.read_csv(io.StringIO(text), skipinitialspace=False)
    except Exception as e:  # pandas raises many types for malformed CSV
        raise InputError(path, "csv", f"must be a readable {what} ({type(e).__name__})") from None
    df.columns = [str(c).strip() for c in df.columns]
    df.attrs[NA_CELLS] = na_word_cells(recs[0], recs[1:])
    return df


# the inference schema's optional columns (../shared/validation/inference/README.md and
# the ones dse.infer.predict_rows reads): a near-miss of one of them is an error too
INFERENCE_KNOWN = {"source_id", "source_url_or_repo_path", "hardware_as_written", "tp", "pp",
                   "ep", "replicas", "precision", "precision_as_written", "engine",
                   "batch_or_concurrency", "input_len", "output_len", "request_rate", "dataset",
                   "latency_stat", "notes", "kv_precision", "attn_dp", "disagg", "prefill_tp",
                   "decode_tp", "power_w", "measured_output_tok_s",
                   "measured_output_tok_s_per_gpu", "measured_ttft_ms", "measured_tpot_ms",
                   "measured_e2e_latency_ms"}


def _unique_ids(df: pd.DataFrame, path: str) -> None:
    """Row ids must be distinct (the error tables key rows by id): the first repeat is named."""
    ids = df["id"][~df["id"].map(blank_cell)].astype(str).str.strip()
    dup = ids[ids.duplicated()]
    if len(dup):
        first = dup.iloc[0]
        raise InputError(path, "id", "must be distinct per row (errors are keyed by id), but "
                         f"{first!r} is given {int((ids == first).sum())} times")


def _near_misses(df: pd.DataFrame, path: str, known: set) -> None:
    for c in df.columns:
        near = difflib.get_close_matches(str(c), sorted(known), n=1, cutoff=0.85)
        require(c in known or not near, path, str(c),
                f"unknown column, close to {near[0]!r}: rename it (extra columns must not be "
                "near-misses of schema columns)" if near else "")


def _unnamed_models(df: pd.DataFrame) -> str:
    """The first row whose ``model`` names no catalog model (``"row N (id X)"``; every
    row without a ``model`` column), or "" when every row names one."""
    for i, row in enumerate(df.to_dict("records")):
        if catalog_name_of(row.get("model")) is None:
            return f"row {i + 2} (id {row.get('id', '?')})"
    return ""


def read_csv(path: str) -> pd.DataFrame:
    """The file as a frame of either schema: the required columns present, no column a
    near-miss of a schema column's name, row ids distinct (:class:`InputError` otherwise)."""
    df = read_table(path)
    if "scenario" in df.columns:     # the inference schema (../shared/validation/inference/)
        from dse.infer.predict_rows import REQUIRED_INFERENCE
        for c in REQUIRED_INFERENCE:
            require(c in df.columns, path, c, "column is required by the inference schema")
        _near_misses(df, path, INFERENCE_KNOWN | set(REQUIRED_INFERENCE))
        _unique_ids(df, path)
        return df
    unnamed = _unnamed_models(df) if not set(ARCH_REQUIRED) <= set(df.columns) else ""
    for c in REQUIRED:
        require(c in df.columns or (c in ARCH_REQUIRED and not unnamed), path, c,
                "column is required by the validation schema" + (
                    f" (or every row's `model` must name a catalog model, but {unnamed} does not)"
                    if c in ARCH_REQUIRED else ""))
    known = KNOWN_COLS | set(REQUIRED) | set(LAYOUT_COLS) | set(ARCH_COLS)
    _unique_ids(df, path)
    for c in df.columns:
        near = difflib.get_close_matches(str(c), sorted(known), n=1, cutoff=0.85)
        require(c in known or not near, path, str(c),
                f"unknown column, close to {near[0]!r}: rename it (extra columns must not be "
                "near-misses of schema columns)" if near else "")
    return df


def positive_measure(col: pd.Series) -> pd.Series:
    """Mask of the values of a measured column that are finite numbers > 0."""
    v = pd.to_numeric(col, errors="coerce").astype(float)
    return pd.Series(np.isfinite(v) & (v > 0), index=col.index)


def unusable_measures(frame: pd.DataFrame, col: str) -> list[tuple]:
    """``(row id, raw value)`` of the cells of measured column ``col`` that are given (not
    blank) but not a finite number > 0, in row order; [] when the column is absent.  Read
    before the column is coerced to numbers, which would turn them into blanks."""
    if col not in frame.columns:
        return []
    raw = frame[col]
    given = raw.notna() & (raw.astype(str).str.strip() != "")
    ids = frame["id"] if "id" in frame.columns else pd.Series(frame.index, index=frame.index)
    return [(ids[i], raw[i].item() if hasattr(raw[i], "item") else raw[i])
            for i in frame.index[given & ~positive_measure(raw)]]


def mape_table(pred: pd.DataFrame) -> pd.DataFrame:
    """Per-source and overall MAPE, signed bias (mean of (predicted - measured) /
    measured: > 0 predicts slow) and max error of iteration time: rows with a prediction (status ok)
    and a measured time that is a finite number > 0 (others are excluded, never inf%)."""
    d = pred[has_prediction(pred["status"]) & positive_measure(pred["measured_iter_time_s"])].copy()
    m = d["measured_iter_time_s"].astype(float)
    d["err"] = (d["predicted_iter_time_s"].astype(float) - m) / m
    d["ape"] = d["err"].abs()
    g = d.groupby("source").agg(rows=("ape", "count"), mape=("ape", "mean"), bias=("err", "mean"),
                                max_err=("ape", "max"))
    g.loc["overall"] = [len(d), d["ape"].mean(), d["err"].mean(), d["ape"].max()]
    g["rows"] = g["rows"].astype(int)
    return g
