"""Transformer Engine's GEMM benchmark output as a ``dse calibrate --gemm`` input.

NVIDIA's Transformer Engine ships ``benchmarks/gemm/benchmark_gemm.py`` (the tool of its
GEMM profiling guide, ``docs/examples/gemm_profiling/gemm_profiling.rst``, TE commit
1609c890e): it times cuBLAS GEMMs through TE in BF16, FP8 (current and delayed scaling),
FP8 block scaling, MXFP8 and NVFP4 and prints a fixed-width table.  Two layouts, both read
here (the column names follow ``Shape``; every precision brings a ``<name> ms`` column,
shape mode a ``<name> TFLOPS`` one beside it):

* shape mode (``--shapes``)::

      Shape                     BF16 TFLOPS   BF16 ms  FP8Cur TFLOPS  FP8Cur ms ... Speedup
      8192x8192x8192                 1463.2     0.751         2815.4      0.391 ...   1.92x

* model-config mode (``--hidden_size ...``), one table per pass::

      Op                     Shape                       BF16 ms FP8Current ms ...
      QKV Proj               15872x4096x12288              1.071      0.605 ...

The shape is ``MxKxN`` (``C = A[M,K] @ B[K,N]``, the tool's ``compute_gemm_flops``: 2 M N K),
so a row becomes ``m = M, n = N, k = K`` and ``tflops = 2 M N K / time``.  Columns:

* ``BF16`` -> ``bf16``; ``FP8Cur`` / ``FP8Current`` -> ``fp8`` (per-tensor current scaling,
  the fp8 dse prices); ``NVFP4`` -> ``nvfp4``;
* ``FP8Del`` / ``FP8Delayed`` (always run with its quantization: it needs the amax history),
  ``FP8Block`` (not a dse precision) and ``MXFP8`` (dse derives it from fp8,
  :data:`dse.spec.efficiency.MXFP8_OVER_FP8`) are not fitted; the notes say so;
* a run in autocast mode (``Mode: Autocast (includes quantization overhead)``) times each
  low-precision GEMM with the quantization of its inputs, which dse charges apart (memory
  passes, :func:`dse.cost.rates.quant_cast_bytes`): only its BF16 column is fitted, and the
  notes ask for ``--pre-quantize``.  ``N/A`` cells (a precision that failed or was skipped)
  are left out.
"""

from __future__ import annotations

import re

import pandas as pd

from dse.errors import InputError, require
from dse.spec.layout import SERVING_PRECISION

#: benchmark_gemm.py precision column -> dse precision name (None: read, not fitted)
TE_PRECISIONS = {"BF16": "bf16", "FP8Cur": "fp8", "FP8Current": "fp8", "NVFP4": "nvfp4",
                 "FP8Del": None, "FP8Delayed": None, "FP8Block": None, "MXFP8": None}
#: why a read column is not fitted (module docstring)
NOT_FITTED = {"FP8Del": "delayed scaling always runs with its quantization",
              "FP8Delayed": "delayed scaling always runs with its quantization",
              "FP8Block": "block-scaled FP8 is not a dse precision",
              "MXFP8": "dse derives MXFP8 from the fp8 fit (MXFP8_OVER_FP8)"}
_SHAPE = re.compile(r"^(\d+)x(\d+)x(\d+)$")
MAX_DIM = 2**31 - 1


def is_te_benchmark(text: str) -> bool:
    """Whether ``text`` is benchmark_gemm.py output: its banner and a ``Shape`` table."""
    return "GEMM Benchmark" in text and re.search(r"^\s*(Op\s+)?Shape\s", text, flags=re.M) is not None


def _columns(toks: list[str], path: str, line_no: int) -> list[tuple[str, str]]:
    """``(precision, unit)`` pairs of a header's tokens after ``Shape`` (``Speedup`` last,
    unit-less)."""
    cols, i = [], 0
    while i < len(toks):
        if toks[i] == "Speedup":
            cols.append(("Speedup", ""))
            i += 1
            continue
        require(i + 1 < len(toks) and toks[i + 1] in ("ms", "TFLOPS") and toks[i] in TE_PRECISIONS,
                path, f"line {line_no}", "a benchmark_gemm.py header must name each column as "
                f"'<precision> ms' or '<precision> TFLOPS' with a precision of "
                f"{sorted(TE_PRECISIONS)}, but got {' '.join(toks)!r}")
        cols.append((toks[i], toks[i + 1]))
        i += 2
    return cols


def _ms(tok: str, path: str, line_no: int, col: str) -> float | None:
    """A time cell in ms (None for ``N/A``); finite and > 0."""
    if tok == "N/A":
        return None
    try:
        v = float(tok)
    except ValueError:
        raise InputError(path, f"line {line_no}", f"the {col} cell must be a number of ms or N/A, "
                         f"but got {tok!r}") from None
    require(v == v and 0 < v < float("inf"), path, f"line {line_no}",
            f"`0 < {col} < inf` must hold, but got ({col}={tok})")
    return v


