"""`dse` command line.  Bad input exits with status 2 and one line (dse.errors)."""

from __future__ import annotations

import argparse
import sys

from dse.cli_layout import (GPUS_MAX, _gpu_count, _positive_float, _positive_int, _tcp_port,  # noqa: F401 (re-exported)
                             energy_args, layout_args, least_memory, margin_arg, per_variant,
                             print_assumptions, recipe, resolve_layout, seq_arg, training_flags,
                             training_workload, vary_hardware)
from dse.errors import InputError
from dse.report.atomic import check_output_file, write_csv

SHOW = ["hardware", "tp", "pp", "dp", "cp", "ep", "mbs", "vpp", "recompute", "recompute_modules", "zero",
        "sp",
        "step_time_s", "step_time_lo_s", "step_time_hi_s", "tokens_per_s", "mfu", "mem_gib",
        "mem_weights_gib", "mem_grads_gib", "mem_optimizer_gib", "mem_activations_gib",
        "mem_reserve_gib", "compute_s", "recompute_s",
        "tp_comm_s", "cp_comm_s", "ep_comm_s", "pp_comm_s", "bubble_s", "dp_comm_s", "optimizer_s"]
ENERGY_SHOW = ["energy_kwh_per_mtok", "usd_per_mtok", "train_days"]


def cmd_sweep(a) -> int:
    from dse.spec.hardware import get_hardware
    from dse.spec.layout import attention_code, framework_code, precision_code
    from dse.spec.model import get_model
    from dse.sweep.run import sweep
    if a.output is not None:
        check_output_file(a.output, "-o")
    model = get_model(a.model)
    hws = vary_hardware([get_hardware(h) for h in a.hardware], a.vary or [])
    from dse.spec.hardware import check_precision
    for hw in hws:
        check_precision(hw, precision_code(a.precision), "--precision")
    print_assumptions(a, model)
    if a.stream or (a.output or "").endswith(".parquet"):
        return cmd_sweep_stream(a, model, hws)
    df = sweep(model, hws, a.gpus, a.global_batch, a.seq,
               precision_code(a.precision), progress=True, attention=attention_code(a.attention),
               framework=framework_code(a.framework), tp_overlap=int(a.tp_overlap),
               mem_margin=a.mem_margin, recipe=recipe(a, allow_auto=True))
    from dse.intervals import sweep_band
    df = sweep_band(df, a.framework)
    from dse.cost.energy import add_energy_columns, parse_tokens
    df = add_energy_columns(df, {h.name: float(h.tdp_w) for h in hws}, per_variant(a.gpu_hour_usd, a.hardware, hws),
                            parse_tokens(a.train_tokens) if a.train_tokens else None, a.pue, "command line")
    if a.output is not None and not df.empty:
        write_csv(df, a.output, index=False)
    if df.empty or not df["feasible"].any():
        print(f"no feasible layout for {a.model} on {a.gpus} GPUs: {least_memory(df)}")
        return 1
    from dse.report.top_table import format_top, top_rows, wrap
    ok = df[df["feasible"]]
    top, tied, knobs = top_rows(ok, a.top)
    ties = (f" ({tied} exact ties of these dropped: same time, memory and breakdown, differing "
            f"only in {', '.join(knobs)})" if tied else "")
    print(wrap(f"{len(df)} layouts x hardware evaluated, {len(ok)} fit in memory; top {len(top)}{ties}:",
               a.columns))
    print(format_top(top, SHOW + ENERGY_SHOW, a.columns))
    return 0


