"""Hardware variants from a study file (dse.spec.variants): parsing, units, errors."""

import numpy as np
import pytest

from dse.cli import main
from dse.errors import InputError
from dse.spec.hardware import GIB, MIB, get_hardware
from dse.spec.model import get_model
from dse.spec.variants import PEAKS, parse_variants
from dse.sweep.run import sweep

BASE = "a100-pcie-80gb"


def one(**kw):
    return parse_variants([{"name": "v", "base": BASE, **kw}], "study.toml")[0]


def test_multipliers_scale_the_base():
    b = get_hardware(BASE)
    v = one(hbm_bw="4x", l2="2.5x", hbm_capacity="2x", nvlink_bw="0.5x", nic_bw="2x", l2_bw="1.5x")
    assert v.name == "v"
    assert v.hbm_bw_bytes_per_s == pytest.approx(4 * b.hbm_bw_bytes_per_s)
    assert v.l2_bytes == pytest.approx(2.5 * b.l2_bytes)
    assert v.hbm_bytes == pytest.approx(2 * b.hbm_bytes)
    assert v.nvlink_bw_bytes_per_s == pytest.approx(0.5 * b.nvlink_bw_bytes_per_s)
    assert v.nic_bw_bytes_per_s == pytest.approx(2 * b.nic_bw_bytes_per_s)
    assert v.l2_bw_bytes_per_s == pytest.approx(1.5 * b.l2_bw_bytes_per_s)
    # untouched fields stay the base's
    assert v.peak_bf16_flops_per_s == b.peak_bf16_flops_per_s
    assert v.throttle == 0.0


@pytest.mark.parametrize("knob,value,field,si", [
    ("hbm_bw", "7.8TB/s", "hbm_bw_bytes_per_s", 7.8e12),
    ("hbm_bw", "3350 GB/s", "hbm_bw_bytes_per_s", 3.35e12),
    ("hbm_capacity", "160GiB", "hbm_bytes", 160 * GIB),
    ("hbm_capacity", "141GB", "hbm_bytes", 141e9),
    ("l2", "100MiB", "l2_bytes", 100 * MIB),
    ("l2", "50MB", "l2_bytes", 50e6),
    ("nvlink_bw", "900GB/s", "nvlink_bw_bytes_per_s", 900e9),
    ("clock", "1.98GHz", "clock_hz", 1.98e9),
    ("num_sms", 132, "num_sms", 132.0),
])
def test_absolute_units(knob, value, field, si):
    assert float(getattr(one(**{knob: value}), field)) == pytest.approx(si)


def test_clock_and_sms_scale_every_peak():
    b = get_hardware(BASE)
    v = one(clock="1.2x")
    assert v.clock_hz == pytest.approx(1.2 * b.clock_hz)
    for p in PEAKS:
        assert getattr(v, p) == pytest.approx(1.2 * getattr(b, p))
    assert v.l2_bw_bytes_per_s == pytest.approx(1.2 * b.l2_bw_bytes_per_s)
    s = one(num_sms=216)
    assert s.peak_bf16_flops_per_s == pytest.approx(2 * b.peak_bf16_flops_per_s)
    assert s.l2_bw_bytes_per_s == b.l2_bw_bytes_per_s


def test_base_may_be_an_earlier_variant_and_throttle_is_kept():
    c, d = parse_variants([{"name": "C", "base": BASE, "hbm_bw": "4x"},
                           {"name": "D", "base": "C", "throttle": 0.27, "throttle_clock": True}], "s.toml")
    assert d.hbm_bw_bytes_per_s == c.hbm_bw_bytes_per_s
    assert d.throttle == 0.27 and d.throttle_clock == 1.0 and c.throttle == 0.0
    assert d.name == "D" and "throttle" in d.description


@pytest.mark.parametrize("kw,field", [
    ({"hbm_bandwidth": "4x"}, "hbm_bandwidth"),          # unknown key
    ({"hbm_bw": "4 Tb/s"}, "hbm_bw"),                     # bits, not bytes: unknown unit
    ({"hbm_bw": "160GiB"}, "hbm_bw"),                     # a capacity where a bandwidth is due
    ({"hbm_bw": 4}, "hbm_bw"),                            # bare number: no unit
    ({"l2": "lots"}, "l2"),                               # unparsable
    ({"hbm_capacity": "0x"}, "hbm_capacity"),             # non-positive result
    ({"nic_bw": "-5GB/s"}, "nic_bw"),
    ({"throttle": 1.5}, "throttle"),                      # outside [0, 1]
    ({"throttle": -0.1}, "throttle"),
    ({"throttle": "27%"}, "throttle"),
    ({"throttle_clock": 1}, "throttle_clock"),
    ({"base": "a100-pcie-90gb"}, "base"),                 # unknown base
])
def test_bad_variant_names_file_variant_and_key(kw, field):
    with pytest.raises(InputError) as e:
        one(**kw)
    msg = str(e.value)
    assert msg.startswith("study.toml: ") and "'v'" in msg and field in e.value.field
    assert "\n" not in msg


