"""dse.calibrate: fits recover known parameters from data the model itself generated;
nccl-tests output parses; the written TOML loads with get_hardware."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dse.calibrate import calibrate, gemm_model_s, nccl_text, parse_nccl
from dse.cli import main
from dse.spec.hardware import get_hardware

DATA = Path(__file__).parent / "data" / "calibrate"
SIZES = 2.0 ** np.arange(10, 34)
SHAPES = [(8192, 8192, 8192), (4096, 14336, 4096), (16384, 4096, 1024), (2048, 2048, 2048),
          (128, 8192, 8192)]


def _gemm_rows(hw, eff, dtype="bf16", prec=1):
    t = [float(gemm_model_s(hw, m, n, k, prec, eff)) for m, n, k in SHAPES]
    return pd.DataFrame([dict(m=m, n=n, k=k, dtype=dtype, tflops=2 * m * n * k / ti / 1e12,
                              precision=prec) for (m, n, k), ti in zip(SHAPES, t)])


def test_fit_recovers_model_parameters():
    base = get_hardware("h100-sxm-80gb")
    true = base.replace(nvlink_bw_bytes_per_s=420e9, nvlink_latency_s=1.7e-6,
                        nic_bw_bytes_per_s=45e9, nic_latency_s=5e-6, eff_gemm=0.77)
    runs = [parse_nccl("intra.txt", nccl_text(true, "all_reduce", 8, SIZES)),
            parse_nccl("inter.txt", nccl_text(true, "all_reduce", 32, SIZES)),
            parse_nccl("ag.txt", nccl_text(true, "all_gather", 8, SIZES))]
    gemm = pd.concat([_gemm_rows(true, 0.77), _gemm_rows(true.replace(eff_gemm_fp8=0.55), 0.55, "fp8", 2)])
    keys, notes, hw = calibrate("h100-sxm-80gb", gemm, runs)
    assert keys["eff_gemm"] == pytest.approx(0.77, rel=2e-3)
    assert keys["eff_gemm_fp8"] == pytest.approx(0.55, rel=2e-3)
    assert keys["nvlink_gb_s"] == pytest.approx(420, rel=0.01)
    assert keys["nvlink_latency_us"] == pytest.approx(1.7, rel=0.02)
    assert keys["nic_gb_s"] == pytest.approx(45, rel=0.01)
    assert keys["nic_latency_us"] == pytest.approx(5.0, rel=0.02)
    assert all("MAPE 0.0%" in n or "MAPE 0.1%" in n for n in notes)


def test_parse_real_layout_and_busbw_convention():
    run = parse_nccl(str(DATA / "all_reduce_perf_2x8_h100_a3mega.txt"))
    assert run.op == "all_reduce" and run.ranks == 16 and len(run.sizes_bytes) == 8
    assert run.times_s[-1] == pytest.approx(47535e-6)
    # busbw = size / time * 2(n-1)/n  (nccl-tests PERFORMANCE.md): 338.8 GB/s at 8 GiB
    assert run.busbw_bytes_per_s[-1] / 1e9 == pytest.approx(338.8, abs=0.1)


def test_parse_old_header_without_root_column():
    text = ("# all_reduce_perf\n#  Rank  0 Group  0 Pid 1 on a device 0 [0x01] GPU\n"
            "#  Rank  1 Group  0 Pid 2 on a device 1 [0x02] GPU\n"
            "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
            "     1048576        262144   float     sum    20.00   52.43   52.43  0e+00    20.00   52.43   52.43  0e+00\n"
            "     2097152        524288   float     sum    35.00   59.92   59.92  0e+00    35.00   59.92   59.92  0e+00\n")
    run = parse_nccl("x.txt", text)
    assert run.ranks == 2 and np.allclose(run.times_s, [20e-6, 35e-6])


def test_a_garbled_table_row_is_refused_and_log_lines_are_not():
    """A row whose size is not a number (here ``1O48576``, a letter O) is named, not
    skipped; NCCL's own log lines between the rows are left alone."""
    from dse.errors import InputError
    head = ("# all_reduce_perf\n#  Rank  0 Group  0 Pid 1 on a device 0 [0x01] GPU\n"
            "#  Rank  1 Group  0 Pid 2 on a device 1 [0x02] GPU\n"
            "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n")
    good = ("     1048576        262144   float     sum    20.00   52.43   52.43  0e+00    20.00   52.43   52.43  0e+00\n"
            "host:12:12 [0] NCCL INFO comm 0x5 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
            "     2097152        524288   float     sum    35.00   59.92   59.92  0e+00    35.00   59.92   59.92  0e+00\n")
    assert len(parse_nccl("x.txt", head + good).sizes_bytes) == 2
    bad = good.replace("     2097152 ", "     2O97152 ")
    with pytest.raises(InputError, match="must start with its size in bytes"):
        parse_nccl("x.txt", head + bad)