def cmd_sweep_stream(a, model, hws) -> int:
    """`dse sweep --stream`: every (hardware x layout) point reduced on the device
    (dse.sweep.stream): top-k, best per hardware, Pareto fronts of (step time, memory),
    step-time quantiles; `-o FILE.parquet` writes every point as it streams."""
    import pandas as pd    # lazy: 0.4 s of import the trace path does not need
    from dse.sweep.grid import enumerate_layouts
    from dse.sweep.stream import stream_sweep
    from dse.report.top_table import format_top, top_rows, wrap
    if a.output is not None and not a.output.endswith(".parquet"):
        raise InputError("-o", "output", f"a streamed sweep writes Parquet: must end in .parquet, but got {a.output!r}")
    seq = a.seq
    from dse.spec.layout import RECOMPUTE_MODULES_AUTO
    if recipe(a, allow_auto=True)["recompute_modules"] == RECOMPUTE_MODULES_AUTO:
        raise InputError("--recompute-modules", "recompute_modules", "auto needs the in-memory sweep (it "
                         "sweeps each list in turn); drop --stream or state the modules")
    wl = training_workload(a, a.global_batch, seq)
    cols = enumerate_layouts(model, a.gpus, a.global_batch, seq, framework=int(wl.framework))
    if len(cols["tp"]) == 0:
        print(f"no valid layout for {a.model} on {a.gpus} GPUs")
        return 1
    import time
    t0 = time.perf_counter()
    r = stream_sweep(model, wl, hws, cols, k=a.top * 4, parquet=a.output, progress=True,
                     mem_margin=a.mem_margin)
    dt = time.perf_counter() - t0
    print(wrap(f"{r.n_points:,} points ({len(cols['tp']):,} layouts x {len(hws):,} hardware) streamed in "
               f"{dt:.1f} s ({r.n_points / dt:,.0f} points/s); {r.n_feasible:,} fit in memory", a.columns))
    if r.top.empty:
        print("no feasible point")
        return 1
    top, tied, knobs = top_rows(r.top, a.top)
    ties = f" ({tied} exact ties dropped, differing only in {', '.join(knobs)})" if tied else ""
    print(f"top {len(top)}{ties}:")
    print(format_top(top, SHOW, a.columns))
    best = r.best[r.best["feasible"]].sort_values("step_time_s")
    print(f"\nfastest layout per hardware ({len(best)} of {len(hws)} with a feasible layout; best 5, worst 5):")
    show = pd.concat([best.head(5), best.tail(5)]).drop_duplicates(subset=["hardware"])
    print(format_top(show, SHOW, a.columns))
    q = r.quantiles()
    front = r.pareto
    print(f"\nPareto fronts of (step time, memory per GPU): {len(front)} points over "
          f"{front['hardware'].nunique() if len(front) else 0} hardware; step-time median over all feasible points "
          f"{q['q50_step_time_s'].median():.3g} s (per-hardware 5th-95th percentile spans in the histograms)")
    if a.output:
        print(f"wrote every point to {a.output}")
    return 0


def print_memory_table(parts, hbm_bytes: float, margin: float) -> str:
    """The per-GPU memory breakdown of one layout; returns the fit verdict."""
    from dse.train.memory_parts import MEM_COLUMNS, PARTS, gib_columns
    g = gib_columns(parts)
    total = float(parts.total_bytes) / 2**30
    cap = float(hbm_bytes) / 2**30
    print("  memory per GPU (GiB):")
    for p, c in zip(PARTS, MEM_COLUMNS):
        label = "reserve" if p == "reserve" else p
        print(f"    {label:<12} {float(g[c]):8.2f}"
              + ("   (allocator: fixed workspace + fragmentation)" if p == "reserve" else ""))
    print(f"    {'total':<12} {total:8.2f}   of {cap:.1f} GiB HBM, headroom {cap - total:.2f} GiB")
    if total > cap:
        return "DOES NOT FIT"
    if total > cap * (1.0 - margin):
        return (f"fits, but WITHIN THE {margin:.0%} SAFETY MARGIN ({cap * margin:.1f} GiB): "
                "expect allocator fragmentation to make it fail in some runs")
    return "fits"


