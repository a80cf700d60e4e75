"""A hostile-input pass kept in the suite (issue 12): every class of bad input found is a
row of a parametrize table below.  Bad input must give exit status 2, exactly one line on
stderr naming the file/flag and the field, no traceback, and nothing written; a bad *row*
of a ``predict`` / ``validate`` file gets a status and the other rows are still
predicted; an interrupted write leaves the previous output intact."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from dse.cli import main
from tests.kill_mid_write import EARLIER, MARKER, kill_at_marker

REPO = Path(__file__).resolve().parents[1]

ROW = dict(id=1, source="T", model="GPT 7.5B", num_layers=36, hidden_size=4096, ffn_hidden_size=16384,
           num_attention_heads=32, num_kv_heads=32, vocab_size=51200, seq_length=2048,
           global_batch_size=512, micro_batch_size=16, gpu="a100-sxm-80gb", num_gpus=128, tp=4, pp=1,
           dp=32, cp=1, ep=1, vpp=1, sequence_parallel="false", recompute="full", zero_stage=0,
           precision="fp16", measured_iter_time_s=3.7, measured_mem_gib=40.0)


def files_under(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")}


def one_line_error(rc: int, err: str, needle: str) -> None:
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert len(lines) == 1, err
    assert "Traceback" not in err and lines[0].startswith("error:"), err
    assert needle in lines[0], lines[0]


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    """``dse`` in-process with cwd = tmp_path; returns (rc, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)

    def run(*args):
        rc = main([str(a) for a in args])
        cap = capsys.readouterr()
        return rc, cap.out, cap.err
    return run


def run_process(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, "-m", "dse.cli", *map(str, args)], capture_output=True,
                       text=True, timeout=300, cwd=cwd, env=env)
    return p.returncode, p.stdout, p.stderr


SWEEP = ["sweep", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "8",
         "--global-batch", "64"]


