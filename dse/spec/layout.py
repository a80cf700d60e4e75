"""Parallel layout and workload: the per-point integers of a sweep.

Both are pytrees whose every field is a leaf, so a sweep vmaps over arrays of them.

Layout fields (Megatron-LM names): ``tp`` tensor, ``pp`` pipeline, ``dp`` data, ``cp``
context, ``ep`` expert parallel degree; ``mbs`` micro-batch size (sequences); ``vpp``
virtual pipeline stages per rank (1 = plain 1F1B); ``recompute`` 0 none, 1 selective,
2 full, 3 block (Megatron's ``--recompute-method block``: full recompute of only as many of
each rank's layers as it takes to fit in HBM, at least one); ``zero`` 0 (DDP), 1 (distributed optimizer), 2 (+ gradients), 3 (+ parameters,
FSDP); ``sp`` sequence parallelism 0/1.

Workload: ``global_batch`` sequences per step, ``seq_len`` tokens per sequence,
``precision`` 0 = fp32 (tf32 tensor cores), 1 = bf16/fp16, 2 = fp8 (Transformer Engine);
``attention`` 1 = FlashAttention (fused, the default of every current framework) with the
kernel the framework runs on that GPU (:mod:`dse.cost.attention_kernel`), 2 = a
FlashAttention-2-class kernel (``fa2``), 3 = the architecture's native fused kernel
(``cudnn`` / ``fa3``: cuDNN fused SDPA or FlashAttention-3 on Hopper), where a run states
it; 0 = the unfused path of Megatron-LM before 2022 (materialised scores, fused softmax);
``framework`` 0 = Megatron-LM / Megatron-Core / NeMo (the default), 1 = DeepSpeed
(Megatron-DeepSpeed's pipeline engine and ZeRO/bf16 optimizers), 2 = PyTorch FSDP1
(llm-foundry / Composer), 3 = PyTorch FSDP2 (torchtitan): it changes how model states are
held in memory, how pipeline activations are sent and how ZeRO-3 gathers and reduces
(:mod:`dse.spec.frameworks`, :mod:`dse.train.memory`, :mod:`dse.train.zero3`).  ``framework`` is a static
field (each value compiles its own cost function), as are ``tp_overlap`` and
``moe_a2a_overlap`` (each switches a costed path on); ``attention``, ``cuda_graphs``,
``moe_dispatcher`` and ``moe_drop_pad`` are leaves (a ``jnp.where`` between values), so one
compiled step serves every setting of them (the calibration's unfused and flash rows, the
recipe columns of ``dse predict``).  ``tp_overlap`` 1 = Megatron-Core's ``--tp-comm-overlap``
(Transformer Engine userbuffers: TP collectives pipelined with the GEMMs that consume or
produce them; needs sequence parallelism), 0 = TP collectives on the critical path
(Megatron-LM's default).  ``moe_a2a_overlap`` 1 = the run uses Megatron-Core's 1F1B
expert-parallel all-to-all overlap (``overlap_moe_expert_parallel_comm`` with
``delay_wgrad_compute``; Megatron-Bridge recipes' ``moe_a2a_overlap=True``,
:mod:`dse.train.moe_overlap`), 0 = the framework profile's default
(:func:`dse.spec.frameworks.moe_a2a_overlap`).  ``cuda_graphs`` 1 = the whole training
iteration is captured and replayed as one CUDA graph (Megatron-Core
``cuda_graph_impl="full_iteration"``, ``megatron/core/full_cuda_graph.py``
``FullCudaGraphWrapper``): no per-kernel host launch, so no host-bound floor
(:func:`dse.train.layer.reduce_layer`); 0 = eager launches (partial, per-module graphs
are not represented).  ``moe_dispatcher`` 0 = Megatron-Core's ``alltoall`` token
dispatcher (NCCL all-to-all: every routed copy of a token sent), 1 = the ``flex``
dispatcher with a DeepEP or HybridEP backend (``moe_flex_dispatcher_backend``): each
token crosses to a remote node once and is forwarded over NVLink there
(:func:`dse.cost.collectives.node_dedup_cross_bytes`).  ``moe_drop_pad`` 1 = token
dropping with the expert inputs padded to capacity (``moe_expert_capacity_factor`` set
with ``moe_pad_expert_input_to_capacity``: every expert computes exactly its capacity),
0 = dropless (Megatron-Core's default: the busiest EP rank sets the pace,
:func:`dse.graph.moe.ep_busiest_factor`).  ``recompute_modules`` (a leaf) is the bit set of
Megatron-Core's ``recompute_modules`` that selective recompute (``recompute`` 1) re-runs
(:data:`RECOMPUTE_MODULES`; default ``core_attn`` alone, Megatron-Core's default
``["core_attn"]``); other recompute settings ignore it, as Megatron-Core does.
``grad_reduce_fp32`` (a leaf) is Megatron-Core's ``grad_reduce_in_fp32`` as a run states it:
1 = fp32 main gradients and reduce, 0 = the 16-bit ones (every Megatron-Bridge / NeMo
performance recipe, bf16 or fp8: Megatron-Bridge ``perf_recipes/_common.py``
``_benchmark_common``), -1 = the framework profile's default
(:func:`dse.graph.train.main_grad_bytes`); fp32 training keeps fp32 gradients either way.
``fp8_attention`` (a leaf) 1 = the fused attention runs in FP8 (Transformer Engine's
``fp8_dpa``, Megatron-Core / Megatron-Bridge ``fp8_dot_product_attention``: cuDNN's FP8
scaled-dot-product attention, forward and backward), only inside an FP8 recipe (precision
fp8 or mxfp8; :func:`recipe_codes` refuses it otherwise); 0 = 16-bit attention (the default
of every recipe that does not state it; :class:`dse.graph.ops.Attention`'s ``fp8``).
``ddp_bucket_elems`` (a leaf) is the data-parallel gradient bucket in parameters a run
states (Megatron-Core ``--ddp-bucket-size``, DeepSpeed ``reduce_bucket_size``); 0 = the
framework's default rule (:func:`dse.graph.train.ddp_bucket_elems`).
"""

