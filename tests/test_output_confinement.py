"""No output escapes results/, no device is written or read as a file, and a degree too
large for the sweep's integer arrays is a one-line error (dse.report.atomic, dse.io)."""

import os
from pathlib import Path

import pytest

from dse.cli import main
from dse.errors import InputError
from dse.io import read_text
from dse.report.atomic import OUTPUT_ROOTS_ENV, check_output_dir, check_output_file


@pytest.fixture
def in_project(tmp_path, monkeypatch):
    """A working directory with a results/ folder, and no extra output roots."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(OUTPUT_ROOTS_ENV, raising=False)
    (tmp_path / "results").mkdir()
    return tmp_path


def test_outputs_inside_results_pass(in_project):
    assert check_output_file("results/x.csv", "-o") == Path("results/x.csv")
    (in_project / "results" / "sub").mkdir()
    check_output_file("results/sub/y.csv", "-o")
    check_output_dir("results/new", "--out", create=False)
    assert not (in_project / "results" / "new").exists()


@pytest.mark.parametrize("path", ["x.csv", "results/../x.csv", "results/../../x.csv"])
def test_outputs_outside_results_are_refused(in_project, path):
    with pytest.raises(InputError, match="must lie inside results/"):
        check_output_file(path, "-o")
    with pytest.raises(InputError, match="must lie inside results/"):
        check_output_dir(path.removesuffix(".csv"), "--out", create=False)


def test_a_symlink_out_of_results_is_refused(in_project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    os.symlink(elsewhere, in_project / "results" / "link")
    with pytest.raises(InputError, match="must lie inside results/"):
        check_output_file("results/link/x.csv", "-o")


def test_a_trailing_separator_is_not_a_file(in_project):
    with pytest.raises(InputError, match="ends with a path separator"):
        check_output_file("results/x.csv/", "-o")


def test_the_cli_refuses_an_output_outside_results(in_project, capsys):
    rc = main(["infer", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "1",
               "-o", str(in_project / "elsewhere.csv")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "-o" in err and "results/" in err
    assert not (in_project / "elsewhere.csv").exists()


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="no /dev/null")
def test_devices_are_neither_outputs_nor_inputs(monkeypatch):
    monkeypatch.setenv(OUTPUT_ROOTS_ENV, "/dev")
    with pytest.raises(InputError, match="regular file"):
        check_output_file("/dev/null", "-o")
    with pytest.raises(InputError, match="regular file"):
        read_text("/dev/zero" if Path("/dev/zero").exists() else "/dev/null")


@pytest.mark.parametrize("flag", ["--ep", "--attn-dp"])
def test_a_degree_beyond_int32_is_one_line(flag, capsys):
    rc = main(["infer", "--model", "mixtral-8x7b", "--hardware", "h100-sxm-80gb", "--gpus", "8",
               flag, "99999999999999999999"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and flag in err
