"""Command-line flags and helpers shared by subcommands (one explicit layout for
`estimate`, `trace`, `sensitivity`; --vary hardware axes; energy/cost flags; bounded
integers): a module of its own so the subcommands' modules need not import `dse.cli`
(no import cycle)."""

from __future__ import annotations

import argparse

from dse.errors import InputError


INT_MAX = 2**31 - 1       # integer flags stay in the range every array type holds exactly
GPUS_MAX = 2**20          # the largest job the layout enumeration takes (1,048,576 GPUs)
#: tokens per sequence when ``--seq`` (API: ``seq_len``) is not given: an explicit default,
#: stated in the help and in every command's assumption line -- never a model config's
#: ``max_position_embeddings`` (131,072 for Qwen2-72B would silently make a 2,400 s step)
DEFAULT_SEQ = 4096
SEQ_HELP = ("tokens per sequence (an explicit default, stated in the `assumed:` line; a model config's "
            "max_position_embeddings is never used)")


def _positive_int(s: str, hi: int = INT_MAX) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, but got {s!r}") from None
    if v <= 0 or v > hi:
        raise argparse.ArgumentTypeError(f"must be a positive integer <= {hi}, but got {s!r}")
    return v


def _gpu_count(s: str) -> int:
    """A GPU count: ``1 <= gpus <= 2^20``."""
    return _positive_int(s, GPUS_MAX)


def _zero_stage(s: str) -> int:
    """A ZeRO stage: 0, 1, 2 or 3 (an integer flag: never converted past C long)."""
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a ZeRO stage 0, 1, 2 or 3, but got {s!r}") from None
    if v not in (0, 1, 2, 3):
        raise argparse.ArgumentTypeError(f"must be a ZeRO stage 0, 1, 2 or 3, but got {s!r}")
    return v


def _tcp_port(s: str) -> int:
    v = _positive_int(s)
    if v > 65535:
        raise argparse.ArgumentTypeError(f"`1 <= port <= 65535` must hold, but got {s!r}")
    return v