from __future__ import annotations

import math
import re

from dse.errors import InputError
from dse.spec.pytree import pytree_dataclass

# Enumerations: the named constants the cost code compares against (never bare integers)
RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL, RECOMPUTE_BLOCK = 0, 1, 2, 3
PRECISION_FP32, PRECISION_16, PRECISION_FP8 = 0, 1, 2
ATTENTION_UNFUSED, ATTENTION_FLASH, ATTENTION_FA2, ATTENTION_NATIVE = 0, 1, 2, 3
FRAMEWORK_MEGATRON, FRAMEWORK_DEEPSPEED, FRAMEWORK_FSDP, FRAMEWORK_FSDP2 = 0, 1, 2, 3

RECOMPUTE = {"none": 0, "selective": 1, "full": 2, "block": 3}
RECOMPUTE_NAMES = {v: k for k, v in RECOMPUTE.items()}
# Megatron-Core ``TransformerConfig.recompute_modules`` (selective granularity only), one
# bit each (megatron/core/transformer/transformer_config.py docstring): core_attn the
# attention core; mla_up_proj the MLA up projections, their lora norms and RoPE
# (multi_latent_attention.py ``recompute_up_proj``); layernorm the separate input and
# pre-MLP norms; moe_act the routed experts' activation; mlp the dense MLP (not a MoE
# layer); shared_experts the shared experts.  ``moe`` (the whole MoE layer, its
# all-to-alls included) is not modelled and refused by name (recompute_modules_code).
RECOMPUTE_MODULES = {"core_attn": 1, "mla_up_proj": 2, "layernorm": 4, "moe_act": 8, "mlp": 16,
                     "shared_experts": 32}
RECOMPUTE_MODULES_DEFAULT = RECOMPUTE_MODULES["core_attn"]
# ``auto`` (a search setting, ``dse sweep``): every list of the modules the model has,
# each sweep's selective layouts beside the others (dse.sweep.run.module_candidates)
RECOMPUTE_MODULES_AUTO = -1
# nvfp4 (= fp4) training: Transformer Engine's NVFP4BlockScaling recipe on Blackwell
# (dse.cost.rates.quant_cast_bytes has its sources); code 3 is serving's NVFP4 too
# mxfp8 (= fp8-mx, Megatron-Bridge's "FP8-MX"): Transformer Engine's MXFP8BlockScaling
# recipe (e4m3 with one e8m0 scale per 32 elements; dse.cost.rates has its costs), training
# only, on GPUs with block-scaled tensor cores
PRECISION = {"fp32": 0, "tf32": 0, "bf16": 1, "fp16": 1, "fp8": 2, "nvfp4": 3, "fp4": 3,
             "mxfp8": 5, "fp8-mx": 5}