def print_ops_table(model, wl, lay, hw, csv_path=None) -> None:
    """The per-operator table (dse.train.ops_table) of one layout, and its totals per
    breakdown term."""
    import pandas as pd    # lazy: 0.4 s of import the trace path does not need
    from dse.train.ops_table import ops_table
    df, r = ops_table(model, wl, lay, hw)
    view = df.assign(gflop=df["flops"] / 1e9, gbytes=df["bytes"] / 1e9)
    print("\nper-operator table (one GPU of the heaviest stage, one step; time = count x one call):")
    with pd.option_context("display.width", 160, "display.max_rows", 200):
        print(view[["op", "phase", "count", "gflop", "gbytes", "time_s", "exposed_s", "term", "bound"]]
              .to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    tot = df.groupby("term")["exposed_s"].sum()
    print("  exposed per term: " + ", ".join(f"{k[:-2]} {v:.3f} s" for k, v in tot.items())
          + f"; sum {df['exposed_s'].sum():.3f} s = step {float(r.step_time_s):.3f} s")
    if csv_path:
        write_csv(df, csv_path, index=False)
        print(f"  wrote {csv_path}")


def cmd_estimate(a) -> int:
    if a.ops_csv is not None:
        check_output_file(a.ops_csv, "--ops-csv")
    model, hw, wl, lay = resolve_layout(a)
    print_assumptions(a, model)
    from dse.host_eval import host_design_point
    from dse.train.memory_parts import step_and_memory
    # one design point: run on the host, no XLA compile (dse.host_eval)
    r, parts = host_design_point(step_and_memory, model, wl, lay, hw)
    fits = float(r.mem_bytes) <= float(hw.hbm_bytes)
    from dse.spec.layout import RECOMPUTE_MODULES_DEFAULT, recompute_modules_names
    rc = a.recompute
    if lay.recompute == 1 and int(wl.recompute_modules) != RECOMPUTE_MODULES_DEFAULT:
        rc += f" ({recompute_modules_names(wl.recompute_modules)})"
    print(f"{model.name} on {a.gpus} x {hw.name}: TP{lay.tp} PP{lay.pp} DP{lay.dp} CP{lay.cp} "
          f"mbs{lay.mbs} vpp{lay.vpp} {rc} ZeRO-{lay.zero}{' SP' if lay.sp else ''}"
          f"{', fp8 attention' if int(wl.fp8_attention) else ''}")
    if lay.recompute >= 2:
        print(f"  full recompute of {float(r.recompute_layers):.0f} layer(s) per rank")
    verdict = print_memory_table(parts, float(hw.hbm_bytes), a.mem_margin)
    print(f"  memory per GPU {float(r.mem_bytes) / 2**30:.1f} GiB of {float(hw.hbm_bytes) / 2**30:.1f} GiB"
          f" ({verdict})")
    from dse.intervals import band_for, apply_band, training_cell_of
    q10, q90, basis = band_for("training", training_cell_of(a.framework, hw.generation))
    lo, hi = apply_band(float(r.step_time_s), q10, q90)
    print(f"  step time {float(r.step_time_s):.3f} s, {float(r.tokens_per_s):,.0f} tokens/s, "
          f"MFU {float(r.mfu):.1%} of the {'tf32' if int(wl.precision) == 0 else '16-bit'} dense peak")
    if lo == lo:
        print(f"  80 % band of the calibration residuals: {lo:.3f} - {hi:.3f} s ({basis}; "
              "docs/accuracy.md: not a guarantee out of sample)")
    from dse.train.step import BREAKDOWN
    for f in BREAKDOWN:
        print(f"    {f[:-2]:<12} {float(getattr(r, f)):10.3f} s")
    if getattr(a, "ops", False) or getattr(a, "ops_csv", None):     # --ops-csv implies --ops
        print_ops_table(model, wl, lay, hw, getattr(a, "ops_csv", None))
    return 0 if fits else 1


def cmd_infer(a) -> int:
    import pandas as pd    # lazy: 0.4 s of import the trace path does not need
    from dse.infer.sweep import sweep_inference
    from dse.infer.serve_options import serving_options
    from dse.spec.hardware import get_hardware
    from dse.spec.model import get_model
    if a.output is not None:
        check_output_file(a.output, "-o")
    model = get_model(a.model)
    hws = vary_hardware([get_hardware(h) for h in a.hardware], a.vary or [])
    prec = serving_options(a.precision, a.batching, a.engine, hws, "dse infer",
                           {"precision": "--precision", "batching": "--batching", "engine": "--engine"})
    ep = _degrees(a.ep, a.batching, "--ep")
    attn_dp = _degrees(a.attn_dp, a.batching, "--attn-dp")
    batches = range(1, a.batch + 1) if a.every_batch else None
    df = sweep_inference(model, hws, a.gpus, a.batch, a.prompt, a.gen, prec, mem_margin=a.mem_margin,
                         batching=a.batching, engine=a.engine, ep=ep, attn_dp=attn_dp, batches=batches)
    if a.output is not None:
        write_csv(df, a.output, index=False)
    ok = df[df["feasible"]]
    if ok.empty:
        st = df["status"].astype(str)
        if st.str.startswith("infeasible: one request's KV cache").all():   # the flags' fault
            raise InputError("dse infer", "--prompt/--gen", f"{st.iloc[0].partition(': ')[2]} on "
                             f"every layout of {a.gpus} GPUs: shorten the request or add GPUs")
        print(f"no (tp, pp, batch) of {a.model} fits on {a.gpus} GPUs: {st.iloc[0]}")
        return 1
    if a.batching == "continuous":
        cols = ["hardware", "engine", "tp", "pp", "ep", "attn_dp", "batch", "admitted", "slots", "ttft_s",
                "queue_s", "tpot_s", "tokens_per_s", "mem_gib", "kv_pool_gib", "weights_gib"]
        if (df["ep"] == 1).all() and (df["attn_dp"] == 1).all():
            cols = [c for c in cols if c not in ("ep", "attn_dp")]
        what = "continuous batching, batch = requests in flight per replica"
    else:
        cols = ["hardware", "tp", "pp", "batch", "prefill_s", "decode_s_per_token", "tokens_per_s",
                "mem_gib", "kv_gib", "mem_weights_gib", "mem_activations_gib", "mem_reserve_gib"]
        what = "static batches"
    print(f"{model.name} serving on {a.gpus} GPUs per replica, prompt {a.prompt}, {a.gen} generated "
          f"tokens, {what}: {len(df)} points, {len(ok)} fit; highest throughput first:")
    with pd.option_context("display.width", 200, "display.float_format", "{:.4g}".format):
        print(ok.sort_values("tokens_per_s", ascending=False)[cols].head(a.top).to_string(index=False))
    if a.ops:
        print_decode_breakdown(model, hws, ok.sort_values("tokens_per_s", ascending=False).iloc[0], a, prec)
    return 0


def print_decode_breakdown(model, hws, top, a, prec) -> None:
    """``dse infer --ops``: the top point's decode iteration by operator kind
    (:mod:`dse.infer.breakdown`; static batches: the sweep's own decode columns) and, under
    continuous batching, one prompt's prefill pass the same way."""
    from dse.infer.breakdown import KINDS, breakdown_lines, row_breakdown
    lay = (f"TP{int(top['tp'])} PP{int(top['pp'])}" + (f" EP{int(top['ep'])}" if top["ep"] > 1 else "")
           + (f" attention-DP{int(top['attn_dp'])}" if top["attn_dp"] > 1 else ""))
    if a.batching == "static":
        parts = {k: float(top[f"decode_{k}"]) for k in KINDS[:-1]}      # no host term in a static step
        total = float(top["decode_s_per_token"])
        print(f"\ndecode step of the top point ({top['hardware']}, {lay}, static batch {int(top['batch'])}, "
              f"mean over {a.gen} generated tokens): {total * 1e3:.3f} ms per token")
        print("\n".join(breakdown_lines(parts, total)))
        return
    ctx = a.prompt + a.gen / 2.0
    from dse.infer.continuous import default_engine, launched_engine
    hw = {h.name: h for h in hws}[top["hardware"]]
    eng = launched_engine(a.engine if isinstance(a.engine, str) else default_engine(hw), hw, model,
                          "dse infer", "--engine")
    br = row_breakdown(model, hw, top, prec, ctx, eng)
    print(f"\ndecode-only iteration of the top point ({top['hardware']}, {top['engine']}, {lay}, "
          f"{float(top['admitted']) / int(top['attn_dp']):g} running sequences per attention rank at "
          f"{ctx:g} tokens of mean context): {br.iteration_s * 1e3:.3f} ms; its TPOT, "
          f"{float(top['tpot_s']) * 1e3:.3f} ms, also carries the prompt passes of new requests")
    print("\n".join(breakdown_lines({k: getattr(br, k) for k in KINDS}, br.iteration_s)))
    print_prefill_breakdown(model, hw, top, a.prompt, prec, eng)


def print_prefill_breakdown(model, hw, top, prompt, prec, eng) -> None:
    """``dse infer --ops`` under continuous batching: one ``prompt``-token prompt's prefill
    pass at the top point by kind, and a sentence on how the point's TTFT compares with it,
    from the numbers and the engine profile's flags."""
    from dse.infer.breakdown import KINDS, PREFILL_LABELS, breakdown_lines, prefill_breakdown, row_deployment
    pb = prefill_breakdown(row_deployment(model, hw, top, prec, eng), prompt)
    ttft = float(top["ttft_s"])
    if ttft >= pb.prefill_s:
        why = "also waits for the running pass and any queue, and shares its passes with the running decodes"
    elif eng.spreads_prompts:
        why = (f"is shorter: the {eng.name} profile spreads the mean prompt load over every pass "
               "(its whole_prompts is off), so the pass a prompt rides carries only that share")
    else:
        why = ("is shorter: the steady state's pass that carries a prompt "
               "(dse.infer.continuous.first_token_s) costs less than the prompt alone")
    print(f"\nprefill of one {prompt}-token prompt alone at the top point: {pb.prefill_s * 1e3:.3f} ms; "
          f"its TTFT, {ttft * 1e3:.3f} ms, {why}")
    print("\n".join(breakdown_lines({k: getattr(pb, k) for k in KINDS}, pb.prefill_s, "prefill",
                                     PREFILL_LABELS)))


def _degrees(values, batching, flag):
    """``--ep`` / ``--attn-dp``: None -> every valid degree under continuous batching (1
    under static), ``auto`` -> every valid degree, else the integers given."""
    if values is None:
        return "auto" if batching == "continuous" else None
    if values == ["auto"]:
        return "auto"
    if not all(v.isdigit() and 1 <= int(v) <= GPUS_MAX for v in values):   # a degree <= a job
        raise InputError("dse infer", flag, f"must be auto or integers in [1, {GPUS_MAX}], "
                         f"but got {' '.join(values)}")
    return [int(v) for v in values]


def cmd_predict(a) -> int:
    from dse.predict import predict_frame, read_csv
    check_output_file(a.output, "-o")
    df = predict_frame(read_csv(a.input), a.input, mem_margin=a.mem_margin)
    write_csv(df, a.output, index=False)
    kind = df["status"].astype(str).str.extract(r"^(ok|invalid|infeasible)\b", expand=False).fillna("other")
    n = kind.value_counts()
    parts = [f"{int(n[k])} {k}" for k in ("ok", "infeasible", "invalid", "other") if k in n]
    print(f"wrote {len(df)} rows to {a.output} ({', '.join(parts)}: see their status column)")
    return 0


def cmd_validate(a) -> int:
    from dse.validate import run_validation
    run_validation(a.input, a.out, mem_margin=a.mem_margin)
    return 0


def cmd_bench(a) -> int:
    from dse.bench import run_bench
    run_bench(points=a.points, stream=not a.no_stream, simulate=not a.no_simulate)
    return 0


def _seed(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**32), but got {s!r}") from None
    if not 0 <= v < 2**32:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**32), but got {s!r}")
    return v