# --- output paths, checked before any computation ------------------------------------
@pytest.mark.parametrize("args,needle", [
    (SWEEP + ["-o", "."], "-o: must be a file path, but it is a directory"),
    (SWEEP + ["-o", "no/such/dir/out.csv"], "its directory 'no/such/dir' must exist"),
    (SWEEP + ["-o", ""], "-o: must be a file path"),
    (["infer", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "1", "-o", "."],
     "it is a directory"),
    (["predict", "rows.csv", "-o", "."], "it is a directory"),
    (["predict", "rows.csv", "-o", "missing/p.csv"], "must exist"),
    (["predict", "rows.csv", "-o", "afile/x/p.csv"], "must be a directory, but 'afile' is a file"),
    (["validate", "rows.csv", "--out", "afile"], "--out: must be a directory, but it is a file"),
    (["validate", "rows.csv", "--out", "afile/sub"], "--out: must be a directory that can be created"),
    (["dashboard", "x", "--storage", "sqlite:///x.db", "--port", "99999"], "1 <= port <= 65535"),
    (["dashboard", "x", "--storage", "sqlite:///x.db", "--port", "0"], "--port"),
    (["dashboard", "x", "--storage", "sqlite:///x.db", "--host", "no.such.host.invalid"], "--host: host"),
    (["estimate", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "8", "--seq", str(10**11)],
     "<= 2147483647"),
    (["estimate", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", str(2**30)], "<= 1048576"),
    (SWEEP[:6] + [str(2**30)], "<= 1048576"),
    (["estimate", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "8", "--global-batch", "64",
      "--seq", "64", "--cp", "8"], "zig-zag"),
    (["estimate", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "8", "--global-batch", "64",
      "--pp", "4", "--vpp", "2", "--mbs", "16"], "micro_batches % pp == 0"),
    (SWEEP + ["--vary", "throttle=0", "--vary", "throttle=0.2"], "is given twice"),
    (SWEEP + ["--vary", "throttle=1"], "0 <= throttle < 1"),
    (SWEEP + ["--vary", "hbm_bw=1e30x"], "within 1000x of the base"),
    (SWEEP + ["--vary", "hbm_bw=1e-30x"], "within 1000x of the base"),
])
def test_bad_output_paths_and_flags(args, needle, cli, tmp_path):
    pd.DataFrame([ROW]).to_csv(tmp_path / "rows.csv", index=False)
    (tmp_path / "afile").write_text("keep me")
    before = files_under(tmp_path)
    rc, _, err = cli(*args)
    one_line_error(rc, err, needle)
    assert files_under(tmp_path) == before
    assert (tmp_path / "afile").read_text() == "keep me"


# --- predict / validate: the file itself is malformed (exit 2) -----------------------
def _drop(col):
    return lambda p: pd.DataFrame([ROW]).drop(columns=[col]).to_csv(p, index=False)


def _rename(a, b):
    return lambda p: pd.DataFrame([ROW]).rename(columns={a: b}).to_csv(p, index=False)


def _refused_without_writing(cmd, make, needle, cli, tmp_path):
    """``dse predict`` / ``validate`` on the file ``make`` writes: a one-line error
    containing ``needle`` and nothing written."""
    make(tmp_path / "in.csv")
    before = files_under(tmp_path)
    args = ["predict", "in.csv", "-o", "out.csv"] if cmd == "predict" else ["validate", "in.csv", "--out", "v"]
    rc, _, err = cli(*args)
    one_line_error(rc, err, needle)
    assert files_under(tmp_path) == before


@pytest.mark.parametrize("cmd", ["predict", "validate"])
@pytest.mark.parametrize("make,needle", [
    (_drop("num_gpus"), "num_gpus: column is required"),
    (_drop("gpu"), "gpu: column is required"),
    (_rename("micro_batch_size", "micro_batch_sizes"), "micro_batch_sizes: unknown column, close to"),
    (lambda p: p.write_bytes(b"\x00\xff\xfe\x89PNG\x00" * 50), "csv"),
    (lambda p: p.write_text(""), "must be a readable CSV"),
    (lambda p: p.mkdir(), "csv"),
], ids=["no-num_gpus", "no-gpu", "near-miss-column", "binary", "empty", "directory"])
def test_malformed_row_file(cmd, make, needle, cli, tmp_path):
    _refused_without_writing(cmd, make, needle, cli, tmp_path)


@pytest.mark.parametrize("col", ["measured_iter_time_s", "source"])
def test_validate_needs_its_columns(col, cli, tmp_path):
    _drop(col)(tmp_path / "in.csv")
    rc, _, err = cli("validate", "in.csv", "--out", "v")
    one_line_error(rc, err, f"{col}: column is required by `dse validate`")
    assert not (tmp_path / "v").exists()


# --- predict: one bad row gets a status, the others are still predicted ---------------
@pytest.mark.parametrize("bad,status", [
    (dict(gpu="tpu-v9"), "invalid: gpu: must be a catalog name"),
    (dict(tp=3), "infeasible: tp: `num_attention_heads % tp == 0` must hold"),
    (dict(num_kv_heads=8, tp=16, dp=8), "infeasible: tp: `num_kv_heads % tp == 0` must hold"),
    (dict(tp=8, pp=4, dp=8), "infeasible: num_gpus: `tp*pp*cp*dp == num_gpus` must hold"),
    (dict(hidden_size="abc"), "invalid: hidden_size: must be a positive integer"),
    (dict(num_layers="inf"), "invalid: num_layers: must be a positive integer"),
    (dict(vocab_size=10**30), "invalid: vocab_size: must be a positive integer <= 2147483647"),
    (dict(num_layers=2**40), "invalid: num_layers: must be a positive integer <= 2147483647"),
    (dict(pp=-2), "invalid: pp: must be a positive integer"),
    (dict(seq_length=2048.5), "invalid: seq_length: must be a positive integer"),
    (dict(num_gpus=1073741824, tp=None, pp=None, dp=None), "invalid: num_gpus: must be a positive integer <= 1048576"),
    (dict(global_batch_size=16384, seq_length=131072), "invalid: global_batch_size: `global_batch_size * seq_length"),
    (dict(zero_stage=7), "invalid: zero_stage: must be 0, 1, 2 or 3"),
    (dict(sequence_parallel="yes"), "invalid: sequence_parallel: must be true or false"),
    (dict(precision="int3"), "invalid: precision: must be one of"),
    (dict(framework="jax"), "invalid: framework: must be one of"),
])
def test_predict_bad_row_gets_status_others_predicted(bad, status, cli, tmp_path):
    pd.DataFrame([ROW, dict(ROW, id=2, **bad)]).to_csv(tmp_path / "in.csv", index=False)
    rc, out, err = cli("predict", "in.csv", "-o", "out.csv")
    assert rc == 0 and err == "", err
    assert "1 ok" in out
    res = pd.read_csv(tmp_path / "out.csv")
    assert res.loc[0, "status"] == "ok" and res.loc[0, "predicted_iter_time_s"] > 0
    assert res.loc[1, "status"].startswith(status), res.loc[1, "status"]
    assert pd.isna(res.loc[1, "predicted_iter_time_s"])


# --- validate: bad measured values are excluded from the MAPE, with a count ------------
@pytest.mark.parametrize("measured", [0, -3.0, float("inf"), float("nan"), "abc", "-inf"])
def test_validate_excludes_bad_measurements(measured, cli, tmp_path):
    pd.DataFrame([ROW, dict(ROW, id=2, measured_iter_time_s=measured)]).to_csv(tmp_path / "in.csv", index=False)
    rc, out, err = cli("validate", "in.csv", "--out", "v")
    assert rc == 0 and err == "", err
    assert "excluded from the MAPE: 1 of 2 rows" in out
    overall = out.split("overall")[1].split("\n")[0]     # the bias column is signed: "-10.7%" is fine
    assert "inf%" not in out and "nan%" not in out and "inf" not in overall and "nan" not in overall
    assert " - " not in overall and not overall.rstrip().endswith("-")
    pred = pd.read_csv(tmp_path / "v" / "predictions.csv")
    assert pred.loc[1, "status"].startswith("invalid: measured_iter_time_s: must be a finite number > 0")
    mape = pd.read_csv(tmp_path / "v" / "mape_by_source.csv", index_col=0)
    assert mape.loc["overall", "rows"] == 1 and 0 <= mape.loc["overall", "mape"] < 1


@pytest.mark.parametrize("mem", ["abc", -3.0, float("inf"), 0])
def test_validate_names_a_bad_measured_memory(mem, cli, tmp_path):
    """A measured_mem_gib that is given but not a finite number > 0 is named with its row
    (it used to read as absent); the row's time is still scored, its memory is not."""
    pd.DataFrame([ROW, dict(ROW, id=2, measured_mem_gib=mem)]).to_csv(tmp_path / "in.csv", index=False)
    rc, out, err = cli("validate", "in.csv", "--out", "v")
    assert rc == 0 and err == "", err
    assert "row id 2: peak memory excluded: measured_mem_gib: must be a finite number > 0" in out
    assert "row id 1: peak memory" not in out
    assert "peak memory: 1 rows" in out
    mape = pd.read_csv(tmp_path / "v" / "mape_by_source.csv", index_col=0)
    assert mape.loc["overall", "rows"] == 2


def test_validate_with_nothing_to_score_exits_2(cli, tmp_path):
    """Nothing to score is an input error (as inference validation): each excluded row's
    reason is printed, then one error line, exit 2, and no report is written."""
    pd.DataFrame([dict(ROW, measured_iter_time_s=-1.0)]).to_csv(tmp_path / "in.csv", index=False)
    rc, out, err = cli("validate", "in.csv", "--out", "v")
    assert rc == 2 and "row id" in out and "must be a finite number > 0" in out
    assert err.count("\n") <= 1 and "measured_iter_time_s" in err and "to score" in err
    assert not (tmp_path / "v" / "predictions.csv").exists()


# --- study files ---------------------------------------------------------------------
LAYOUT = """\
name = "t1"
kind = "layout"
[workload]
model = "llama3-8b"
seq_len = 2048
global_batch = 64
gpus = 8
hardware = ["h100-sxm-80gb"]
"""
CODESIGN = """\
name = "c1"
kind = "codesign"
base = "h100-sxm-80gb"
[workload]
model = "llama3-8b"
seq_len = 2048
global_batch = 64
gpus = 8
[knobs]
hbm_bw = { low = 1.5, high = 10.0 }
[cost]
base = 8.0
[search]
trials = 4
batch = 2
"""


def _sub(text, old, new):
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize("text,needle", [
    (_sub(LAYOUT, 'kind = "layout"', 'kind = "common"'), "kind: must be one of ['layout', 'variants', 'codesign'"),
    (_sub(LAYOUT, 'kind = "layout"', 'kind = 3'), "kind: must be a string"),
    (_sub(LAYOUT, 'name = "t1"', 'name = "../../x"'), "name: must be a simple name"),
    (_sub(LAYOUT, 'name = "t1"', 'name = "/abs/dir"'), "name: must be a simple name"),
    (_sub(LAYOUT, 'name = "t1"', 'name = ""'), "name: must be a simple name"),
    (_sub(LAYOUT, 'name = "t1"', 'name = ".."'), "name: must be a simple name"),
    (_sub(LAYOUT, 'name = "t1"', 'name = "a/b"'), "name: must be a simple name"),
    (LAYOUT + '[report]\nheatmap = { hardwre = "h100-sxm-80gb" }\n', "report.heatmap.hardwre: unknown key"),
    (LAYOUT + '[report]\nbreakdown = { top = "8" }\n', "report.breakdown.top: must be an integer"),
    (LAYOUT + '[report]\nheatmap = { gpus = 9 }\n', "report.heatmap.gpus: must be one of workload.gpus"),
    (LAYOUT + '[report]\nheatmap = 3\n', "report.heatmap: must be a table"),
    (LAYOUT + '[[report.published]]\ngpus = 8\n', "report.published[0].hardware: is required"),
    (LAYOUT + 'colour = "red"\n', "colour: unknown key"),
    (_sub(LAYOUT, "gpus = 8", "gpus = 1073741824"), "workload.gpus: must be a positive integer <= 1048576"),
    (_sub(LAYOUT, "gpus = 8", "gpus = 8.5"), "workload.gpus"),
    (_sub(CODESIGN, "trials = 4", 'trials = "4"'), "search.trials: must be an integer"),
    (_sub(CODESIGN, "trials = 4", "trials = 2.7"), "search.trials: must be an integer"),
    (_sub(CODESIGN, "trials = 4", "trials = true"), "search.trials: must be an integer"),
    (_sub(CODESIGN, "trials = 4", 'trials = 4\nseed = "7"'), "search.seed: must be an integer"),
    (_sub(CODESIGN, "trials = 4", "trials = 4\nseed = -1"), "search.seed: must be an integer >= 0"),
    (_sub(CODESIGN, "batch = 2", "batch = 0"), "search.batch: must be an integer >= 1"),
    (_sub(CODESIGN, "batch = 2", 'batch = 2\nsampler = "grid"'), "search.sampler: must be one of"),
    (_sub(CODESIGN, "base = 8.0", "base = -8.0"), "cost.base: must be a finite number with `0 <= base`"),
    (_sub(CODESIGN, "base = 8.0", 'base = 8.0\nper_hbm_tb_s = "2"'), "cost.per_hbm_tb_s: must be a finite number"),
    (_sub(CODESIGN, "base = 8.0", "base = 8.0\nper_hbm_tb_s = -2.0"), "cost.per_hbm_tb_s"),
    (_sub(CODESIGN, "base = 8.0", "base = 8.0\nper_hbm = 2.0"), "cost.per_hbm: unknown key"),
    (_sub(CODESIGN, "low = 1.5, high", "high"), "knobs.hbm_bw.low: is required"),
    (_sub(CODESIGN, "low = 1.5", 'low = "1.5"'), "knobs.hbm_bw.low: must be a finite number"),
    (_sub(CODESIGN, "low = 1.5", "low = 11.0"), "knobs.hbm_bw: `low <= high` must hold"),
    (_sub(CODESIGN, "low = 1.5", "low = -1.5"), "knobs.hbm_bw.low"),
    (_sub(CODESIGN, "high = 10.0 }", 'high = 10.0, log = "no" }'), "knobs.hbm_bw.log: must be true or false"),
    (_sub(CODESIGN, "hbm_bw = { low = 1.5, high = 10.0 }", "throttle = { low = 0.0, high = 1.0 }"),
     "knobs.throttle.high"),
    (_sub(CODESIGN, "hbm_bw = { low = 1.5, high = 10.0 }", "num_sms = { low = 0.001, high = 10 }"),
     "knobs.num_sms.low"),
    (_sub(CODESIGN, "hbm_bw", "hbm_bandwidth"), "knobs.hbm_bandwidth: must be one of"),
    (_sub(CODESIGN, 'base = "h100-sxm-80gb"', "base = 1"), "base: must be a GPU name"),
], ids=lambda v: v if isinstance(v, str) and len(v) < 60 and "\n" not in v else None)
def test_bad_study_file(text, needle, cli, tmp_path):
    (tmp_path / "s.toml").write_text(text)
    before = files_under(tmp_path)
    rc, _, err = cli("study", "s.toml")
    one_line_error(rc, err, needle)
    assert files_under(tmp_path) == before          # no results/ folder, nothing outside it


def test_study_flags_and_files(cli, tmp_path):
    (tmp_path / "s.toml").write_text(LAYOUT)
    one_line_error(*cli("study", "s.toml", "--trials", "3")[::2], "--trials: applies only to a search study")
    one_line_error(*cli("study", "s.toml", "--storage", "sqlite:///x.db")[::2], "--storage")
    one_line_error(*cli("study", "s.toml", "--seed", "5")[::2], "--seed: applies only to a search study")
    one_line_error(*cli("study", "s.toml", "--seed", "-1")[::2], "[0, 2**32)")
    one_line_error(*cli("study", "s.toml", "--seed", "abc")[::2], "[0, 2**32)")
    (tmp_path / "d.toml").mkdir()
    one_line_error(*cli("study", "d.toml")[::2], "file: must be a TOML file, but it is a directory")
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("args", [
    ["study", "k.toml"],
    ["dashboard", "x", "--storage", "sqlite:///x.db", "--port", "99999"],
    ["predict", "in.csv", "-o", "."],
])
def test_no_traceback_in_a_real_process(args, tmp_path):
    (tmp_path / "k.toml").write_text(_sub(LAYOUT, 'kind = "layout"', 'kind = "common"'))
    pd.DataFrame([ROW]).to_csv(tmp_path / "in.csv", index=False)
    rc, _, err = run_process(*args, cwd=tmp_path)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


# --- nothing already written is lost ---------------------------------------------------
def test_failed_writer_leaves_previous_output_and_no_temp(tmp_path):
    from dse.report.atomic import atomic_write, write_csv
    target = tmp_path / "best.csv"
    write_csv(pd.DataFrame({"a": [1, 2]}), target, index=False)
    before = target.read_bytes()

    def bad(tmp):
        Path(tmp).write_text("partial")
        raise RuntimeError("disk full")
    with pytest.raises(RuntimeError):
        atomic_write(target, bad)
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.csv"]


def test_killed_write_leaves_previous_output(tmp_path):
    """kill -9 in the middle of a write: the complete previous file is still there."""
    target = tmp_path / "sweep.csv"
    target.write_text(EARLIER)
    child = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from dse.report.atomic import atomic_write
        def slow(tmp):
            with open(tmp, "w") as f:
                f.write("half of a new result")
                f.flush()
                print({MARKER!r}, flush=True)
                time.sleep(60)
        atomic_write({str(target)!r}, slow)
    """)
    kill_at_marker(child)
    assert target.read_text() == EARLIER


def test_failed_rerun_keeps_previous_sweep_output(cli, tmp_path):
    (tmp_path / "out.csv").write_text("earlier\n")
    rc, _, err = cli("sweep", "--model", "llama9-1t", "--hardware", "h100-sxm-80gb", "--gpus", "8",
                     "--global-batch", "64", "-o", "out.csv")
    one_line_error(rc, err, "model")
    assert (tmp_path / "out.csv").read_text() == "earlier\n"


def test_mape_table_ignores_bad_measurements():
    from dse.predict import mape_table
    pred = pd.DataFrame({"source": ["a", "a", "a", "a"], "status": ["ok"] * 4,
                         "predicted_iter_time_s": [1.0, 1.0, 1.0, 1.0],
                         "measured_iter_time_s": [1.25, 0.0, -2.0, float("inf")]})
    t = mape_table(pred)
    assert t.loc["overall", "rows"] == 1 and t.loc["overall", "mape"] == pytest.approx(0.2)


# --- search storage: empty / foreign / corrupt files; per-worker seeds -----------------
def _malformed_sqlite(p: Path) -> None:
    import sqlite3
    c = sqlite3.connect(p)
    c.execute("create table t(x)")
    c.executemany("insert into t values (?)", [("x" * i,) for i in range(400)])
    c.commit()
    c.close()
    b = bytearray(p.read_bytes())
    b[4096:4108] = b"\x07" * 12          # break the second page's header
    p.write_bytes(bytes(b))


@pytest.mark.parametrize("make,needle", [
    (lambda p: p.write_bytes(b""), "is an empty file, not a study storage"),
    (lambda p: p.write_bytes(b"\x89PNG\r\n" * 1000), "file is not a database"),
    (lambda p: p.mkdir(), "must be a SQLite file, but it is a directory"),
    (_malformed_sqlite, "database disk image is malformed"),
], ids=["empty", "foreign", "directory", "malformed"])
def test_bad_search_storage(make, needle, tmp_path):
    from dse.errors import InputError
    from dse.search.storage import open_storage
    db = tmp_path / "s.db"
    make(db)
    with pytest.raises(InputError, match=needle) as e:
        open_storage(f"sqlite:///{db}")
    assert str(e.value).startswith("--storage: ") and "\n" not in str(e.value)


def test_bad_search_storage_through_the_cli(cli, tmp_path):
    (tmp_path / "c.toml").write_text(CODESIGN)
    (tmp_path / "s.db").write_bytes(b"")
    rc, _, err = cli("study", "c.toml", "--storage", f"sqlite:///{tmp_path}/s.db")
    one_line_error(rc, err, "is an empty file, not a study storage")
    assert (tmp_path / "s.db").read_bytes() == b""


def test_workers_sharing_a_seed_get_distinct_sampler_seeds(tmp_path):
    from dse.search.runner import run_search, worker_seed
    from tests.search import toy_objective as toy
    assert worker_seed(7, 0) == 7
    assert len({worker_seed(7, w) for w in range(200)}) == 200
    url = f"sqlite:///{tmp_path}/s.db"
    kw = dict(batch_size=4, sampler="tpe", seed=3, progress=False, heartbeat_interval_s=1)
    run_search("toy", url, toy.SPACE, toy.evaluate_batch, toy.DIRECTIONS, 4, **kw)
    study = run_search("toy", url, toy.SPACE, toy.evaluate_batch, toy.DIRECTIONS, 8, **kw)
    assert study.user_attrs["dse_workers"] == 2
    params = [tuple(sorted(t.params.items())) for t in study.get_trials()]
    assert len(params) == 8 and len(set(params)) == 8     # the resumed run repeats no point


def test_study_seed_flag_overrides_the_search_seed(monkeypatch, tmp_path):
    """`dse study --seed N` reaches a search study as its [search] seed."""
    import dse.study as study
    seen = {}

    def fake(d, p, storage, trials):
        seen.update(d["search"])
        raise SystemExit(0)
    monkeypatch.setitem(study.RUNNERS, "codesign", fake)
    with pytest.raises(SystemExit):
        study.execute({"kind": "codesign", "name": "x", "search": {"seed": 1, "trials": 4}}, tmp_path / "x.toml",
                      seed=123)
    assert seen == {"seed": 123, "trials": 4}


def test_a_closed_pipe_is_not_a_traceback():
    """`dse list models | head -1`: the reader leaves early; no BrokenPipeError traceback."""
    p = subprocess.run(f"{sys.executable} -m dse.cli list models | head -1", shell=True,
                       capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr and "BrokenPipeError" not in p.stderr, p.stderr
    assert p.stdout.strip()


# --- the inference schema (rows with a `scenario`): the file, then its rows -------------
SERVE = dict(id="s1", source_id="T", model="meta-llama/Llama-2-7b-hf", hardware="h100-sxm-80gb",
             gpus=1, tp=1, pp=1, precision="fp8", engine="trtllm", scenario="fixed_batch",
             batch_or_concurrency=64, input_len=128, output_len=128, measured_output_tok_s=15000.0)


def _serve(**kw):
    rows = kw.pop("rows", None) or [dict(SERVE, **kw)]
    return lambda p: pd.DataFrame(rows).to_csv(p, index=False)


@pytest.mark.parametrize("cmd", ["predict", "validate"])
@pytest.mark.parametrize("make,needle", [
    (lambda p: pd.DataFrame([SERVE]).rename(columns={"tp": "kv_precison"}).to_csv(p, index=False),
     "kv_precison: unknown column, close to 'kv_precision'"),
    (_serve(rows=[SERVE, dict(SERVE, batch_or_concurrency=8)]), "id: must be distinct per row"),
], ids=["near-miss-column", "duplicate-id"])
def test_malformed_inference_file(cmd, make, needle, cli, tmp_path):
    _refused_without_writing(cmd, make, needle, cli, tmp_path)


def test_training_duplicate_ids_rejected(cli, tmp_path):
    pd.DataFrame([ROW, dict(ROW, tp=2, dp=64)]).to_csv(tmp_path / "in.csv", index=False)
    rc, _, err = cli("predict", "in.csv", "-o", "out.csv")
    one_line_error(rc, err, "id: must be distinct per row")


@pytest.mark.parametrize("make,needle", [
    (lambda p: pd.DataFrame([SERVE]).drop(columns=["source_id"]).to_csv(p, index=False),
     "source_id: column is required by `dse validate`"),
    (lambda p: pd.DataFrame([SERVE]).drop(columns=["measured_output_tok_s"]).to_csv(p, index=False),
     "measured_*: at least one row must have a prediction"),
    (_serve(measured_output_tok_s=float("inf")), "measured_*: at least one row"),
], ids=["no-source_id", "no-measured-column", "only-inf-measured"])
def test_validate_inference_needs_something_to_score(make, needle, cli, tmp_path):
    make(tmp_path / "in.csv")
    rc, _, err = cli("validate", "in.csv", "--out", "v")
    one_line_error(rc, err, needle)
    assert not (tmp_path / "v").exists()


def test_validate_inference_names_each_bad_measured_figure(cli, tmp_path):
    """A serving figure that is given but unusable is named with its row and column."""
    rows = [SERVE, dict(SERVE, id="s2", batch_or_concurrency=8, measured_output_tok_s="abc")]
    pd.DataFrame(rows).to_csv(tmp_path / "in.csv", index=False)
    rc, out, err = cli("validate", "in.csv", "--out", "v")
    assert rc == 0, err
    assert "excluded from the errors: 1 measured figure(s)" in out
    assert "row id s2: measured_output_tok_s: must be a finite number > 0 or blank, but got 'abc'" in out


def test_inference_predict_without_measured_or_source_columns(cli, tmp_path):
    pd.DataFrame([SERVE]).drop(columns=["source_id", "measured_output_tok_s"]).to_csv(
        tmp_path / "in.csv", index=False)
    rc, out, err = cli("predict", "in.csv", "-o", "out.csv")
    assert rc == 0, err
    assert (pd.read_csv(tmp_path / "out.csv")["status"] == "ok").all()


def test_serving_coverage_counts_the_rows_the_errors_score():
    """A measurement of -5 or inf tok/s is left out of the errors and of the band coverage."""
    from dse.infer.predict_rows import error_long, predict_inference_frame
    from dse.validate_inference import serving_coverage
    rows = [dict(SERVE, id=f"s{i}", measured_output_tok_s=m) for i, m in
            enumerate([15000.0, -5.0, float("inf")])]
    pred = predict_inference_frame(pd.DataFrame(rows), "t.csv")
    scored = set(error_long(pred)["id"])
    cov = serving_coverage(pred)
    assert scored == {"s0"}
    assert int(cov.loc["overall", "rows"]) == len(scored)


def test_predict_summary_counts_every_status_class(cli, tmp_path):
    rows = [SERVE, dict(SERVE, id="s2", hardware="a100-sxm-80gb"),        # no fp8: infeasible
            dict(SERVE, id="s3", gpus=0)]                                   # invalid
    pd.DataFrame(rows).to_csv(tmp_path / "in.csv", index=False)
    rc, out, err = cli("predict", "in.csv", "-o", "out.csv")
    assert rc == 0, err
    assert "(1 ok, 1 infeasible, 1 invalid" in out, out


INFER = ["infer", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "1"]


@pytest.mark.parametrize("extra,needle", [
    (["--precision", "fp32"], "--precision: must be bf16, fp16, fp8, fp4"),
    (["--precision", "tf32"], "fp32 / tf32 are training precisions"),
    (["--batching", "static", "--engine", "vllm"], "--engine: applies to continuous batching only"),
])
def test_infer_options_as_predict_rules(extra, needle, cli):
    rc, _, err = cli(*INFER, *extra)
    one_line_error(rc, err, needle)


def test_tail_latency_stat_is_an_invalid_row_others_predict(cli, tmp_path):
    rows = [dict(SERVE, latency_stat="p99"), dict(SERVE, id="s2", latency_stat="median"),
            dict(SERVE, id="s3", latency_stat="mean (loadgen)")]
    pd.DataFrame(rows).to_csv(tmp_path / "in.csv", index=False)
    rc, out, err = cli("predict", "in.csv", "-o", "out.csv")
    assert rc == 0, err
    st = pd.read_csv(tmp_path / "out.csv")["status"].tolist()
    assert st[0].startswith("invalid: latency_stat: must be a mean or a median") and st[1:] == ["ok", "ok"]


def test_request_longer_than_the_kv_pool_says_so(cli, tmp_path):
    """A request whose own KV exceeds the pool (the weights leave 55.8 GiB) is the flags'
    fault: exit 2 naming --prompt/--gen with both sizes; predict gives the row that status."""
    rc, _, err = cli(*INFER, "--prompt", "16777216")
    one_line_error(rc, err, "--prompt/--gen: one request's KV cache")
    assert "exceeds the KV pool" in err and "GiB of weights" in err
    pd.DataFrame([dict(SERVE, scenario="offline_throughput", input_len=16777216, precision="bf16"),
                  dict(SERVE, id="s2")]).to_csv(tmp_path / "in.csv", index=False)
    rc, _, err = cli("predict", "in.csv", "-o", "out.csv")
    st = pd.read_csv(tmp_path / "out.csv")["status"].tolist()
    assert st[0].startswith("infeasible: one request's KV cache") and st[1] == "ok", st


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(min_value=2**20 + 1, max_value=10**40), st.sampled_from(["gpus", "tp", "dp"]))
def test_api_gpu_counts_above_the_cli_bound_are_refused(n, name):
    from dse.api import _pos_int
    from dse.errors import InputError
    with pytest.raises(InputError, match="1048576"):
        _pos_int(n, name, "dse.test")


def _inference_columns():
    from dse.infer.predict_rows import REQUIRED_INFERENCE
    from dse.predict import INFERENCE_KNOWN
    return sorted(set(INFERENCE_KNOWN) | set(REQUIRED_INFERENCE))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.sampled_from(_inference_columns()), st.integers(min_value=0, max_value=10**6),
       st.sampled_from(["drop", "swap", "double"]))
def test_inference_near_miss_columns_are_refused(tmp_path_factory, col, at, how):
    """Property: a one-character typo (dropped, doubled or swapped letter) of an inference
    schema column that is not itself a column is refused, naming the typo."""
    from dse.errors import InputError
    from dse.predict import read_csv
    if len(col) < 7:                  # short names (tp, ep, gpus) have no 0.85-close typos
        return
    i = 1 + at % (len(col) - 2)
    typo = {"drop": col[:i] + col[i + 1:], "double": col[:i] + col[i] + col[i:],
            "swap": col[:i] + col[i + 1] + col[i] + col[i + 2:]}[how]
    if typo in _inference_columns():
        return
    row = {c: SERVE.get(c, "") for c in ("id", "model", "hardware", "gpus", "scenario")}
    row[typo] = "x"
    p = tmp_path_factory.mktemp("nm") / "in.csv"
    pd.DataFrame([row]).to_csv(p, index=False)
    with pytest.raises(InputError) as e:
        read_csv(str(p))
    assert e.value.field == typo and "unknown column, close to" in e.value.rule
