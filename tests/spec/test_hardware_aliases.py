"""Vendor spellings of one catalog SKU resolve to it (dse.spec.hardware.get_hardware);
an ambiguous or unknown name stays a one-line error naming the catalog."""

import pytest

from dse.errors import InputError
from dse.spec.hardware import HARDWARE_ALIASES, catalog, get_hardware


@pytest.mark.parametrize("name,key", [
    ("H100", "h100-sxm-80gb"), ("NVIDIA H100 SXM", "h100-sxm-80gb"), ("h100_sxm5_80gb", "h100-sxm-80gb"),
    ("DGX H200", "h200-sxm-141gb"), ("GB200 NVL72", "gb200"), ("AMD Instinct MI300X", "mi300x"),
    ("A100-SXM4-80GB", "a100-sxm-80gb"), ("H100 NVL", "h100-nvl-94gb"), ("B200", "b200"),
    ("RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000"), ("NVIDIA H20", "h20"), ("H20 96GB", "h20"),
    ("NVIDIA L40S", "l40s"), ("L4", "l4"), ("H200 NVL", "h200-nvl-141gb"),
])
def test_vendor_spellings_resolve(name, key):
    assert get_hardware(name).name == catalog()[key].name


@pytest.mark.parametrize("name", ["A100", "A10G", "zzz", ""])
def test_ambiguous_or_unknown_names_are_refused(name):
    with pytest.raises(InputError, match="must be a catalog name"):
        get_hardware(name)


def test_every_alias_points_into_the_catalog():
    assert set(HARDWARE_ALIASES.values()) <= set(catalog())
