"""dse.calibrate_te: Transformer Engine's benchmark_gemm.py output as a ``dse calibrate
--gemm`` input -- the published B300 table parses to the right GEMMs, a synthetic
pre-quantized run gives back the catalog's efficiencies, malformed tables fail with one
line and exit status 2."""

from pathlib import Path

import pytest

from dse.calibrate import calibrate, gemm_model_s, read_gemm_input
from dse.calibrate_te import is_te_benchmark, parse_te_gemm, te_gemm_text
from dse.cli import main
from dse.errors import InputError
from dse.spec.hardware import get_hardware

DATA = Path(__file__).parent / "data" / "calibrate"
PUBLISHED = DATA / "te_gemm_b300_autocast.txt"
SHAPES_MKN = [(8192, 8192, 8192), (15872, 4096, 12288), (15872, 16384, 4096), (4096, 15872, 16384),
              (2048, 7168, 2048)]


def test_published_b300_table_reads_its_bf16_column():
    df, notes = read_gemm_input(str(PUBLISHED))
    assert list(df["dtype"]) == ["bf16"] * 4
    qkv = df.iloc[0]
    # 'MxKxN' = 15872x4096x12288: m = M, k = K, n = N; 1.071 ms -> 2 M N K / t
    assert (qkv["m"], qkv["n"], qkv["k"]) == (15872, 12288, 4096)
    assert qkv["tflops"] == pytest.approx(2 * 15872 * 12288 * 4096 / 1.071e-3 / 1e12)
    text = " ".join(notes)
    assert "autocast" in text and "--pre-quantize" in text
    for col in ("FP8Current", "FP8Delayed", "MXFP8", "NVFP4"):
        assert f"column {col} not fitted (4 cells)" in text
    keys, fit_notes, _ = calibrate("b300", df, [])
    # Hopper's fitted 0.68, carried to Blackwell, sits within a few % of what these kernels reach
    assert 0.62 < keys["eff_gemm"] < 0.78 and set(keys) == {"eff_gemm"}


def test_synthetic_prequantized_run_gives_back_the_catalog_efficiencies():
    hw = get_hardware("b300")
    times = {col: [1e3 * float(gemm_model_s(hw, M, N, K, prec, eff)) for M, K, N in SHAPES_MKN]
             for col, prec, eff in (("BF16", 1, hw.eff_gemm), ("FP8Cur", 2, hw.eff_gemm_fp8),
                                    ("NVFP4", 3, hw.eff_gemm_fp4))}
    text = te_gemm_text(SHAPES_MKN, times, gpu="synthetic B300")
    assert is_te_benchmark(text)
    df, notes = parse_te_gemm("syn.txt", text)
    assert sorted(df["dtype"].unique()) == ["bf16", "fp8", "nvfp4"] and len(df) == 15
    assert "pre-quantized" in notes[0] and len(notes) == 1
    keys, _, _ = calibrate("b300", df, [])
    assert keys["eff_gemm"] == pytest.approx(float(hw.eff_gemm), rel=5e-3)
    assert keys["eff_gemm_fp8"] == pytest.approx(float(hw.eff_gemm_fp8), rel=5e-3)
    assert keys["eff_gemm_fp4"] == pytest.approx(float(hw.eff_gemm_fp4), rel=5e-3)


def test_na_cells_are_left_out_and_speedup_column_read_past():
    text = te_gemm_text([(4096, 4096, 4096), (8192, 8192, 8192)], {"BF16": [0.2, 1.5], "NVFP4": [0.05, 0.3]})
    text = text.replace("0.0500", "N/A")
    df, _ = parse_te_gemm("x.txt", text)
    assert list(df["dtype"]) == ["bf16", "bf16", "nvfp4"]


@pytest.mark.parametrize("edit, field", [
    (lambda t: t.replace("1.071", "inf"), "line"),
    (lambda t: t.replace("1.071", "fast"), "line"),
    (lambda t: t.replace("      0.392", ""), "line"),              # a cell short
    (lambda t: t.replace("1.071", "-1.071"), "line"),
    (lambda t: t.replace("BF16 ms", "BF17 ms"), "line"),           # unknown precision column
])
def test_malformed_tables_fail_with_their_line(edit, field):
    text = edit(PUBLISHED.read_text())
    with pytest.raises(InputError) as e:
        parse_te_gemm("t.txt", text)
    assert field in str(e.value) and "\n" not in str(e.value)


def test_autocast_run_without_bf16_has_nothing_to_fit():
    text = te_gemm_text([(4096, 4096, 4096)], {"FP8Cur": [0.1]}, pre_quantize=False)
    with pytest.raises(InputError, match="at least one fitted cell"):
        parse_te_gemm("a.txt", text)


def test_cli_writes_a_loadable_file(tmp_path, capsys):
    out = tmp_path / "b300_te.toml"
    assert main(["calibrate", "--base", "b300", "--gemm", str(PUBLISHED), "-o", str(out)]) == 0
    got = out.read_text()
    assert "benchmark_gemm.py output, autocast mode" in got and "eff_gemm = " in got
    assert get_hardware(str(out)).name == "b300-calibrated"
    bad = tmp_path / "bad.txt"
    bad.write_text(PUBLISHED.read_text().replace("1.071", "nan"))
    assert main(["calibrate", "--base", "b300", "--gemm", str(bad), "-o", str(tmp_path / "x.toml")]) == 2
    assert not (tmp_path / "x.toml").exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.txt" in err[0] and "BF16 ms" in err[0]


def test_a_row_above_the_base_peak_names_its_line_in_the_file(capsys):
    # B300's BF16 QKV GEMM (line 15: 1,492 TFLOP/s) cannot run on an H100 (989 peak)
    assert main(["calibrate", "--base", "h100-sxm-80gb", "--gemm", str(PUBLISHED), "-o",
                 "results/never_written.toml"]) == 2
    err = capsys.readouterr().err
    assert "(line 15)" in err and not Path("results/never_written.toml").exists()


from hypothesis import given, settings, strategies as st  # noqa: E402

_TOKENS = st.sampled_from(["Shape", "Op", "BF16", "ms", "TFLOPS", "FP8Cur", "NVFP4", "MXFP8", "N/A",
                           "Speedup", "1.5x", "0.5", "-1", "inf", "nan", "1e309", "0", "4096x4096x4096",
                           "0x1x1", "99999999999x2x2", "x", "***", "Mode:", "Autocast", "GEMM", "Benchmark",
                           "\u00e9", "1,000", "7"])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_TOKENS, max_size=9), max_size=12))
def test_any_text_parses_or_fails_with_one_input_error(lines):
    """Whatever a hostile or truncated benchmark_gemm.py output holds, the reader returns
    rows or raises the one-line InputError (exit 2), never another exception."""
    text = "GEMM Benchmark on X\n" + "\n".join(" ".join(t) for t in lines)
    try:
        df, notes = parse_te_gemm("fuzz.txt", text)
    except InputError as e:
        assert "\n" not in str(e)
        return
    assert len(df) > 0 and (df["tflops"] > 0).all() and notes