PRECISION_NAMES = {0: "fp32", 1: "bf16", 2: "fp8", 3: "nvfp4", 5: "mxfp8"}
# Serving also runs 4-bit block-scaled weights and activations (Blackwell / CDNA4 fp4
# tensor cores): NVFP4 = e2m1 with one e4m3 scale per 16 elements (NVIDIA, "Introducing
# NVFP4", 2025; TensorRT-LLM / ModelOpt NVFP4), MXFP4 = e2m1 with one e8m0 scale per 32
# (OCP Microscaling Formats v1.0, 2023).  ``fp4`` names the hardware's native format
# (:func:`dse.infer.predict_rows`: NVFP4 on NVIDIA, MXFP4 on AMD).  Training runs NVFP4 only.
PRECISION_NVFP4, PRECISION_MXFP4, PRECISION_MXFP8 = 3, 4, 5
# (serving reads "fp4" as the hardware's native format, dse.infer.predict_rows: not an alias here)
# (mxfp8 is a training recipe only)
SERVING_PRECISION = {**{k: v for k, v in PRECISION.items() if k != "fp4" and v != PRECISION_MXFP8},
                     "nvfp4": 3, "mxfp4": 4}
SERVING_PRECISION_NAMES = {**{k: v for k, v in PRECISION_NAMES.items() if k != PRECISION_MXFP8},
                           3: "nvfp4", 4: "mxfp4"}

FP8_RECIPES = (2, 5)        # the training precisions that are FP8 recipes (fp8_attention)


def fp8_recipe(precision):
    """Whether ``precision`` (a code, or an array of codes) is an FP8 recipe (:data:`FP8_RECIPES`)."""
    return (precision == FP8_RECIPES[0]) | (precision == FP8_RECIPES[1])


@pytree_dataclass
class Layout:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    mbs: int = 1
    vpp: int = 1
    recompute: int = 0
    zero: int = 1          # the CLI's default: distributed optimizer (Megatron-Core, NeMo)
    sp: int = 0

    @property
    def gpus(self):
        return self.tp * self.pp * self.dp * self.cp


@pytree_dataclass(static=("framework", "tp_overlap", "moe_a2a_overlap"))
class Workload:
    global_batch: int
    seq_len: int
    precision: int = 1
    attention: int = 1
    framework: int = 0
    tp_overlap: int = 0
    moe_a2a_overlap: int = 0
    cuda_graphs: int = 0
    moe_dispatcher: int = 0
    moe_drop_pad: int = 0
    recompute_modules: int = RECOMPUTE_MODULES_DEFAULT
    grad_reduce_fp32: int = -1
    fp8_attention: int = 0
    ddp_bucket_elems: int = 0


# flash: the framework's kernel on the GPU (dse.cost.attention_kernel); fa2 / fa3 / cudnn:
# the kernel a run states (fa3 and cudnn: the same native-kernel efficiency)
ATTENTION = {"flash": 1, "unfused": 0, "fa2": 2, "fa3": 3, "cudnn": 3}
ATTENTION_NAMES = {0: "unfused", 1: "flash", 2: "fa2", 3: "cudnn"}
# fsdp = PyTorch FSDP1 (llm-foundry / Composer, FullyShardedDataParallel); fsdp2 =
# fully_shard (torchtitan); profiles in dse.spec.frameworks.  Besides the four profile
# names, the names the calibration file's ``framework`` column groups under them
# (issue 11: "megatron = Megatron-LM / NeMo / Megatron-Bridge; deepspeed = Megatron-DeepSpeed
# and DeepSpeed ZeRO; fsdp = PyTorch FSDP, llm-foundry, torchtitan")
FRAMEWORK = {"megatron": 0, "megatron-lm": 0, "megatron-core": 0, "nemo": 0, "megatron-bridge": 0,
             "deepspeed": 1, "megatron-deepspeed": 1,
             "fsdp": 2, "fsdp1": 2, "pytorch-fsdp": 2, "llm-foundry": 2, "composer": 2,
             "fsdp2": 3, "torchtitan": 3}