class _SeqAction(argparse.Action):
    """Stores ``--seq`` and records that it was given (``a.seq_given``), so the assumption
    line can say "(default)" only when the value is :data:`DEFAULT_SEQ` by default."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.seq_given = True


def seq_arg(s: argparse.ArgumentParser) -> None:
    """``--seq`` with the explicit default :data:`DEFAULT_SEQ`."""
    s.add_argument("--seq", type=_positive_int, default=DEFAULT_SEQ, action=_SeqAction, help=SEQ_HELP)


def assumptions(model, seq: int, seq_given: bool, global_batch, precision: str, framework: str) -> str:
    """The one line every command prints first: what it assumed."""
    gb = global_batch if isinstance(global_batch, (int, str)) else ", ".join(map(str, global_batch))
    return (f"assumed: model {model.name} ({model.num_params() / 1e9:.2f} B params), "
            f"seq length {seq}{'' if seq_given else ' (default)'}, global batch {gb}, "
            f"precision {precision}, framework {framework}")


def print_assumptions(a, model) -> None:
    """The assumption line, wrapped at ``--columns`` (120) like the tables."""
    import textwrap
    line = assumptions(model, a.seq, getattr(a, "seq_given", False), a.global_batch, a.precision,
                       a.framework)
    print("\n".join(textwrap.wrap(line, width=getattr(a, "columns", 120), subsequent_indent="  ",
                                   break_on_hyphens=False)))


def training_flags(s: argparse.ArgumentParser) -> None:
    """How a training run is made: --precision, --attention, --framework, --tp-overlap
    (shared by `sweep`, `estimate`, `trace`, `compare`; :func:`training_workload` reads
    them)."""
    s.add_argument("--precision", default="bf16", help="fp32 | tf32 | bf16 | fp16 | fp8 | nvfp4 | mxfp8 (= fp8-mx; both Blackwell)")
    s.add_argument("--attention", default="flash", help="flash (the framework's kernel) | fa2 | fa3 | cudnn | unfused (pre-2022 Megatron)")
    s.add_argument("--framework", default="megatron", help="megatron | deepspeed | fsdp (FSDP1, "
                   "llm-foundry) | fsdp2 (torchtitan): memory accounting, pipeline sends, ZeRO-3 "
                   "gathers (dse/spec/frameworks.py)")
    s.add_argument("--tp-overlap", action="store_true",
                   help="TP comm/GEMM overlap (--tp-comm-overlap) on SP layouts")
    s.add_argument("--moe-a2a-overlap", action="store_true",
                   help="MoE: Megatron-Core's 1F1B expert-parallel all-to-all overlap "
                   "(overlap_moe_expert_parallel_comm + delay_wgrad_compute)")
    s.add_argument("--cuda-graphs", default="none",
                   help="none | full_iteration (Megatron-Core cuda_graph_impl: no host launch floor)")
    s.add_argument("--moe-dispatcher", default="alltoall",
                   help="alltoall | deepep | hybridep (flex dispatcher: each token sent once per "
                   "remote node)")
    s.add_argument("--recompute-modules", default="core_attn",
                   help="what selective recompute re-runs: Megatron-Core's recompute_modules, e.g. "
                   "mla_up_proj,mlp (core_attn | mla_up_proj | layernorm | moe_act | mlp | "
                   "shared_experts; none = nothing; dse sweep: auto = try every list the model has)")
    s.add_argument("--grad-reduce-in-fp32", default=None, metavar="true|false",
                   help="Megatron-Core's grad_reduce_in_fp32: fp32 (true) or 16-bit (false, every "
                   "Megatron-Bridge / NeMo performance recipe) main gradients; default: fp32 in bf16, "
                   "16-bit in fp8 (Megatron family)")
    s.add_argument("--ddp-bucket-size", default=None, metavar="PARAMS",
                   help="data-parallel gradient bucket in parameters (Megatron-Core "
                   "--ddp-bucket-size, DeepSpeed reduce_bucket_size); default: the framework's "
                   "rule (Megatron max(4e7, 1e6 x dp*cp), DeepSpeed 5e8)")
    s.add_argument("--fp8-attention", action="store_true",
                   help="the fused attention in FP8 (Transformer Engine fp8_dpa, Megatron "
                   "--fp8-dot-product-attention); needs --precision fp8 or mxfp8")


def recipe(a, allow_auto: bool = False) -> dict:
    """The recipe switches of :func:`training_flags` as Workload keyword codes (exit 2 on a
    bad name; ``allow_auto``: ``--recompute-modules auto``, a search over the lists)."""
    from dse.spec.layout import PRECISION, recipe_codes
    prec = PRECISION.get(str(getattr(a, "precision", "")).strip().lower())   # unknown: refused elsewhere
    return recipe_codes(bool(getattr(a, "moe_a2a_overlap", False)), getattr(a, "cuda_graphs", "none"),
                        getattr(a, "moe_dispatcher", "alltoall"), "command line",
                        getattr(a, "recompute_modules", "core_attn"), allow_auto,
                        getattr(a, "grad_reduce_in_fp32", None),
                        bool(getattr(a, "fp8_attention", False)), prec,
                        getattr(a, "ddp_bucket_size", None))


def training_workload(a, global_batch: int, seq: int):
    """The :class:`~dse.spec.layout.Workload` of :func:`training_flags` (exit 2 on a bad
    name)."""
    from dse.spec.layout import Workload, attention_code, framework_code, precision_code
    return Workload(global_batch=global_batch, seq_len=seq, precision=precision_code(a.precision),
                    attention=attention_code(a.attention), framework=framework_code(a.framework),
                    tp_overlap=int(a.tp_overlap), **recipe(a))


def layout_args(s: argparse.ArgumentParser) -> None:
    """Flags of one explicit layout (shared by `estimate` and `trace`)."""
    s.add_argument("--model", required=True, help="catalog name, config.json or .toml")
    s.add_argument("--hardware", required=True, help="catalog name or .toml file")
    s.add_argument("--gpus", required=True, type=_gpu_count, help="GPUs in the job")
    s.add_argument("--global-batch", type=_positive_int, default=1024, help="sequences per step")
    seq_arg(s)
    training_flags(s)
    helps = {"tp": "tensor-parallel size", "pp": "pipeline-parallel stages",
             "dp": "data-parallel size (default: gpus / (tp x pp x cp))",
             "cp": "context-parallel size", "ep": "expert-parallel size",
             "mbs": "micro-batch size (sequences)", "vpp": "virtual pipeline stages per rank"}
    for f in ("tp", "pp", "dp", "cp", "ep", "mbs", "vpp"):
        s.add_argument(f"--{f}", type=_positive_int, default=None if f == "dp" else 1, help=helps[f])
    s.add_argument("--recompute", default="none",
                   help="none | selective | full | block (full on the fewest layers that fit)")
    s.add_argument("--zero", type=_zero_stage, default=1, help="ZeRO stage (0-3)")
    s.add_argument("--sp", action="store_true", help="sequence parallelism")


def resolve_layout(a):
    """(model, hardware, workload, layout) from layout flags, validated (exit 2 if bad)."""
    from dse.spec.hardware import get_hardware
    from dse.spec.layout import Layout, precision_code, recompute_code
    from dse.spec.model import get_model
    from dse.sweep.grid import check_layout
    model = get_model(a.model)
    hw = get_hardware(a.hardware)
    seq = a.seq
    dp = a.dp or max(a.gpus // (a.tp * a.pp * a.cp), 1)
    lay = Layout(tp=a.tp, pp=a.pp, dp=dp, cp=a.cp, ep=a.ep, mbs=a.mbs, vpp=a.vpp,
                 recompute=recompute_code(a.recompute), zero=a.zero, sp=int(a.sp))
    wl = training_workload(a, a.global_batch, seq)
    check_layout(model, a.gpus, a.global_batch, seq, lay, where="command line",
                 framework=int(wl.framework))
    from dse.spec.hardware import check_precision
    check_precision(hw, precision_code(a.precision), "--precision")
    return model, hw, wl, lay


def vary_hardware(hws: list, specs: list[str]) -> list:
    """The Cartesian product of ``--vary KNOB=v1,v2,...`` over every base hardware: the
    knobs and value syntax of study-file variants (dse.spec.variants), e.g.
    ``--vary hbm_bw=1x,2x,4x --vary throttle=0,0.27``."""
    import itertools

    from dse.errors import require
    from dse.spec.variants import KNOBS, apply_overrides
    axes = []
    for spec in specs:
        knob, _, vals = spec.partition("=")
        require(knob in KNOBS or knob == "throttle", "--vary", knob or spec,
                f"must be KNOB=v1,v2,... with KNOB one of {sorted(set(KNOBS) | {'throttle'})}")
        parsed = [float(v) if knob == "throttle" and v.replace(".", "", 1).isdigit() else v
                  for v in vals.split(",") if v]
        require(bool(parsed), "--vary", knob, "needs at least one value")
        require(knob not in [ax[0][0] for ax in axes], "--vary", knob,
                "is given twice; give each knob once with all its values (KNOB=v1,v2,...)")
        axes.append([(knob, v) for v in parsed])
    out = []
    for base in hws:
        for combo in itertools.product(*axes):
            if not combo:
                out.append(base)
                continue
            over = dict(combo)
            name = base.name + "[" + ",".join(f"{k}={v}" for k, v in combo) + "]"
            out.append(apply_overrides(base, over, "--vary", "vary").replace(name=name))
    return out


def per_variant(prices, names: list[str], hws: list) -> list | None:
    """One price per --hardware name repeated over its --vary variants (vary_hardware keeps
    each base's variants together)."""
    if prices is None or len(prices) != len(names) or len(names) == len(hws):
        return prices
    return [p for p in prices for _ in range(len(hws) // len(names))]


def least_memory(df) -> str:
    """Why nothing fits: the smallest memory need of any layout, and that layout."""
    if df.empty:
        return "no valid layout"
    r = df.loc[df["mem_gib"].idxmin()]
    st = str(r.get("status", ""))
    prefix = "out of memory: needs "
    # the sweep's own status says what the need exceeds: the HBM, or the usable share
    # left by --mem-margin (dse.sweep.run.oom_status)
    need = (st[len(prefix):] if st.startswith(prefix)
            else f"{r['mem_gib']:.1f} GiB > {r['hbm_gib']:.1f} GiB HBM")
    return (f"the smallest memory need is {need}, at "
            f"TP{r['tp']} PP{r['pp']} DP{r['dp']} CP{r['cp']} EP{r['ep']} mbs{r['mbs']} vpp{r['vpp']} "
            f"{r['recompute']} ZeRO-{r['zero']}{' SP' if r['sp'] else ''} on {r['hardware']}")


def _bounded_float(s: str, lo: float, hi: float, lo_open: bool, what: str) -> float:
    try:
        v = float(s)
    except ValueError:
        v = float("nan")
    ok = (lo < v if lo_open else lo <= v) and v <= hi          # False for nan
    if not ok:
        rule = f"`{lo:g} {'<' if lo_open else '<='} {what} <= {hi:g}` must hold"
        raise argparse.ArgumentTypeError(f"{rule}, but got {s!r}")
    return v


def _positive_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, but got {s!r}") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, but got {s!r}")
    return v


#: Upper bounds of the energy / cost flags, far beyond any real value, so a typo (an
#: exponent too many) is bad input instead of a table of absurd figures: a GPU-hour at
#: most USD 1,000 (list prices are USD 1-15); PUE at most 3 (Uptime Institute surveys:
#: fleet averages 1.5-1.6, the worst sites ~2.5); a token budget at most 1e17 tokens
#: (about 3,000x the largest published pre-training runs, ~36T tokens).
MAX_GPU_HOUR_USD = 1000.0
MAX_PUE = 3.0
MAX_TRAIN_TOKENS = 1e17


def _gpu_hour_usd(s: str) -> float:
    return _bounded_float(s, 0.0, MAX_GPU_HOUR_USD, True, "USD per GPU-hour")


def _pue(s: str) -> float:
    return _bounded_float(s, 1.0, MAX_PUE, False, "pue")


def _train_tokens(s: str) -> str:
    """A token budget (``15T``, ``1e12``; dse.cost.energy.parse_tokens) of at least one
    token and at most :data:`MAX_TRAIN_TOKENS`."""
    from dse.cost.energy import parse_tokens
    try:
        v = parse_tokens(s)
    except InputError as e:
        raise argparse.ArgumentTypeError(e.rule) from None
    if not 1.0 <= v <= MAX_TRAIN_TOKENS:
        raise argparse.ArgumentTypeError(f"`1 <= tokens <= {MAX_TRAIN_TOKENS:g}` must hold, "
                                         f"but got {s!r}")
    return s


def energy_args(s: argparse.ArgumentParser) -> None:
    """Flags of the power / cost / time-to-train columns (dse.cost.energy)."""
    s.add_argument("--gpu-hour-usd", type=_gpu_hour_usd, nargs="+", default=None, metavar="USD",
                   help="price per GPU-hour: one, or one per --hardware (adds usd_per_mtok)")
    s.add_argument("--train-tokens", type=_train_tokens, default=None, metavar="N",
                   help="token budget, e.g. 15T or 1e12 (adds train_days, train_mwh, train_usd)")
    s.add_argument("--pue", type=_pue, default=1.0, help="facility power overhead (>= 1) on energy")


def _margin(s: str) -> float:
    from dse.train.memory_parts import check_margin
    try:
        return check_margin(s)
    except InputError as e:
        raise argparse.ArgumentTypeError(e.rule) from None


def margin_arg(s: argparse.ArgumentParser, what: str = "chosen layouts must fit in",
               measured: bool = False) -> None:
    """``--mem-margin`` (dse.train.memory_parts: why the default is 3 % for layouts the tool
    chooses, and 0 for a ``measured`` run's blank settings)."""
    from dse.train.memory_parts import MEM_MARGIN, PREDICT_MEM_MARGIN
    why = ("default 0: a measured run's blanks are what it ran; 0.03 plans with headroom"
           if measured else "allocator fragmentation varies run to run")
    s.add_argument("--mem-margin", type=_margin, default=PREDICT_MEM_MARGIN if measured else MEM_MARGIN,
                   metavar="FRAC", help=f"memory safety margin: {what} (1 - FRAC) x HBM ({why})")
