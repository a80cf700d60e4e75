"""The power / energy / cost model (dse.cost.energy): formula, properties, bad input."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.cost.energy import (BUSY_POWER_FRAC, IDLE_FRAC, add_energy_columns, gpu_power_w,
                             parse_tokens)
from dse.errors import InputError


def frame(step_time_s=10.0, compute_s=8.0, gpus=64, hardware="h100-sxm-80gb", feasible=True):
    return pd.DataFrame({"hardware": [hardware], "gpus": [gpus], "global_batch": [1024],
                         "seq_len": [4096], "step_time_s": [step_time_s],
                         "tokens_per_s": [1024 * 4096 / step_time_s], "compute_s": [compute_s],
                         "recompute_s": [0.0], "optimizer_s": [0.0], "feasible": [feasible]})


def test_power_formula_end_points():
    assert gpu_power_w(700.0, 0.0) == pytest.approx(IDLE_FRAC * 700)
    full = IDLE_FRAC * 700 + (1 - IDLE_FRAC) * 700 * BUSY_POWER_FRAC
    assert gpu_power_w(700.0, 1.0) == pytest.approx(full)
    assert gpu_power_w(700.0, 2.0) == pytest.approx(full)          # clipped
    assert gpu_power_w(700.0, 1.0) < 700.0


def test_columns_by_hand():
    out = add_energy_columns(frame(), {"h100-sxm-80gb": 700.0}, gpu_hour_usd=2.0,
                             train_tokens=1e12)
    p = 700 * IDLE_FRAC + 700 * (1 - IDLE_FRAC) * BUSY_POWER_FRAC * 0.8
    tokens = 1024 * 4096
    assert out["gpu_power_w"][0] == pytest.approx(p)
    assert out["energy_kwh_per_mtok"][0] == pytest.approx(p * 64 * 10 / tokens * 1e6 / 3.6e6)
    assert out["gpu_hours_per_mtok"][0] == pytest.approx(64 * 10 / 3600 / tokens * 1e6)
    assert out["usd_per_mtok"][0] == pytest.approx(2.0 * 64 * 10 / 3600 / tokens * 1e6)
    assert out["train_days"][0] == pytest.approx(1e12 / (tokens / 10) / 86400)
    assert out["train_usd"][0] == pytest.approx(out["usd_per_mtok"][0] * 1e6)
    assert out["train_mwh"][0] == pytest.approx(out["energy_kwh_per_mtok"][0] * 1e6 / 1e3)


def test_no_price_no_cost_column_and_nan_for_infeasible():
    df = frame(step_time_s=float("nan"), compute_s=float("nan"), feasible=False)
    out = add_energy_columns(df, {"h100-sxm-80gb": 700.0})
    assert "usd_per_mtok" not in out and "train_days" not in out
    assert math.isnan(out["energy_kwh_per_mtok"][0])


@settings(max_examples=50, deadline=None)
@given(t=st.floats(0.1, 1e3), k=st.floats(1.01, 10.0), busy=st.floats(0.0, 1.0))
def test_energy_grows_with_step_time(t, k, busy):
    """At the same compute time, a longer step (more exposed comm) costs more energy."""
    hw = {"h100-sxm-80gb": 700.0}
    a = add_energy_columns(frame(t, busy * t), hw)["energy_kwh_per_mtok"][0]
    b = add_energy_columns(frame(k * t, busy * t), hw)["energy_kwh_per_mtok"][0]
    assert b > a


@settings(max_examples=50, deadline=None)
@given(price=st.floats(0.01, 100.0), k=st.floats(0.1, 10.0))
def test_cost_linear_in_price(price, k):
    hw = {"h100-sxm-80gb": 700.0}
    a = add_energy_columns(frame(), hw, gpu_hour_usd=price)["usd_per_mtok"][0]
    b = add_energy_columns(frame(), hw, gpu_hour_usd=k * price)["usd_per_mtok"][0]
    assert b == pytest.approx(k * a, rel=1e-9)


def test_pue_scales_energy():
    hw = {"h100-sxm-80gb": 700.0}
    a = add_energy_columns(frame(), hw)["energy_kwh_per_mtok"][0]
    b = add_energy_columns(frame(), hw, pue=1.3)["energy_kwh_per_mtok"][0]
    assert b == pytest.approx(1.3 * a)


def test_price_per_hardware():
    df = pd.concat([frame(), frame(hardware="a100-sxm-80gb")], ignore_index=True)
    out = add_energy_columns(df, {"h100-sxm-80gb": 700.0, "a100-sxm-80gb": 400.0},
                             gpu_hour_usd=[3.0, 1.5])
    assert out["usd_per_mtok"][0] == pytest.approx(2 * out["usd_per_mtok"][1])


@pytest.mark.parametrize("kw", [{"gpu_hour_usd": -1.0}, {"gpu_hour_usd": [1.0, 2.0, 3.0]},
                                {"pue": 0.5}])
def test_bad_input(kw):
    with pytest.raises(InputError):
        add_energy_columns(frame(), {"h100-sxm-80gb": 700.0, "a100-sxm-80gb": 400.0}, **kw)


def test_parse_tokens():
    assert parse_tokens("15T") == 1.5e13
    assert parse_tokens("300B") == 3e11
    assert parse_tokens("1e12") == 1e12
    for bad in ("abc", "-5T", "0", ""):
        with pytest.raises(InputError):
            parse_tokens(bad)


def test_numpy_and_jitted_jax_agree():
    import jax
    import jax.numpy as jnp
    x = np.linspace(-0.5, 1.5, 9)
    got = jax.jit(gpu_power_w)(jnp.float32(700.0), jnp.asarray(x, jnp.float32))
    np.testing.assert_allclose(np.asarray(got), gpu_power_w(700.0, x), rtol=1e-6)