def cmd_study(a) -> int:
    from dse.study import run_study
    if a.storage is not None and not a.storage.strip():
        raise InputError("--storage", "storage", "must be an Optuna storage URL (sqlite:///..., "
                         "postgresql://...) or left out for the study's own, but got an empty string")
    run_study(a.study, storage=a.storage, trials=a.trials, seed=a.seed)
    return 0


def _one_line(msg: str) -> str:
    """A message as one line: a value quoted into it (a path or flag value holding a line
    break) must not split the promised one-line error."""
    return msg.replace("\r", "\\r").replace("\n", "\\n")


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults in every option's help (not for required options, flags, or a default of
    None); the description and epilog (the example) keep their line breaks."""

    def _get_help_string(self, action):
        help = action.help or ""
        if (action.required or action.default in (None, False, argparse.SUPPRESS)
                or "%(default)" in help):
            return help
        return super()._get_help_string(action)


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit status 2; help shows the
    defaults (every subcommand's parser is of this class too)."""

    def __init__(self, *args, formatter_class=_HelpFormatter, **kw):
        super().__init__(*args, formatter_class=formatter_class, **kw)

    def error(self, message):
        self.exit(2, f"error: {self.prog}: {_one_line(message)}\n")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("dse")
    except PackageNotFoundError:      # run from a source tree that was never installed
        return "unknown (not installed)"