FRAMEWORK_NAMES = {0: "megatron", 1: "deepspeed", 2: "fsdp", 3: "fsdp2"}


def canonical_framework(name: str) -> str:
    """The profile name (``FRAMEWORK_NAMES``) a framework name in :data:`FRAMEWORK` stands
    for (``nemo`` -> ``megatron``, ``torchtitan`` -> ``fsdp2``); an unknown name unchanged."""
    key = str(name).strip().lower()
    return FRAMEWORK_NAMES[FRAMEWORK[key]] if key in FRAMEWORK else key


# the training recipe switches of Workload (module docstring), by the names runs state them
CUDA_GRAPHS = {"none": 0, "full_iteration": 1}
MOE_DISPATCHERS = {"alltoall": 0, "deepep": 1, "hybridep": 1}


def _code(table: dict[str, int], field: str, name: str, where: str) -> int:
    if name not in table:
        raise InputError(where, field, f"must be one of {sorted(table)}, but got {name!r}")
    return table[name]


def precision_code(name: str, where: str = "--precision") -> int:
    return _code(PRECISION, "precision", name, where)


def serving_precision_code(name: str, where: str = "--precision") -> int:
    """Serving precisions: training's plus ``nvfp4`` / ``mxfp4`` (``fp4`` = ``nvfp4``)."""
    return _code({**SERVING_PRECISION, "fp4": 3}, "precision", name, where)


def recompute_code(name: str, where: str = "--recompute") -> int:
    return _code(RECOMPUTE, "recompute", name, where)


def recompute_modules_code(names, where: str = "--recompute-modules", allow_auto: bool = False) -> int:
    """The bit set (:data:`RECOMPUTE_MODULES`) of a module list as runs state it: a
    sequence of names, or one string of names separated by commas, spaces or ``+``, in
    square brackets or not (``[mla_up_proj, mlp]``); ``none`` or ``[]`` is the empty list
    (selective recompute of nothing); ``auto`` (:data:`RECOMPUTE_MODULES_AUTO`) where the
    caller searches the lists (``allow_auto``).  InputError naming ``where`` on an unknown
    or repeated name, or on ``auto`` elsewhere."""
    if isinstance(names, str) and names.strip().lower() == "auto":
        if not allow_auto:
            raise InputError(where, "recompute_modules", "'auto' is a search setting (dse sweep); "
                             "state the modules of this run, e.g. mla_up_proj,mlp")
        return RECOMPUTE_MODULES_AUTO
    if isinstance(names, str):
        bare = names.strip()
        if bare.replace(" ", "") == "[]":
            return 0
        text = bare.strip("[]").replace("'", " ").replace('"', " ")
        parts = [p for p in re.split(r"[,\s+]+", text) if p]
    else:
        parts = [str(p).strip() for p in names]
    if not parts:
        raise InputError(where, "recompute_modules", f"must name modules or none, but got {names!r}")
    if [p.lower() for p in parts] == ["none"]:
        return 0
    code = 0
    for p in parts:
        key = p.lower()
        if key == "moe":
            raise InputError(where, "recompute_modules", "'moe' (the whole MoE layer, its all-to-alls "
                             "included) is not modelled; state moe_act and/or shared_experts")
        if key not in RECOMPUTE_MODULES:
            raise InputError(where, "recompute_modules",
                             f"must be module names from {sorted(RECOMPUTE_MODULES)} or none, but got {p!r}")
        if code & RECOMPUTE_MODULES[key]:
            raise InputError(where, "recompute_modules", f"names {p!r} twice")
        code |= RECOMPUTE_MODULES[key]
    return code


def recompute_modules_names(code: int) -> str:
    """The inverse of :func:`recompute_modules_code`: ``core_attn+mla_up_proj``, ``none``."""
    names = [k for k, v in RECOMPUTE_MODULES.items() if int(code) & v]
    return "+".join(names) if names else "none"


def attention_code(name: str, where: str = "--attention") -> int:
    return _code(ATTENTION, "attention", name, where)


def framework_code(name: str, where: str = "--framework") -> int:
    return _code(FRAMEWORK, "framework", name, where)


