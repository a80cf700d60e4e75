"""A hardware file may start from ``base = "<catalog name>"`` and set measured
efficiencies (what ``dse calibrate`` writes)."""

import pytest

from dse.errors import InputError
from dse.spec.hardware import get_hardware


def test_base_and_efficiency_overrides(tmp_path):
    f = tmp_path / "hw.toml"
    f.write_text('[my-h100]\nbase = "h100-sxm-80gb"\neff_gemm = 0.8\nnvlink_gb_s = 400\n')
    hw, ref = get_hardware(str(f)), get_hardware("h100-sxm-80gb")
    assert hw.name == "my-h100" and hw.generation == ref.generation
    assert hw.eff_gemm == 0.8 and hw.nvlink_bw_bytes_per_s == 400e9
    assert hw.hbm_bw_bytes_per_s == ref.hbm_bw_bytes_per_s and hw.eff_attn == ref.eff_attn


@pytest.mark.parametrize("body,needle", [
    ('base = "tpu-v9"', "base"),
    ('base = "h100-sxm-80gb"\neff_gemm = 1.3', "eff_gemm <= 1"),
    ('base = "h100-sxm-80gb"\nnvlink_gb_s = -1', "nvlink_gb_s > 0"),
])
def test_bad_base_files(tmp_path, body, needle):
    f = tmp_path / "hw.toml"
    f.write_text(f"[x]\n{body}\n")
    with pytest.raises(InputError, match=needle):
        get_hardware(str(f))


def test_catalog_names_in_any_letter_case(tmp_path):
    """``H100-SXM-80GB`` (as datasheets and the calibration files write it) is the catalog's
    ``h100-sxm-80gb``, on the command line and as a file's ``base``; other names still fail."""
    ref = get_hardware("h100-sxm-80gb")
    assert get_hardware("H100-SXM-80GB") is ref and get_hardware(" GB200 ") is get_hardware("gb200")
    f = tmp_path / "hw.toml"
    f.write_text('[mine]\nbase = "H100-SXM-80GB"\neff_gemm = 0.8\n')
    assert get_hardware(str(f)).hbm_bw_bytes_per_s == ref.hbm_bw_bytes_per_s
    with pytest.raises(InputError, match="catalog name"):
        get_hardware("H100-SXM-80")
