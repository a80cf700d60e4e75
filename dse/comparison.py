"""`dse compare` (the Python API: dse.compare): several hardware x several GPU counts -> the best feasible layout of
each cell, with step time, tokens/s, energy and cost per million tokens.

Each GPU count is one sweep (:func:`dse.sweep.run.sweep`) over every hardware at once;
the energy and cost columns are :mod:`dse.cost.energy`.  A cell where no layout fits
keeps a row: NaN metrics and, in ``status``, the smallest memory need and its layout; a
GPU count the global batch cannot fill says so.
"""

from __future__ import annotations

import pandas as pd

from dse.errors import require

OBJECTIVES = {"step_time_s": "fastest step", "energy_kwh_per_mtok": "least energy per token",
              "usd_per_mtok": "cheapest per token", "gpu_hours_per_mtok": "fewest GPU-hours per token"}
LAYOUT = ("tp", "pp", "dp", "cp", "ep", "mbs", "vpp", "recompute", "zero", "sp")
METRICS = ("step_time_s", "step_time_lo_s", "step_time_hi_s", "tokens_per_s", "mfu", "mem_gib",
           "mem_weights_gib", "mem_grads_gib", "mem_optimizer_gib", "mem_activations_gib",
           "mem_reserve_gib", "hbm_gib", "gpu_power_w",
           "energy_kwh_per_mtok", "gpu_hours_per_mtok", "usd_per_mtok", "train_days",
           "train_mwh", "train_usd")


def layout_label(r) -> str:
    """``TP4 PP4 DP4 CP1 EP1 mbs1 vpp5 none Z1 SP`` of a row."""
    return (f"TP{r['tp']} PP{r['pp']} DP{r['dp']} CP{r['cp']} EP{r['ep']} mbs{r['mbs']} "
            f"vpp{r['vpp']} {r['recompute']} Z{r['zero']}{' SP' if r['sp'] else ''}")


def best_per_cell(df: pd.DataFrame, hw_names: list[str], gpus: int, objective: str) -> list[dict]:
    """One row per hardware of one sweep's DataFrame: its best feasible layout for
    ``objective`` (ties broken by step time), or why none fits."""
    from dse.cli_layout import least_memory
    rows = []
    for name in hw_names:
        sub = df[df["hardware"] == name] if not df.empty else df
        row = {"hardware": name, "gpus": gpus}
        ok = sub[sub["feasible"]] if not sub.empty else sub
        if sub.empty:
            row["status"] = "no valid layout (the global batch cannot fill this GPU count)"
        elif ok.empty:
            row["status"] = "out of memory: " + least_memory(sub)
            row["mem_gib"] = float(sub["mem_gib"].min())
        else:
            b = ok.sort_values([objective, "step_time_s"], kind="stable").iloc[0]
            row.update({k: b[k] for k in LAYOUT})
            row.update({k: float(b[k]) for k in METRICS if k in b})
            row["layout"] = layout_label(b)
            if "interval_basis" in b:
                row["interval_basis"] = b["interval_basis"]
            row["status"] = "ok"
        rows.append(row)
    return rows


def compare_frame(model, hws: list, gpus: list[int], global_batch: int, seq_len: int,
                  precision: int = 1, attention: int = 1, framework: int = 0, tp_overlap: int = 0,
                  gpu_hour_usd=None, train_tokens: float | None = None, pue: float = 1.0,
                  objective: str = "step_time_s", where: str = "compare",
                  mem_margin: float | None = None, framework_name: str | None = None,
                  recipe: dict | None = None) -> pd.DataFrame:
    """The best feasible layout per (hardware, GPU count), one row each (hardware in the
    order given, then GPU count): layout columns, ``layout`` (one string), the metrics of
    :data:`METRICS` (``usd_per_mtok``/``train_*`` only with a price/budget) and ``status``.
    ``recipe``: the Workload's recipe switches (:func:`dse.spec.layout.recipe_codes`)."""
    from dse.cost.energy import add_energy_columns
    from dse.intervals import sweep_band
    from dse.spec.layout import FRAMEWORK_NAMES
    from dse.sweep.run import MEM_MARGIN, sweep
    mem_margin = MEM_MARGIN if mem_margin is None else mem_margin
    fw_name = framework_name or FRAMEWORK_NAMES.get(framework, "megatron")
    require(objective in OBJECTIVES, where, "objective",
            f"must be one of {sorted(OBJECTIVES)}, but got {objective!r}")
    require(objective != "usd_per_mtok" or gpu_hour_usd is not None, where, "objective",
            "usd_per_mtok needs a price per GPU-hour (gpu_hour_usd)")
    require(len(hws) > 0 and len(gpus) > 0, where, "hardware, gpus", "must name at least one of each")
    names = [h.name for h in hws]
    require(len(set(names)) == len(names), where, "hardware", f"must not repeat, but got {names}")
    tdp = {h.name: float(h.tdp_w) for h in hws}
    rows = []
    for g in sorted(set(gpus)):
        df = sweep(model, hws, g, global_batch, seq_len, precision, attention=attention,
                   framework=framework, tp_overlap=tp_overlap, mem_margin=mem_margin,
                   recipe=recipe)
        df = sweep_band(df, fw_name)
        df = add_energy_columns(df, tdp, gpu_hour_usd, train_tokens, pue, where)
        rows += best_per_cell(df, names, g, objective)
    out = pd.DataFrame(rows)
    out.insert(0, "model", model.name)
    out["global_batch"], out["seq_len"] = global_batch, seq_len
    order = {n: i for i, n in enumerate(names)}
    out = out.sort_values(["hardware", "gpus"], key=lambda s: s.map(order) if s.name == "hardware" else s,
                          kind="stable").reset_index(drop=True)
    for c in METRICS:
        if c in out:
            out[c] = out[c].astype(float)
    return out