def cmd_list(a) -> int:
    """Catalog models (with parameter count), catalog hardware, the --vary knobs, or the
    study files of --dir with their kind; with --fields, every key of that file kind
    (dse.spec.describe renders both from the input schemas)."""
    from dse.spec.describe import format_table, listing
    print(format_table(*listing(a.what, fields=a.fields, study_dir=a.dir)))
    return 0


def cmd_dashboard(a) -> int:
    from dse.search.dashboard import serve
    from dse.search.storage import default_storage_url
    from dse.studies.common import load_study
    from pathlib import Path
    url = a.storage
    if url is None:
        d, _ = load_study(a.study)
        url = default_storage_url(Path("results") / d["name"], d["name"])
        db = Path("results") / d["name"] / f"{d['name']}.db"
        if not db.exists():
            from dse.errors import InputError
            raise InputError(str(db), "storage", f"must exist: run `make study STUDY={d['name']}` first")
    from dse.search.dashboard import check_address
    from dse.search.storage import open_storage
    check_address(a.host, a.port)
    open_storage(url, create=False)          # a bad storage is refused before the banner
    print(f"optuna-dashboard on http://{a.host}:{a.port}/dashboard  (storage {url}); Ctrl-C to stop")
    serve(url, host=a.host, port=a.port)
    return 0