def parse_te_gemm(path: str, text: str) -> tuple[pd.DataFrame, list[str]]:
    """(rows ``m, n, k, dtype, tflops`` as :func:`dse.calibrate.read_gemm_csv` gives them,
    plus the ``line`` each came from; notes on what was not fitted) of one benchmark_gemm.py
    output (module docstring)."""
    autocast = "Mode: Autocast" in text
    header: list[tuple[str, str]] | None = None
    rows, seen, skipped = [], set(), {}
    for n, line in enumerate(text.splitlines(), start=1):
        toks = line.split()
        if "Shape" in toks and toks.index("Shape") <= 1 and len(toks) > toks.index("Shape") + 1:
            header = _columns(toks[toks.index("Shape") + 1:], path, n)
            continue
        shape = next((i for i, t in enumerate(toks) if _SHAPE.match(t)), None)
        if header is None or shape is None or line.lstrip().startswith("*"):
            continue              # not a table row (the profiling-mode banner names a shape too)
        M, K, N = (int(x) for x in _SHAPE.match(toks[shape]).groups())
        require(all(0 < d <= MAX_DIM for d in (M, K, N)), path, f"line {n}",
                f"shape dimensions must be positive integers <= {MAX_DIM}, but got {toks[shape]!r}")
        cells = toks[shape + 1:]
        if cells and cells[-1].endswith("x") and header[-1][0] == "Speedup":
            cells = cells[:-1]
        cols = [c for c in header if c[0] != "Speedup"]
        require(len(cells) == len(cols), path, f"line {n}", f"a row must hold one cell per column "
                f"({len(cols)}: {', '.join(f'{p} {u}' for p, u in cols)}), but got {len(cells)}")
        for (prec, unit), tok in zip(cols, cells):
            if unit != "ms":
                continue
            ms = _ms(tok, path, n, f"{prec} ms")
            name = TE_PRECISIONS[prec]
            if ms is None:
                continue
            if name is None or (autocast and name != "bf16"):
                skipped[prec] = skipped.get(prec, 0) + 1
                continue
            seen.add(prec)
            rows.append({"m": float(M), "n": float(N), "k": float(K), "dtype": name,
                         "tflops": 2.0 * M * N * K / (ms * 1e-3) / 1e12, "line": n})
    require(header is not None, path, "table", "must hold a benchmark_gemm.py table (a header line "
            "with 'Shape' and '<precision> ms' columns)")
    require(bool(rows), path, "rows", "must hold at least one fitted cell (BF16, FP8 current "
            "scaling or NVFP4 ms; an autocast run only its BF16 column), but got none")
    notes = [f"{path}: Transformer Engine benchmark_gemm.py output, "
             f"{'autocast' if autocast else 'pre-quantized'} mode; fitted columns "
             f"{', '.join(sorted(seen))} ({len(rows)} GEMM times)"]
    for prec, count in sorted(skipped.items()):
        why = ("an autocast run times it with its inputs' quantization, which dse charges apart: "
               "rerun benchmark_gemm.py with --pre-quantize to fit it"
               if autocast and TE_PRECISIONS[prec] is not None else NOT_FITTED[prec])
        notes.append(f"{path}: column {prec} not fitted ({count} cells): {why}")
    df = pd.DataFrame(rows)
    df["precision"] = df["dtype"].map(SERVING_PRECISION)
    return df, notes


def te_gemm_text(shapes_mkn, times_ms: dict[str, list[float]], gpu: str = "synthetic",
                 pre_quantize: bool = True) -> str:
    """benchmark_gemm.py shape-mode output for ``shapes_mkn`` ``(M, K, N)`` with the given
    times per TE precision column (``"BF16"``, ``"FP8Cur"``, ``"NVFP4"``, ...): for sample
    inputs and tests (the layout of the tool's ``run_benchmarks``)."""
    precs = list(times_ms)
    mode = ("Pre-quantized inputs (raw kernel throughput)" if pre_quantize
            else "Autocast (includes quantization overhead)")
    out = [f"GEMM Benchmark on {gpu}", "Timing method: CUDA events",
           "Warmup iterations: 10, Timed iterations: 100", f"Mode: {mode}", "=" * 90]
    hdr = f"{'Shape':<24}" + "".join(f" {p + ' TFLOPS':>14} {p + ' ms':>10}" for p in precs)
    out += [hdr + f" {'Speedup':>8}", "-" * 90]
    for i, (M, K, N) in enumerate(shapes_mkn):
        row, best, base = f"{f'{M}x{K}x{N}':<24}", 0.0, None
        for p in precs:
            ms = times_ms[p][i]
            tf = 2.0 * M * N * K / (ms * 1e-3) / 1e12
            best = max(best, tf)
            base = tf if base is None else base
            row += f" {tf:>14.1f} {ms:>10.4f}"
        out.append(row + f" {best / base:>7.2f}x")
    out.append("=" * 90)
    return "\n".join(out) + "\n"