def test_duplicate_and_missing_names():
    with pytest.raises(InputError, match="unique"):
        parse_variants([{"name": "a", "base": BASE}, {"name": "a", "base": BASE}], "s.toml")
    with pytest.raises(InputError, match="name"):
        parse_variants([{"base": BASE}], "s.toml")
    with pytest.raises(InputError, match="non-empty array"):
        parse_variants([], "s.toml")


BAD_STUDY = """
name = "bad_variants"
kind = "variants"
[workload]
model = "llama3-70b"
seq_len = 2048
global_batch = 1024
gpus = [64]
[[variants]]
name = "baseline"
base = "a100-pcie-80gb"
[[variants]]
name = "hot"
base = "a100-pcie-80gb"
{line}
"""


@pytest.mark.parametrize("line,needle", [("throttle = 1.5", "throttle"), ("hbm_bw = '4 furlongs'", "hbm_bw"),
                                         ("l3 = '2x'", "l3")])
def test_cli_bad_study_exits_2_with_one_line(tmp_path, capsys, line, needle):
    p = tmp_path / "bad.toml"
    p.write_text(BAD_STUDY.format(line=line))
    rc = main(["study", str(p)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1
    assert str(p) in err and "'hot'" in err and needle in err


def test_throttled_variant_never_faster_than_unthrottled_twin():
    """Every layout (feasible on both) is at least as slow with the throttle, whether it
    derates HBM only or the clocks too."""
    hws = parse_variants([
        {"name": "C", "base": BASE, "hbm_bw": "4x"},
        {"name": "D", "base": "C", "throttle": 0.27},
        {"name": "Dclk", "base": "C", "throttle": 0.27, "throttle_clock": True},
        {"name": "Dmax", "base": "C", "throttle": 1.0e-9},
    ], "s.toml")
    df = sweep(get_model("llama3-70b"), hws, 64, 1024, 2048, 1)
    t = df[df["feasible"]].pivot_table(index=["tp", "pp", "dp", "cp", "mbs", "vpp", "recompute", "zero", "sp"],
                                       columns="hardware", values="step_time_s")
    assert len(t) > 10
    # step times are float32 sums of thousands of op times: where the throttle leaves a
    # layout compute-bound the two programs round differently by up to ~5e-5 relative
    # (pp 4, cp 16, ZeRO-3 layouts of ~3,000 s); a physical slow-down is far larger
    rtol = 1e-4
    for hot in ("D", "Dclk", "Dmax"):
        assert np.all(t[hot].to_numpy() >= t["C"].to_numpy() * (1 - rtol)), hot
    assert np.all(t["Dclk"].to_numpy() >= t["D"].to_numpy() * (1 - rtol))
    assert (t["D"] > t["C"]).any()


def test_misspelt_variant_key_is_a_did_you_mean_at_load(tmp_path, capsys):
    """``[[variants]]`` keys are in the study schema (dse.spec.variants.VARIANT_FIELDS): a
    near miss is the one-line "did you mean" error, exit 2, naming the variant."""
    p = tmp_path / "typo.toml"
    p.write_text(BAD_STUDY.format(line="hbm_bww = '2x'"))
    rc = main(["study", str(p)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "variants['hot'].hbm_bww: unknown key (did you mean 'hbm_bw'?)" in err
    # the same from parse_variants itself (a codesign study's compare.variants_from)
    with pytest.raises(InputError, match=r"variants\['v'\]\.throtle: unknown key \(did you mean 'throttle'\?\)"):
        one(throtle=0.2)


def test_variant_schema_declares_every_knob():
    from dse.spec.study import STUDY_SCHEMAS, study_keys
    from dse.spec.variants import ALLOWED, KNOBS, VARIANT_FIELDS
    assert set(KNOBS) <= ALLOWED == {f.key for f in VARIANT_FIELDS}
    for kind in ("variants", "upgrade"):
        assert study_keys(kind, "variants") == ALLOWED, kind
    assert "variants" not in {f.key for f in STUDY_SCHEMAS["layout"]}