def grad_reduce_code(value, where: str = "--grad-reduce-in-fp32") -> int:
    """``Workload.grad_reduce_fp32`` from a stated ``grad_reduce_in_fp32``: True / ``true`` 1,
    False / ``false`` 0, None / ``default`` -1 (the framework's default)."""
    if isinstance(value, bool):
        return int(value)
    word = value.strip().lower() if isinstance(value, str) else value
    if word is None or word in ("", "default"):
        return -1
    if word in ("true", "false"):
        return int(word == "true")
    raise InputError(where, "grad_reduce_in_fp32", f"must be true, false or default, but got {value!r}")


def fp8_attention_code(value, precision, where: str = "--fp8-attention") -> int:
    """``Workload.fp8_attention`` from a stated ``fp8_dot_product_attention`` (True / False;
    None = off), refused unless ``precision`` (a :data:`PRECISION` code, or None = not
    known here) is an FP8 recipe: Transformer Engine runs FP8 attention only under one
    (``fp8_dpa`` is a field of its FP8 recipes)."""
    if value is None:
        return 0
    if not isinstance(value, (bool, int)) or value not in (0, 1):
        raise InputError(where, "fp8_attention", f"must be true or false, but got {value!r}")
    if value and precision is not None and int(precision) not in FP8_RECIPES:
        raise InputError(where, "fp8_attention", "needs precision fp8 or mxfp8 (Transformer Engine "
                         f"runs FP8 attention inside an FP8 recipe), but got precision "
                         f"{PRECISION_NAMES.get(int(precision), precision)!r}")
    return int(bool(value))


MAX_DDP_BUCKET_ELEMS = 10 ** 13


def ddp_bucket_code(value, where: str = "--ddp-bucket-size") -> int:
    """``Workload.ddp_bucket_elems`` from a stated data-parallel bucket size in parameters
    (Megatron-Core ``--ddp-bucket-size``, DeepSpeed ``reduce_bucket_size``): None / blank
    = 0, the framework's default rule (:func:`dse.graph.train.ddp_bucket_elems`); else a
    whole number in ``[1, 1e13]`` (InputError naming ``where`` otherwise)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return 0
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = float("nan")
    if isinstance(value, bool) or not (math.isfinite(x) and 1 <= x <= MAX_DDP_BUCKET_ELEMS and x == int(x)):
        raise InputError(where, "ddp_bucket_size", "must be a whole number of parameters in "
                         f"[1, {MAX_DDP_BUCKET_ELEMS:.0e}] or blank, but got {value!r}")
    return int(x)


def recipe_codes(moe_a2a_overlap: bool = False, cuda_graphs: str = "none",
                 moe_dispatcher: str = "alltoall", where: str = "--",
                 recompute_modules="core_attn", allow_auto: bool = False,
                 grad_reduce_in_fp32=None, fp8_attention=None, precision=None,
                 ddp_bucket_size=None) -> dict[str, int]:
    """The recipe switches of :class:`Workload` (``moe_a2a_overlap``, ``cuda_graphs``,
    ``moe_dispatcher``, ``recompute_modules``, ``grad_reduce_fp32``, ``fp8_attention``;
    module docstring) from their stated names, as keyword arguments (InputError naming
    ``where`` + the field on an unknown name; ``allow_auto``: :func:`recompute_modules_code`;
    ``precision``: the run's code, which ``fp8_attention`` needs to be an FP8 recipe)."""
    if not isinstance(moe_a2a_overlap, (bool, int)) or moe_a2a_overlap not in (0, 1):
        raise InputError(where, "moe_a2a_overlap", f"must be true or false, but got {moe_a2a_overlap!r}")
    return {"fp8_attention": fp8_attention_code(fp8_attention, precision, where),
            "moe_a2a_overlap": int(bool(moe_a2a_overlap)),
            "cuda_graphs": _code(CUDA_GRAPHS, "cuda_graphs", str(cuda_graphs), where),
            "moe_dispatcher": _code(MOE_DISPATCHERS, "moe_dispatcher", str(moe_dispatcher), where),
            "recompute_modules": recompute_modules_code(recompute_modules, where, allow_auto),
            "grad_reduce_fp32": grad_reduce_code(grad_reduce_in_fp32, where),
            "ddp_bucket_elems": ddp_bucket_code(ddp_bucket_size, where)}