def format_compare(df: pd.DataFrame, width: int = 120) -> str:
    """The comparison as text: one line per cell, infeasible cells with their reason."""
    from dse.report.top_table import HEADERS, wrap
    cols = ["hardware", "gpus", "layout", "step_time_s"]
    cols += [c for c in ("step_time_lo_s", "step_time_hi_s") if c in df]
    cols += ["tokens_per_s", "mfu", "mem_gib",
            "energy_kwh_per_mtok", "usd_per_mtok" if "usd_per_mtok" in df else "gpu_hours_per_mtok"]
    cols += [c for c in ("train_days",) if c in df]
    ok = df[df["status"] == "ok"]
    lines = []
    for _, r in df[df["status"] != "ok"].iterrows():
        lines.append(wrap(f"{r['hardware']} x {r['gpus']}: {r['status']}", width))
    if ok.empty:                       # no cell fits: only their reasons (no metric columns)
        return "\n".join(lines)
    view = ok[cols].rename(columns=HEADERS)
    fmt = {"step_s": "{:.3f}".format, "step_lo": "{:.3f}".format, "step_hi": "{:.3f}".format, "tok/s": "{:,.0f}".format, "mfu": "{:.3f}".format,
           "mem_GiB": "{:.1f}".format, "kWh/Mtok": "{:.4f}".format, "$/Mtok": "{:.3f}".format,
           "GPUh/Mtok": "{:.4f}".format, "train_d": "{:,.1f}".format}
    return "\n".join([view.to_string(index=False, formatters={k: v for k, v in fmt.items() if k in view},
                                     line_width=width)] + lines)


def register(sub) -> None:
    """Add ``dse compare`` to the CLI's subparsers."""
    from dse.cli_layout import _gpu_count, _positive_int, energy_args, seq_arg, training_flags
    s = sub.add_parser("compare", help="best layout per (hardware, GPU count): time, tokens/s, "
                       "energy and cost per token; table, CSV and plot")
    s.add_argument("--model", required=True, help="catalog name, config.json or .toml")
    s.add_argument("--hardware", required=True, nargs="+", help="catalog names or .toml files")
    s.add_argument("--gpus", required=True, nargs="+", type=_gpu_count, help="GPU counts")
    s.add_argument("--global-batch", required=True, type=_positive_int, help="sequences per step")
    seq_arg(s)
    training_flags(s)
    s.add_argument("--objective", default="step_time_s", choices=sorted(OBJECTIVES),
                   help="what 'best' means in each cell")
    from dse.cli_layout import margin_arg
    margin_arg(s)
    energy_args(s)
    s.add_argument("--columns", type=_positive_int, default=120, help="width of the printed table")
    s.add_argument("-o", "--output", default=None, metavar="DIR",
                   help="folder for compare.csv, compare.png, manifest.json")
    s.set_defaults(fn=cmd_compare)


def cmd_compare(a) -> int:
    from pathlib import Path

    from dse.cli_layout import per_variant
    from dse.cost.energy import parse_tokens
    from dse.report.atomic import check_output_dir, make_output_dir, write_csv
    from dse.spec.hardware import check_precision, get_hardware
    from dse.spec.layout import attention_code, framework_code, precision_code
    from dse.spec.model import get_model
    out = check_output_dir(a.output, "-o", create=False) if a.output is not None else None
    model = get_model(a.model)
    hws = [get_hardware(h) for h in a.hardware]
    prec = precision_code(a.precision)
    for hw in hws:
        check_precision(hw, prec, "--precision")
    seq = a.seq
    from dse.cli_layout import print_assumptions, recipe
    print_assumptions(a, model)
    tokens = parse_tokens(a.train_tokens) if a.train_tokens else None
    df = compare_frame(model, hws, a.gpus, a.global_batch, seq, prec, attention_code(a.attention),
                       framework_code(a.framework), int(a.tp_overlap),
                       per_variant(a.gpu_hour_usd, a.hardware, hws), tokens, a.pue, a.objective,
                       "command line", a.mem_margin, a.framework, recipe(a))
    price = ("" if a.gpu_hour_usd is None else
             f", ${'/'.join(f'{p:g}' for p in a.gpu_hour_usd)} per GPU-hour")
    held = (f"{model.name}, global batch {a.global_batch} x {seq} tokens, {a.precision}, "
            f"{a.framework}{', PUE ' + format(a.pue, 'g') if a.pue != 1 else ''}{price}")
    from dse.report.top_table import wrap
    print(wrap(f"best feasible layout per (hardware, GPUs), best = {OBJECTIVES[a.objective]}; {held}:",
               a.columns))
    print(format_compare(df, a.columns))
    if out is not None:
        from dse.report.compare_plot import compare_plot
        from dse.report.manifest import write_manifest
        out = make_output_dir(out, "-o")
        write_csv(df, Path(out) / "compare.csv", index=False)
        fits = bool((df["status"] == "ok").any())
        if fits:                       # nothing to plot when no cell fits
            compare_plot(df, f"Best feasible layout per (hardware, GPUs), best = {OBJECTIVES[a.objective]}\n"
                         f"held fixed: {held}", Path(out) / "compare.png")
        write_manifest(out, extra={"compare": {"model": model.name, "hardware": a.hardware,
                                               "gpus": a.gpus, "objective": a.objective}})
        print(f"wrote compare.csv, {'compare.png, ' if fits else ''}manifest.json in {out}"
              f"{'' if fits else ' (no plot: no cell fits)'}")
    return 0 if (df["status"] == "ok").any() else 1