EXAMPLES = {
    "sweep": "dse sweep --model llama3-8b --hardware h100-sxm-80gb a100-sxm-80gb --gpus 16 "
             "--global-batch 128 --seq 4096 --top 5",
    "estimate": "dse estimate --model llama3-8b --hardware h100-sxm-80gb --gpus 8 --tp 2 "
                "--global-batch 64 --seq 4096",
    "infer": "dse infer --model llama3-70b --hardware h100-sxm-80gb --gpus 8 --prompt 2048 --gen 256",
    "predict": "dse predict runs.csv -o results/predicted.csv",
    "validate": "dse validate data/validation/calibration.csv --out results/validation",
    "bench": "dse bench --points 65536",
    "study": "dse study studies/llama70b.toml",
    "dashboard": "dse dashboard llama70b --port 8080",
    "list": "dse list models",
    "compare": "dse compare --model llama3-70b --hardware a100-sxm-80gb h100-sxm-80gb h200-sxm-141gb "
               "--gpus 64 256 1024 --global-batch 1024 --seq 4096 -o results/compare",
    "trace": "dse trace --model llama3-8b --hardware h100-sxm-80gb --gpus 8 --tp 2 "
             "--global-batch 64 --seq 4096 --out results/trace --simulate",
}


def _epilog(cmd: str) -> str | None:
    return f"example:\n  {EXAMPLES[cmd]}" if cmd in EXAMPLES else None


