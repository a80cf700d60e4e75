"""Write docs/examples/api.ipynb: the Python API tour, its code cells run here and their
printed output stored (nbformat 4 JSON written by hand, no Jupyter needed).

    PYTHONPATH=. python scripts/make_api_notebook.py

tests/test_api.py runs the notebook's code cells again (so the notebook cannot rot).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "docs" / "examples" / "api.ipynb"

CELLS = [
    ("md", """# The dse Python API

`import dse` gives the command line's commands as functions taking names (strings), with
the CLI's defaults. Bad input raises `dse.errors.InputError` with one line naming the
argument and the rule. Small models and GPU counts here, so the notebook runs in seconds
on a laptop CPU; the same calls work for `llama3-405b` on 16384 GPUs."""),
    ("code", """import dse

df = dse.sweep(model="llama3-8b", hardware=["a100-sxm-80gb", "h100-sxm-80gb"], gpus=8,
               global_batch=64, seq_len=2048, gpu_hour_usd=[1.5, 3.0], train_tokens="1T")
print(len(df), "layouts x hardware,", int(df.feasible.sum()), "fit")
best = df[df.feasible].groupby("hardware").head(1)
print(best[["hardware", "tp", "pp", "dp", "mbs", "recompute", "zero", "step_time_s",
            "mfu", "mem_gib", "energy_kwh_per_mtok", "usd_per_mtok", "train_days"]].to_string(index=False))"""),
    ("md", """## One layout: `dse.estimate`

Time, breakdown, memory, energy and a `fits` flag; `.ops` is the per-operator table.
Defaults are the CLI's (global batch 1024, ZeRO-1, `dp = gpus / (tp pp cp)`)."""),
    ("code", """r = best.iloc[1]
e = dse.estimate(model="llama3-8b", hardware=r.hardware, gpus=8, tp=int(r.tp), pp=int(r.pp),
                 mbs=int(r.mbs), recompute=r.recompute, zero=int(r.zero), sp=bool(r.sp),
                 global_batch=64, seq_len=2048)
print(e)
print(e.ops.sort_values("exposed_s", ascending=False)
      .head(5)[["op", "phase", "count", "exposed_s", "term", "bound"]].to_string(index=False))"""),
    ("md", """A layout that does not fit is flagged, not timed: its times are NaN and `status`
says why (`e.raw` keeps what the step would take with unlimited memory)."""),
    ("code", """big = dse.estimate(model="llama3-70b", hardware="a100-sxm-40gb", gpus=8, tp=8, global_batch=64,
                   seq_len=2048)
print(big.fits, big.step_time_s, "|", big.status)"""),
    ("md", """## Which hardware, how many GPUs: `dse.compare`

The best feasible layout per (hardware, GPU count), with energy and cost per million
tokens (power model: `dse/cost/energy.py`)."""),
    ("code", """cmp = dse.compare(model="llama3-8b", hardware=["a100-sxm-80gb", "h100-sxm-80gb"], gpus=[8, 16],
                  global_batch=64, seq_len=2048, gpu_hour_usd=[1.5, 3.0])
print(cmp[["hardware", "gpus", "layout", "step_time_s", "tokens_per_s", "energy_kwh_per_mtok",
           "usd_per_mtok"]].to_string(index=False))"""),
    ("md", """## Serving: `dse.serve` (= `dse.infer`)

Every (tp, pp, batch) of one replica under continuous batching (the CLI's default; `batching="static"`
for a static batch): time to first token, time per output token, throughput and memory with the KV cache."""),
    ("code", """srv = dse.serve(model="llama3-8b", hardware="h100-sxm-80gb", gpus=1, batch=16, prompt=1024, gen=128)
print(srv[srv.feasible][["engine", "tp", "pp", "batch", "ttft_s", "tpot_s", "tokens_per_s",
                         "mem_gib"]].head(3).to_string(index=False))"""),
    ("md", "## Bad input is one line"),
    ("code", """try:
    dse.estimate(model="llama3-8b", hardware="h100-sxm-80gb", gpus=8, precision="fp7")
except dse.errors.InputError as err:
    print("InputError:", err)"""),
]


def _source(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    return lines


def build() -> dict:
    ns: dict = {}
    cells, n = [], 0
    for kind, text in CELLS:
        if kind == "md":
            cells.append({"cell_type": "markdown", "metadata": {}, "source": _source(text)})
            continue
        n += 1
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(text, f"<cell {n}>", "exec"), ns)
        out = [{"output_type": "stream", "name": "stdout", "text": _source(buf.getvalue())}] if buf.getvalue() else []
        cells.append({"cell_type": "code", "execution_count": n, "metadata": {}, "outputs": out,
                      "source": _source(text)})
    return {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                         "name": "python3"},
                                          "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


if __name__ == "__main__":
    from dse.jaxconfig import configure
    configure()
    OUT.write_text(json.dumps(build(), indent=1) + "\n")
    print(f"wrote {OUT}")