def test_cli_writes_loadable_toml(tmp_path, capsys):
    out = tmp_path / "cal.toml"
    rc = main(["calibrate", "--base", "h100-sxm-80gb", "--gemm", str(DATA / "gemm_mamf.csv"),
               "--nccl", str(DATA / "all_reduce_perf_8_synthetic.txt"), "-o", str(out),
               "--name", "my-h100"])
    assert rc == 0, capsys.readouterr().err
    hw, ref = get_hardware(str(out)), get_hardware("h100-sxm-80gb")
    assert hw.name == "my-h100" and 'base = "h100-sxm-80gb"' in out.read_text()
    assert 0.78 < hw.eff_gemm < 0.86                      # 792 of 989 TFLOP/s, plus quantization
    # the synthetic file was made from the catalog itself: the fit gives it back
    assert hw.nvlink_bw_bytes_per_s == pytest.approx(ref.nvlink_bw_bytes_per_s, rel=0.01)
    assert hw.nvlink_latency_s == pytest.approx(ref.nvlink_latency_s, rel=0.02)
    assert hw.hbm_bw_bytes_per_s == ref.hbm_bw_bytes_per_s


@pytest.mark.parametrize("args,needle", [
    (["--base", "tpu-v9", "--gemm", str(DATA / "gemm_mamf.csv")], "base"),
    (["--base", "my_gpu.toml", "--gemm", str(DATA / "gemm_mamf.csv")], "--base"),   # not --name
    (["--base", "h100-sxm-80gb"], "at least one"),
    (["--base", "h100-sxm-80gb", "--nccl", str(DATA / "README.md")], "ranks"),
    (["--base", "h100-sxm-80gb", "--gemm", str(DATA / "README.md")], "fields like the header"),
])
def test_bad_input_exit_2(tmp_path, capsys, args, needle):
    rc = main(["calibrate", *args, "-o", str(tmp_path / "x.toml")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and needle in err


def test_fit_recovers_fp4_efficiency_on_blackwell():
    """NVFP4 rows fit ``eff_gemm_fp4`` (the fp4 peak's own fraction), not the fp8 one."""
    true = get_hardware("b200").replace(eff_gemm_fp4=0.47)
    gemm = pd.concat([_gemm_rows(true, 0.47, "nvfp4", 3),
                      _gemm_rows(true.replace(eff_gemm_fp8=0.66), 0.66, "fp8", 2)])
    keys, _, hw = calibrate("b200", gemm, [])
    assert keys["eff_gemm_fp4"] == pytest.approx(0.47, rel=2e-3)
    assert keys["eff_gemm_fp8"] == pytest.approx(0.66, rel=2e-3)
    assert "eff_gemm" not in keys


def test_fp4_rows_need_fp4_tensor_cores(tmp_path, capsys):
    rc = main(["calibrate", "--base", "h100-sxm-80gb", "--gemm",
               str(DATA / "gemm_b200_mxfp4_cublaslt.csv"), "-o", str(tmp_path / "h.toml")])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "mxfp4" in err[0] and "h100-sxm-80gb" in err[0]
    assert not (tmp_path / "h.toml").exists()


def test_published_b200_fp4_sample_gives_a_kernel_ceiling(tmp_path):
    """The cuBLASLt MXF4 sample (DeepGEMM PR #348's table) fits an ``eff_gemm_fp4`` above
    the in-serving constant (a kernel ceiling, like MAMF's bf16 fit on H100 above the
    in-training ``eff_gemm``) and below 1; the written TOML loads with it."""
    out = tmp_path / "b200.toml"
    assert main(["calibrate", "--base", "b200", "--gemm",
                 str(DATA / "gemm_b200_mxfp4_cublaslt.csv"), "-o", str(out)]) == 0
    hw = get_hardware(str(out))
    base = get_hardware("b200")
    assert base.eff_gemm_fp4 < hw.eff_gemm_fp4 < 1.0
    assert hw.eff_gemm_fp8 == base.eff_gemm_fp8


def test_nvls_all_reduce_fit_above_the_line_rate_is_flagged(tmp_path):
    """A full GB200 NVL72 rack's all-reduce (coreweave/nccl-tests PR #43, 72 ranks) reaches a
    busbw a ring at eff_nvlink cannot: the fit is written, with the NVLS warning in the
    report and the file (dse.calibrate.in_switch_note)."""
    run = parse_nccl(str(DATA / "all_reduce_perf_72_gb200_nvl72.txt"))
    assert run.ranks == 72 and run.busbw_bytes_per_s[-2] / 1e9 == pytest.approx(839.2, abs=0.2)
    keys, notes, _ = calibrate("gb200", None, [run])
    assert keys["nvlink_gb_s"] > 900 and any("NVLS" in n and "WARNING" in n for n in notes)
    out = tmp_path / "gb200.toml"
    assert main(["calibrate", "--base", "gb200", "--nccl", str(DATA / "all_reduce_perf_72_gb200_nvl72.txt"),
                 "-o", str(out)]) == 0
    assert "NVLS" in out.read_text()
    # a ring-rate run of the same machine (the model's own times) carries no warning
    ring = parse_nccl("ring.txt", nccl_text(get_hardware("gb200"), "all_reduce", 72, run.sizes_bytes,
                                            gpus_per_host=4))
    assert not any("NVLS" in n for n in calibrate("gb200", None, [ring])[1])