_MODULE_COMMANDS = {"sensitivity": "dse.sensitivity", "calibrate": "dse.calibrate",
                    "compare": "dse.comparison"}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `dse` parser; ``command`` (the first argument, when it is one of the commands
    defined here) leaves out the commands other modules register."""
    p = _OneLineParser(prog="dse", description=__doc__,
                       epilog="`dse <command> -h` shows a command's flags and an example.")
    p.add_argument("--version", action="version", version=f"dse {_version()}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="<command>")

    def add(name, **kw):
        return sub.add_parser(name, epilog=_epilog(name), **kw)

    s = add("sweep", help="every valid layout for one workload; the fastest that fit")
    s.add_argument("--model", required=True, help="catalog name, config.json or .toml")
    s.add_argument("--hardware", required=True, nargs="+", help="catalog names or .toml files")
    s.add_argument("--gpus", required=True, type=_gpu_count, help="GPUs in the job")
    s.add_argument("--global-batch", required=True, type=_positive_int, help="sequences per step")
    seq_arg(s)
    training_flags(s)
    s.add_argument("--vary", action="append", metavar="KNOB=v1,v2",
                   help="grid over a hardware knob, e.g. hbm_bw=1x,2x,4x (repeatable; "
                        "`dse list knobs`)")
    s.add_argument("--top", type=_positive_int, default=10, help="layouts to print")
    margin_arg(s)
    energy_args(s)
    s.add_argument("--columns", type=_positive_int, default=120, help="width of the printed table")
    s.add_argument("--stream", action="store_true",
                   help="reduce on the device (top-k, best per hardware, Pareto, histograms) without "
                        "holding every point: for 10^8+ points; -o must then be .parquet")
    s.add_argument("-o", "--output", help="write every point (with status) to this CSV (.parquet: streamed)")
    s.set_defaults(fn=cmd_sweep)

    s = add("estimate", help="step time, memory and breakdown of one explicit layout")
    layout_args(s)
    s.add_argument("--ops", action="store_true",
                   help="also print the per-operator table (op, phase, count, FLOPs, bytes, time, bound)")
    s.add_argument("--ops-csv", default=None, help="write the per-operator table to this CSV (implies --ops)")
    margin_arg(s, "warn when the layout does not fit in")
    s.set_defaults(fn=cmd_estimate)

    s = add("infer", help="inference: prefill, decode and KV cache per (tp, pp, batch)")
    s.add_argument("--model", required=True, help="catalog name, config.json or .toml")
    s.add_argument("--hardware", required=True, nargs="+", help="catalog names or .toml files")
    s.add_argument("--gpus", required=True, type=_gpu_count, help="GPUs per replica")
    s.add_argument("--batch", type=_positive_int, default=64, help="largest batch (powers of two up to it)")
    s.add_argument("--prompt", type=_positive_int, default=2048, help="prompt tokens")
    s.add_argument("--gen", type=_positive_int, default=256, help="generated tokens")
    s.add_argument("--precision", default="bf16",
                   help="fp32 | tf32 | bf16 | fp16 | fp8 | fp4 (= nvfp4) | nvfp4 | mxfp4")
    s.add_argument("--vary", action="append", metavar="KNOB=v1,v2",
                   help="grid over a hardware knob (repeatable; `dse list knobs`)")
    s.add_argument("--top", type=_positive_int, default=10, help="points to print")
    s.add_argument("--batching", choices=("continuous", "static"), default="continuous",
                   help="continuous (in-flight, as serving engines run; --batch = requests in flight "
                        "per replica) or static (a batch prefilled and decoded together)")
    s.add_argument("--engine", default=None,
                   help="engine profile for continuous batching: trtllm | trtllm_pytorch | vllm (V0) "
                        "| vllm_v1 | vllm_v1_async (>= 0.14) | sglang (v0.3) | sglang_overlap | trtllm_mlperf "
                        "| trtllm_static | tgi (2.x) | tgi_v3 | lmdeploy (TurboMind < 0.12) | lmdeploy_async "
                        "| nemo, or an engine with its release routed as dse predict does "
                        "(e.g. 'vllm 0.14.1', 'sglang 0.4.8', 'trtllm 1.0 pytorch') "
                        "(default: trtllm on NVIDIA, vllm on AMD)")
    s.add_argument("--ep", nargs="+", metavar="N", default=None,
                   help="MoE expert-parallel degrees to sweep, or auto (default under continuous "
                        "batching: every valid one; dense models: 1)")
    s.add_argument("--attn-dp", nargs="+", metavar="N", default=None,
                   help="attention data-parallel ranks per replica (DP attention + EP MoE), or auto "
                        "(default as --ep); --gpus = tp x attn-dp x pp")
    s.add_argument("--every-batch", action="store_true",
                   help="every batch / concurrency 1..--batch instead of the powers of two")
    margin_arg(s, "a static batch must fit in (continuous: the engine's KV pool decides)")
    s.add_argument("--ops", action="store_true",
                   help="the top point's decode iteration by operator kind: GEMM, attention (KV read), "
                        "communication, element-wise, host time not hidden")
    s.add_argument("-o", "--output", help="write every point (with status) to this CSV")
    s.set_defaults(fn=cmd_infer)

    s = add("predict", help="predict rows of the validation schema")
    s.add_argument("input", help="CSV of runs (the validation schema)")
    s.add_argument("-o", "--output", required=True, help="CSV to write the predictions to")
    margin_arg(s, "blank settings are chosen to fit in", measured=True)
    s.set_defaults(fn=cmd_predict)

    s = add("validate", help="MAPE against measured runs; plots in --out")
    s.add_argument("input", help="CSV of measured runs")
    s.add_argument("--out", default="results/validation", help="directory for the report and plots")
    margin_arg(s, "blank settings are chosen to fit in", measured=True)
    s.set_defaults(fn=cmd_validate)

    s = add("bench", help="sweep throughput (configs/s) vs a Python loop")
    s.add_argument("--points", type=_positive_int, default=16_777_216, help="configurations to evaluate")
    s.add_argument("--no-stream", action="store_true", help="skip the 10^8-point streaming sweep")
    s.add_argument("--no-simulate", action="store_true", help="skip the event-simulator figures")
    s.set_defaults(fn=cmd_bench)

    s = add("study", help="run a study file (studies/<name>.toml)")
    s.add_argument("study", help="study file, or the name of one in studies/")
    s.add_argument("--storage", default=None, help="Optuna storage URL (searches) "
                   "(default: sqlite:///results/<name>/<name>.db)")
    s.add_argument("--trials", type=_positive_int, default=None,
                   help="override search trials (default: the study file's)")
    s.add_argument("--seed", type=_seed, default=None,
                   help="override the search seed (default: the study file's [search] seed)")
    s.set_defaults(fn=cmd_study)

    s = add("dashboard", help="serve optuna-dashboard on a study's storage")
    s.add_argument("study", help="study name or file (its results/<name>/<name>.db)")
    s.add_argument("--storage", default=None, help="any SQLAlchemy URL instead "
                   "(default: the study's results/<name>/<name>.db)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on")
    s.add_argument("--port", type=_tcp_port, default=8080, help="port to listen on")
    s.set_defaults(fn=cmd_dashboard)

    from dse.spec.describe import LIST_WHAT, help_text
    s = add("list", help="catalog models, catalog hardware, --vary knobs, study files, or serving "
            "engine profiles; "
            "--fields: every key of that file kind (type, unit, bounds, default, doc)",
            description=help_text())
    s.add_argument("what", choices=LIST_WHAT, help="what to list (topology, faults: their file keys)")
    s.add_argument("--dir", default="studies", help="where `list studies` looks for <name>.toml")
    s.add_argument("--fields", action="store_true", help="the keys of that file kind, as they are validated")
    s.set_defaults(fn=cmd_list)

    for mod in ("dse.trace.cli",):
        try:
            __import__(mod, fromlist=["register"]).register(sub)
        except ModuleNotFoundError:
            pass
    # commands whose modules register them; those modules import pandas (0.4-0.6 s), so
    # the parser of another command (`dse trace ...`) leaves them out
    import importlib
    for name, mod in _MODULE_COMMANDS.items():
        if command is None or command == name:
            importlib.import_module(mod).register(sub)
    for name, sp in sub.choices.items():      # commands registered elsewhere get an example too
        if sp.epilog is None:
            sp.epilog = _epilog(name)
    return p


def main(argv: list[str] | None = None) -> int:
    from dse.jaxconfig import configure
    configure()
    if argv is None:
        argv = sys.argv[1:]
    command = argv[0] if argv else None
    if command in _MODULE_COMMANDS or (command or "").startswith("-"):
        command = None                   # every command (help, a module's command)
    parser = build_parser(command)
    if command is not None and command not in parser._subparsers._group_actions[0].choices:
        parser = build_parser()          # not a command: argparse lists them all
    if not argv:                     # bare `dse`: usage and the commands, status 2 (like git)
        parser.print_help(sys.stderr)
        return 2
    try:
        a = parser.parse_args(argv)
    except SystemExit as e:          # argparse already printed one line; status 2
        return int(e.code or 0)
    from dse.report.manifest import note_start
    note_start()                 # the tree's state before this command writes anything
    try:
        return a.fn(a)
    except InputError as e:
        print(f"error: {_one_line(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:        # Ctrl-C: one line, the shell's status for SIGINT;
        print("interrupted", file=sys.stderr)   # outputs are atomic: nothing half-written
        return 130
    except BrokenPipeError:          # `dse list | head`: the reader left; not an error of ours
        import os
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())      # Python docs, "Note on SIGPIPE"
        return 0


if __name__ == "__main__":
    sys.exit(main())
