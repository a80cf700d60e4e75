"""Shared test fixtures-as-functions (no pytest magic, so helpers' conftest stays theirs)."""

from dse.spec.hardware import get_hardware
from dse.spec.model import get_model


def a100():
    return get_hardware("a100-sxm-80gb")


def h100():
    return get_hardware("h100-sxm-80gb")


def llama70b():
    return get_model("llama3-70b")
