"""A generated hostile-input pass (issue 12, item 5), beside the hand-written table of
tests/test_hostile_inputs.py: hypothesis draws bad flag values, bad CSV / nccl-tests /
GEMM / JSON files and bad storages and feeds them to every subcommand in-process.

Every bad *file or flag* must give exit status 2, exactly one line on stderr that starts
with ``error:`` and names the flag or file, no traceback, and leave the directory tree as
it was.  Every bad *row* of a ``predict`` file (training or inference schema) must get an
``invalid:`` / ``infeasible:`` status naming its column and no prediction.

Argument values never hold a NUL character: an ``exec``-ed argv cannot carry one.
Long-running or serving commands (``bench`` past its flags, ``dashboard`` past its
checks, ``study`` searches) are only fed inputs that must be refused before they start.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dse.cli import main
from tests.kill_mid_write import EARLIER, MARKER, kill_at_marker

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "calibrate"
FAST = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


def _tree(d: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(d)): (p.read_bytes() if p.is_file() else None) for p in d.rglob("*")}


@pytest.fixture
def arena(tmp_path_factory, monkeypatch, capsys):
    """A working directory holding one of every kind of path a flag can be given (a
    file, a directory, a binary file, a non-UTF-8 file, a valid predict CSV); ``run``
    calls ``dse`` in-process there and checks the bad-input contract."""
    d = tmp_path_factory.mktemp("arena")
    (d / "adir").mkdir()
    (d / "afile").write_text("keep me\n")
    (d / "binary.bin").write_bytes(bytes(range(256)) * 4)
    (d / "latin1.txt").write_bytes("caf\xe9,\xff\n".encode("latin1"))
    pd.DataFrame([ROW]).to_csv(d / "rows.csv", index=False)
    monkeypatch.chdir(d)

    def run(args, needles=()):
        before = _tree(d)
        rc = main([str(a) for a in args])
        cap = capsys.readouterr()
        lines = cap.err.strip().splitlines()
        assert rc == 2, (args, rc, cap.err, cap.out[-500:])
        assert len(lines) == 1 and lines[0].startswith("error:"), (args, cap.err)
        assert "Traceback" not in cap.err
        if needles:
            norm = lines[0].replace("_", "-")
            needles = [n.replace("\r", "\\r").replace("\n", "\\n") for n in needles if n]
            assert any(n in lines[0] or n.replace("_", "-") in norm or repr(n)[1:-1] in lines[0]
                       for n in needles), \
                (args, lines[0], needles)
        assert _tree(d) == before, (args, "wrote", set(_tree(d)) ^ set(before))
        return lines[0]
    return run


# --------------------------------------------------------------------- hostile values
def _int_in(s: str, lo: int, hi: int) -> bool:
    try:
        v = int(s)
    except ValueError:
        return False
    return lo <= v <= hi


def _float_in(s: str, lo: float, hi: float) -> bool:
    try:
        v = float(s)
    except ValueError:
        return False
    return lo <= v <= hi


TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
SPECIAL = ["abc", "inf", "-inf", "nan", "NaN", "-1", "0", "", " ", "2.5", "1e3", "0x10", "true",
           str(10**30), str(2**31), str(-(10**30)), "1e400", "١e3", "8\n8", "--", "８x"]


def bad_int(lo: int, hi: int):
    """A flag value that is not an integer in [lo, hi]."""
    return st.one_of(st.sampled_from(SPECIAL), TEXT,
                     st.integers(max_value=lo - 1).map(str),
                     st.integers(min_value=hi + 1, max_value=10**40).map(str),
                     st.floats(allow_nan=True, allow_infinity=True).map(repr)
                     ).filter(lambda s: not _int_in(s, lo, hi))


def bad_float(lo: float, hi: float, lo_open: bool = False):
    return st.one_of(st.sampled_from(SPECIAL), TEXT,
                     st.floats(allow_nan=True, allow_infinity=True).map(repr)
                     ).filter(lambda s: not _float_in(s, lo, hi) or (lo_open and _float_in(s, lo, lo)))


def bad_name(valid: set[str]):
    """A value that is none of the ``valid`` names (nor a path that exists here)."""
    return st.one_of(st.sampled_from(["", " ", "..", "/", "BF16 ", "fp 8", "none\n", "\udcff"]),
                     TEXT).filter(lambda s: s.strip() not in valid and s.strip().lower() not in valid
                                  and not os.path.exists(s) and not s.startswith("-"))


#: path-valued flags: an existing file or directory of the wrong kind, a binary or
#: non-UTF-8 file, a missing one, an empty string, a name with a line break
BAD_INPUT_FILES = st.sampled_from(["adir", ".", "binary.bin", "latin1.txt", "missing.toml",
                                   "missing.csv", "", "no/such/dir/x.toml", "a\nb.toml",
                                   "\udcff.csv", "/proc/self/nonexistent"])
BAD_OUT_FILES = st.sampled_from(["adir", ".", "", "no/such/dir/out.csv", "/proc/out.csv",
                                 "afile/x.csv"])
BAD_OUT_DIRS = st.sampled_from(["afile", "", "afile/sub", "/proc/outdir", "binary.bin"])

M = ["--model", "llama3-8b", "--hardware", "h100-sxm-80gb"]
LAYOUT = M + ["--gpus", "8", "--global-batch", "64"]
BASE = {
    "sweep": ["sweep", *LAYOUT],
    "estimate": ["estimate", *LAYOUT],
    "infer": ["infer", *M, "--gpus", "8"],
    "trace": ["trace", *LAYOUT, "--out", "tr"],
    "sensitivity": ["sensitivity", *LAYOUT, "-o", "sens"],
    "compare": ["compare", *LAYOUT],
}
POS = (1, 2**31 - 1)
GPUS = (1, 2**20)
INT_FLAGS = [  # (command, flag, lo, hi)
    *[(c, "--gpus", *GPUS) for c in BASE],
    *[(c, "--global-batch", *POS) for c in ("sweep", "estimate", "trace", "sensitivity", "compare")],
    *[(c, "--seq", *POS) for c in ("sweep", "estimate", "trace", "sensitivity", "compare")],
    *[("estimate", f"--{f}", *POS) for f in ("tp", "pp", "dp", "cp", "ep", "mbs", "vpp")],
    *[("trace", f"--{f}", *POS) for f in ("tp", "pp", "cp", "mbs")],
    *[("sensitivity", f"--{f}", *POS) for f in ("tp", "pp", "ep", "batch", "prompt", "gen")],
    *[(c, "--zero", 0, 3) for c in ("estimate", "trace", "sensitivity")],
    ("sweep", "--top", *POS), ("sweep", "--columns", *POS), ("compare", "--columns", *POS),
    *[("infer", f, *POS) for f in ("--batch", "--prompt", "--gen", "--top")],
]
FLOAT_FLAGS = [  # (command, flag, lo, hi, lo_open)
    *[(c, "--mem-margin", 0.0, 0.4999, False) for c in ("sweep", "estimate", "infer", "compare")],
    *[(c, "--pue", 1.0, 3.0, False) for c in ("sweep", "compare")],
    *[(c, "--gpu-hour-usd", 0.0, 1000.0, True) for c in ("sweep", "compare")],
]
NAME_FLAGS = [  # (command, flag, valid names)
    *[(c, "--precision", {"fp32", "tf32", "bf16", "fp16", "fp8"})
      for c in ("sweep", "estimate", "trace", "compare")],
    *[(c, "--framework", {"megatron", "deepspeed", "fsdp", "fsdp2", "torchtitan"})
      for c in ("sweep", "estimate", "trace", "compare", "sensitivity")],
    *[(c, "--attention", {"flash", "unfused"}) for c in ("sweep", "estimate", "trace", "compare")],
    *[(c, "--recompute", {"none", "selective", "full", "block"}) for c in ("estimate", "trace")],
    ("infer", "--precision", {"bf16", "fp16", "fp8", "fp4", "nvfp4", "mxfp4"}),
]


@FAST
@given(case=st.sampled_from(INT_FLAGS), data=st.data())
def test_integer_flags(arena, case, data):
    cmd, flag, lo, hi = case
    v = data.draw(bad_int(lo, hi), label=flag)
    arena(BASE[cmd] + [flag, v], needles=(flag,))


@FAST
@given(case=st.sampled_from(FLOAT_FLAGS), data=st.data())
def test_number_flags(arena, case, data):
    cmd, flag, lo, hi, lo_open = case
    v = data.draw(bad_float(lo, hi, lo_open), label=flag)
    arena(BASE[cmd] + [flag, v], needles=(flag, flag.lstrip("-")))


@FAST
@given(case=st.sampled_from(NAME_FLAGS), data=st.data())
def test_name_flags(arena, case, data):
    cmd, flag, valid = case
    v = data.draw(bad_name(valid), label=flag)
    arena(BASE[cmd] + [flag, v], needles=(flag, flag.lstrip("-")))


@FAST
@given(tokens=st.one_of(st.sampled_from(["", "0", "-5T", "1e18", "infT", "nanB", "15X", "T", "0.5"]),
                        TEXT.filter(lambda s: not s.strip()[:1].isdigit())),
       cmd=st.sampled_from(["sweep", "compare"]))
def test_train_tokens(arena, tokens, cmd):
    arena(BASE[cmd] + ["--train-tokens", tokens], needles=("--train-tokens", "train_tokens"))


@FAST
@given(cmd=st.sampled_from(["sweep", "estimate", "infer", "trace", "sensitivity", "compare"]),
       which=st.sampled_from(["--model", "--hardware"]), path=BAD_INPUT_FILES)
def test_spec_paths(arena, cmd, which, path):
    args = list(BASE[cmd])
    args[args.index(which) + 1] = path
    arena(args, needles=(which, which.lstrip("-"), path))


OUT_FLAGS = [("sweep", "-o", BAD_OUT_FILES), ("infer", "-o", BAD_OUT_FILES),
             ("estimate", "--ops-csv", BAD_OUT_FILES), ("trace", "--out", BAD_OUT_DIRS),
             ("sensitivity", "-o", BAD_OUT_DIRS), ("compare", "-o", BAD_OUT_DIRS)]


@FAST
@given(case=st.sampled_from(OUT_FLAGS), data=st.data())
def test_output_paths_checked_before_work(arena, case, data):
    cmd, flag, paths = case
    p = data.draw(paths, label=flag)
    args = [a for a in BASE[cmd]]
    if flag in args:
        args[args.index(flag) + 1] = p
    else:
        args += [flag, p]
    arena(args, needles=(flag, p))


@FAST
@given(args=st.one_of(
    st.tuples(st.just("predict"), BAD_INPUT_FILES, st.just("-o"), st.just("out.csv")),
    st.tuples(st.just("predict"), st.just("rows.csv"), st.just("-o"), BAD_OUT_FILES),
    st.tuples(st.just("validate"), BAD_INPUT_FILES, st.just("--out"), st.just("v")),
    st.tuples(st.just("validate"), st.just("rows.csv"), st.just("--out"), BAD_OUT_DIRS),
    st.tuples(st.just("predict"), st.just("rows.csv"), st.just("-o"), st.just("o.csv"),
              st.just("--mem-margin"), bad_float(0.0, 0.4999)),
    st.tuples(st.just("calibrate"), st.just("--base"), bad_name({"h100-sxm-80gb"}), st.just("--gemm"),
              st.just(str(DATA / "gemm_mamf.csv")), st.just("-o"), st.just("hw.toml")),
    st.tuples(st.just("calibrate"), st.just("--base"), st.just("h100-sxm-80gb"), st.just("--gemm"),
              BAD_INPUT_FILES, st.just("-o"), st.just("hw.toml")),
    st.tuples(st.just("calibrate"), st.just("--base"), st.just("h100-sxm-80gb"), st.just("--nccl"),
              BAD_INPUT_FILES, st.just("-o"), st.just("hw.toml")),
    st.tuples(st.just("calibrate"), st.just("--base"), st.just("h100-sxm-80gb"), st.just("--gemm"),
              st.just(str(DATA / "gemm_mamf.csv")), st.just("-o"), BAD_OUT_FILES),
    st.tuples(st.just("calibrate"), st.just("--base"), st.just("h100-sxm-80gb"), st.just("--gemm"),
              st.just(str(DATA / "gemm_mamf.csv")), st.just("--name"),
              st.sampled_from(["", "a/b", "..", "../x", "/abs", "a b", "x\ny"]), st.just("-o"), st.just("h.toml")),
    st.tuples(st.just("study"), BAD_INPUT_FILES),
    st.tuples(st.just("study"), st.just("afile"), st.just("--trials"), bad_int(*POS)),
    st.tuples(st.just("study"), st.just("afile"), st.just("--seed"), bad_int(0, 2**32 - 1)),
    st.tuples(st.just("dashboard"), st.sampled_from(["x", "../x", "/abs", ""]), st.just("--port"),
              bad_int(1, 65535)),
    st.tuples(st.just("dashboard"), st.just("x"), st.just("--storage"),
              st.sampled_from(["", "notaurl", "sqlite:///missing.db", "sqlite:///adir",
                               "sqlite:///binary.bin", "sqlite:///afile", "nosuchdialect://x/y"])),
    st.tuples(st.just("bench"), st.just("--points"), bad_int(*POS)),
    st.tuples(st.just("list"), bad_name({"models", "hardware", "knobs", "studies"})),
    st.tuples(st.just("list"), st.just("studies"), st.just("--dir"),
              st.sampled_from(["afile", "missing", "binary.bin"])),
))
def test_file_flags_of_every_other_command(arena, args):
    arena(list(args))


# ------------------------------------------------------------ study names (results/)
def _not_a_name(s: str) -> bool:
    return s in ("", ".", "..") or re.fullmatch(r"[A-Za-z0-9._-]+", s) is None


@FAST
@given(name=st.one_of(st.sampled_from(["", ".", "..", "../x", "../../x", "/abs/dir", "a/b", "a\\b",
                                       " a", "a b", "~/x", "x\ny"]), TEXT).filter(_not_a_name))
def test_study_name_is_one_path_component(arena, name):
    Path("s.toml").write_text(f'name = {json.dumps(name, ensure_ascii=False)}\nkind = "layout"\n[workload]\n'
                              'model = "llama3-8b"\nseq_len = 2048\nglobal_batch = 64\ngpus = 8\n'
                              'hardware = ["h100-sxm-80gb"]\n')
    try:
        arena(["study", "s.toml"], needles=("name",))
    finally:
        Path("s.toml").unlink()


# ------------------------------------------------------------ predict rows (training)
ROW = dict(id=1, source="T", model="GPT 7.5B", num_layers=36, hidden_size=4096, ffn_hidden_size=16384,
           num_attention_heads=32, num_kv_heads=32, vocab_size=51200, seq_length=2048,
           global_batch_size=512, micro_batch_size=16, gpu="a100-sxm-80gb", num_gpus=128, tp=4, pp=1,
           dp=32, cp=1, ep=1, vpp=1, sequence_parallel="false", recompute="full", zero_stage=0,
           precision="fp16", measured_iter_time_s=3.7, measured_mem_gib=40.0)
NA = {"", "#n/a", "#n/a n/a", "#na", "-1.#ind", "-1.#qnan", "-nan", "1.#ind", "1.#qnan", "<na>", "n/a",
      "na", "null", "nan", "none"}
TOPS = {"num_gpus": 2**20, "global_batch_size": 2**20, "seq_length": 2**24}
REQUIRED_INT = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "vocab_size",
                "seq_length", "global_batch_size", "num_gpus")
OPTIONAL_INT = ("num_kv_heads", "tp", "pp", "dp", "cp", "ep", "micro_batch_size", "vpp")
NAMES = {"gpu": None, "precision": {"fp32", "tf32", "bf16", "fp16", "fp8"},
         "recompute": {"none", "selective", "full", "block"},
         "sequence_parallel": {"true", "false"}, "framework": {"megatron", "deepspeed", "fsdp", "fsdp2",
                                                              "torchtitan"},
         "attention": {"flash", "unfused"}, "tp_comm_overlap": {"true", "false"}}


def _cell(col: str):
    """(column, a value that column must refuse) for one row."""
    if col in REQUIRED_INT or col in OPTIONAL_INT or col == "zero_stage":
        lo, hi = (0, 3) if col == "zero_stage" else (1, TOPS.get(col, 2**31 - 1))
        s = st.one_of(st.sampled_from(["abc", "inf", "-inf", "-1", "0", "2.5", "1e30", str(10**30),
                                       str(2**40), "true", "4x"]), TEXT)
        s = s.filter(lambda v: not _float_in(v, lo, hi) or float(v) != int(float(v)))
    else:
        valid = NAMES[col]
        s = TEXT.filter(lambda v: (valid is None or v.strip().lower() not in valid)
                        and not os.path.exists(v.strip()))
    # blank means "unknown / default" in an optional column: not a bad value there
    optional = col not in REQUIRED_INT and col not in ("gpu", "precision")
    # (a NUL byte or a bare carriage return breaks the file, not the row: the malformed-file test)
    return s.filter(lambda v: not (optional and v.strip().lower() in NA) and "\x00" not in v
                    and "\r" not in v)


def _predict_rows(tmp: Path, rows: list[dict]) -> pd.DataFrame:
    from dse.predict import predict_frame, read_csv
    p = tmp / "in.csv"
    pd.DataFrame(rows).to_csv(p, index=False)
    return predict_frame(read_csv(str(p)), str(p), intervals=False)


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(col=st.sampled_from([*REQUIRED_INT, *OPTIONAL_INT, "zero_stage", *NAMES]), data=st.data())
def test_a_bad_training_row_gets_a_status_naming_its_column(tmp_path, col, data):
    v = data.draw(_cell(col), label=col)
    res = _predict_rows(tmp_path, [dict(ROW, **{col: v})])
    status = str(res.loc[0, "status"])
    assert status.startswith(("invalid: ", "infeasible: ")), (col, v, status)
    assert pd.isna(res.loc[0, "predicted_iter_time_s"]), (col, v, status)
    assert "\n" not in status


# ------------------------------------------------------------ predict rows (inference)
IROW = dict(id="i1", source_id="S", model="meta-llama/Llama-2-7b-hf", hardware="h100-sxm-80gb", gpus=1,
            tp=1, pp=1, precision="fp8", engine="trtllm", scenario="fixed_batch", batch_or_concurrency=64,
            input_len=128, output_len=128, measured_output_tok_s=19694)
ICOLS = {"gpus": 2**20, "tp": 2**20, "pp": 2**20, "ep": 2**20, "replicas": 2**20, "attn_dp": 2**20,
         "batch_or_concurrency": 2**20, "input_len": 2**24, "output_len": 2**24}
INAMES = {"scenario": {"fixed_batch", "offline_throughput", "concurrency", "poisson_rate", "latency"},
          "precision": {"bf16", "fp16", "fp8", "fp4", "nvfp4", "mxfp4"}, "kv_precision": {"fp8", "bf16", "fp16"},
          "model": None, "hardware": None}


def _icell(col: str):
    if col in ICOLS:
        hi = ICOLS[col]
        s = st.one_of(st.sampled_from(["abc", "inf", "-inf", "-3", "0", "0.5", "1e30", str(10**30),
                                       str(2**40), "64 tokens"]), TEXT)
        return s.filter(lambda v: v.strip().lower() not in NA and "\x00" not in v and "\r" not in v
                        and (not _float_in(v, 1, hi) or float(v) != int(float(v))))
    valid = INAMES[col]
    blank_ok = col in ("precision", "kv_precision")
    return TEXT.filter(lambda v: "\x00" not in v and "\r" not in v and (valid is None or v.strip().lower() not in valid)
                       and not (blank_ok and v.strip().lower() in NA) and not os.path.exists(v.strip()))


@settings(max_examples=50, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(col=st.sampled_from([*ICOLS, *INAMES]), data=st.data())
def test_a_bad_inference_row_gets_a_status(tmp_path, col, data):
    v = data.draw(_icell(col), label=col)
    res = _predict_rows(tmp_path, [dict(IROW, **{col: v})])
    status = str(res.loc[0, "status"])
    assert status.startswith(("invalid: ", "infeasible: ")), (col, v, status)
    assert pd.isna(res.loc[0, "predicted_output_tok_s"]), (col, v, status)


# ------------------------------------------------------------ malformed CSV files
def _corrupt_csv(kind: str, blob: bytes) -> bytes:
    text = pd.DataFrame([ROW, dict(ROW, id=2)]).to_csv(index=False)
    head, *rows = text.splitlines()
    if kind == "binary":
        return b"\x89PNG\r\n\x1a\n" + blob
    if kind == "non-utf8":
        return (head + "\n").encode() + b"\xff\xfe" + blob + b"\n"
    if kind == "nul":
        return (text[:40] + "\x00" + text[40:]).encode()
    if kind == "duplicate column":
        return (head + ",tp\n" + "\n".join(r + ",4" for r in rows) + "\n").encode()
    if kind == "long row":
        return (head + "\n" + rows[0] + ",1,2\n" + rows[1] + "\n").encode()
    if kind == "short row":
        return (head + "\n" + rows[0].rsplit(",", 3)[0] + "\n").encode()
    if kind == "header only":
        return (head + "\n").encode()
    if kind == "empty":
        return b""
    if kind == "near-miss column":
        return text.replace("micro_batch_size", "micro_batch_sise", 1).encode()
    if kind == "missing column":
        df = pd.DataFrame([ROW]).drop(columns=["hidden_size"])
        return df.to_csv(index=False).encode()
    raise AssertionError(kind)


CSV_KINDS = ["binary", "non-utf8", "nul", "duplicate column", "long row", "short row", "header only",
             "empty", "near-miss column", "missing column"]


@FAST
@given(kind=st.sampled_from(CSV_KINDS), blob=st.binary(min_size=1, max_size=200),
       cmd=st.sampled_from(["predict", "validate"]), scenario=st.booleans())
def test_malformed_csv_files(arena, kind, blob, cmd, scenario):
    data = _corrupt_csv(kind, blob)
    if scenario and kind in ("duplicate column", "long row", "short row", "header only"):
        # the same structural faults in the inference schema (a `scenario` column)
        text = pd.DataFrame([IROW, dict(IROW, id="i2")]).to_csv(index=False)
        head, *rows = text.splitlines()
        data = {"duplicate column": head + ",tp\n" + "\n".join(r + ",1" for r in rows) + "\n",
                "long row": head + "\n" + rows[0] + ",1,2\n",
                "short row": head + "\n" + rows[0].rsplit(",", 3)[0] + "\n",
                "header only": head + "\n"}[kind].encode()
    Path("bad.csv").write_bytes(data)
    try:
        args = ["predict", "bad.csv", "-o", "out.csv"] if cmd == "predict" else \
            ["validate", "bad.csv", "--out", "vout"]
        arena(args, needles=("bad.csv",))
    finally:
        Path("bad.csv").unlink()


# ------------------------------------------------------------ calibrate inputs
GEMM_OK = "m,n,k,dtype,tflops\n8192,8192,8192,bf16,700\n4096,4096,4096,bf16,600\n"


@FAST
@given(col=st.sampled_from(["m", "n", "k", "tflops", "dtype"]), data=st.data())
def test_bad_gemm_csv(arena, col, data):
    if col == "dtype":
        v = data.draw(TEXT.filter(lambda s: s.strip().lower() not in {"fp32", "tf32", "bf16", "fp16", "fp8"}
                                  and "," not in s and '"' not in s and "\n" not in s and "\r" not in s))
    else:
        v = data.draw(st.one_of(
            st.sampled_from(["inf", "nan", "-1", "0", "abc", "1e400", "2.5", str(10**30), "5000000"]),
            st.floats(max_value=0).map(repr),
            st.floats(min_value=2e3, allow_infinity=True).map(repr)
        ).filter(lambda s: col != "tflops" or not _float_in(s, 1e-12, 1088.0))
         .filter(lambda s: col == "tflops" or not _float_in(s, 1, 2**31 - 1) or float(s) != int(float(s))))
    head, r1, r2 = GEMM_OK.splitlines()
    cells = r1.split(",")
    cells["m,n,k,dtype,tflops".split(",").index(col)] = v
    Path("g.csv").write_text(f"{head}\n{','.join(cells)}\n{r2}\n")
    try:
        arena(["calibrate", "--base", "h100-sxm-80gb", "--gemm", "g.csv", "-o", "hw.toml"],
              needles=("g.csv", "--gemm", col))
    finally:
        Path("g.csv").unlink()


NCCL = (DATA / "all_reduce_perf_8_synthetic.txt").read_text()


@FAST
@given(field=st.sampled_from(["size", "time", "busbw"]), row=st.integers(0, 5), data=st.data())
def test_bad_nccl_tests_table(arena, field, row, data):
    lines = NCCL.splitlines()
    rows = [i for i, ln in enumerate(lines) if ln.split() and ln.split()[0].isdigit()]
    toks = lines[rows[row]].split()
    j = {"size": 0, "time": 5, "busbw": 7}[field]
    old = float(toks[j])
    v = data.draw(st.one_of(
        st.sampled_from(["inf", "nan", "1e400", str(10**30)] + (["-1"] if field != "size" else [])),
        st.floats(min_value=3.0, max_value=1e6).map(lambda f: repr(old * f)),
        st.floats(min_value=1e-6, max_value=0.3).map(lambda f: repr(old * f))))
    toks[j] = v
    lines[rows[row]] = " ".join(toks)
    Path("all_reduce_perf.txt").write_text("\n".join(lines) + "\n")
    try:
        arena(["calibrate", "--base", "h100-sxm-80gb", "--nccl", "all_reduce_perf.txt", "-o", "hw.toml"],
              needles=("all_reduce_perf.txt",))
    finally:
        Path("all_reduce_perf.txt").unlink()


# ------------------------------------------------------------ JSON inputs (config.json)
@FAST
@given(body=st.one_of(
    st.binary(max_size=200).map(lambda b: b"\xff" + b),
    st.sampled_from([b"", b"{", b"[1, 2]", b'"x"', b"null", b"1e999999", b"[" * 100_000,
                     b'{"a": ' * 50_000, b"\xef\xbb\xbf[]", b"NaN", b'{"hidden_size": }']),
    TEXT.map(lambda s: s.encode())).filter(lambda b: not b.strip().startswith(b"{") or b.count(b"{") > 1
                                           or not b.strip().endswith(b"}")))
def test_bad_config_json(arena, body):
    Path("config.json").write_bytes(body)
    try:
        arena(["estimate", "--model", "config.json", "--hardware", "h100-sxm-80gb", "--gpus", "8"],
              needles=("config.json",))
    finally:
        Path("config.json").unlink()


@FAST
@given(body=st.binary(max_size=300))
def test_load_json_is_a_dict_or_one_line_input_error(tmp_path, body):
    from dse.errors import InputError
    from dse.io import load_json
    p = tmp_path / "x.json"
    p.write_bytes(body)
    try:
        assert isinstance(load_json(p), dict)
    except InputError as e:
        assert "\n" not in str(e) and str(e).startswith(str(p))


# ------------------------------------------------------------ search storage
@FAST
@given(body=st.one_of(st.binary(max_size=3000),
                      st.binary(max_size=3000).map(lambda b: b"SQLite format 3\x00" + b)))
def test_any_bytes_as_storage_are_a_clean_error(tmp_path, body):
    from dse.errors import InputError
    from dse.search.storage import open_storage
    db = tmp_path / "s.db"
    db.write_bytes(body)
    before = _tree(tmp_path)
    with pytest.raises(InputError) as e:
        open_storage(f"sqlite:///{db}", None)
    assert "\n" not in str(e.value) and str(e.value).startswith("--storage: ")
    assert _tree(tmp_path) == before          # no lock file, nothing rewritten


def test_a_missing_storage_is_refused_by_readers(tmp_path):
    from dse.errors import InputError
    from dse.search.storage import open_storage
    with pytest.raises(InputError, match="must exist"):
        open_storage(f"sqlite:///{tmp_path}/no/x.db", None, create=False)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------ a real process
def test_non_utf8_argv_and_line_breaks_in_a_real_process(tmp_path):
    """Bytes that are not UTF-8 in argv (a shell passes them through) and a line break in
    a value: still one line on stderr, exit 2."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for args in ([b"predict", b"\xff\xfe.csv", b"-o", b"o.csv"],
                 [b"estimate", b"--model", b"llama3-8b", b"--hardware", b"h\nx", b"--gpus", b"8"],
                 [b"sweep", b"--model", b"llama3-8b", b"--hardware", b"h100-sxm-80gb", b"--gpus", b"8",
                  b"--global-batch", b"64", b"-o", b"\xff/x.csv"]):
        p = subprocess.run([sys.executable.encode(), b"-m", b"dse.cli", *args], capture_output=True,
                           timeout=120, cwd=tmp_path, env=env)
        err = p.stderr.decode("utf-8", "replace")
        assert p.returncode == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []


def _killed_mid_write(tmp_path: Path, argv: list[str], target: Path) -> None:
    """Run ``dse *argv`` in a subprocess whose CSV writer stalls half-way through the
    output file; kill -9 it there; the previous ``target`` must be intact."""
    target.write_text(EARLIER)
    child = textwrap.dedent(f"""
        import sys, time
        import pandas as pd
        real = pd.DataFrame.to_csv
        def stalled(self, path=None, *a, **kw):
            if path is None or not str(path).endswith({target.suffix!r}):
                return real(self, path, *a, **kw)
            with open(path, "w") as f:
                f.write("half of a new res")
                f.flush()
            print({MARKER!r}, flush=True)
            time.sleep(120)
        pd.DataFrame.to_csv = stalled
        from dse.cli import main
        sys.exit(main({argv!r}))
    """)
    kill_at_marker(child, cwd=tmp_path)
    assert target.read_text() == EARLIER


def test_predict_killed_mid_write_keeps_the_previous_output(tmp_path):
    pd.DataFrame([dict(ROW, tp=3)]).to_csv(tmp_path / "in.csv", index=False)   # infeasible: no sweep
    _killed_mid_write(tmp_path, ["predict", "in.csv", "-o", "out.csv"], tmp_path / "out.csv")


def test_sweep_killed_mid_write_keeps_the_previous_output(tmp_path):
    _killed_mid_write(tmp_path, ["sweep", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus",
                                 "1", "--global-batch", "8", "--seq", "1024", "-o", "sweep.csv"],
                      tmp_path / "sweep.csv")


def test_constants_are_what_the_messages_say():
    from dse.cli_layout import GPUS_MAX, INT_MAX
    assert GPUS_MAX == GPUS[1] and INT_MAX == POS[1] and math.log2(ICOLS["input_len"]) == 24
