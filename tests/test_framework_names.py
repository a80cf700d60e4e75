"""The ``framework`` column takes the names issue 11 groups under each profile (NeMo and
Megatron-Bridge are megatron, Megatron-DeepSpeed is deepspeed, llm-foundry / Composer are
fsdp, torchtitan is fsdp2): an alias predicts what its profile predicts and takes its
profile's interval cell; an unknown framework stays a row status naming the column."""

import pandas as pd

from dse.intervals import training_cell
from dse.predict import predict_frame
from dse.spec.layout import FRAMEWORK, FRAMEWORK_NAMES, canonical_framework
from tests.helpers import validation_dir

ALIASES = {"NeMo": "megatron", "Megatron-Bridge": "megatron", "megatron-lm": "megatron",
           "Megatron-DeepSpeed": "deepspeed", "llm-foundry": "fsdp", "composer": "fsdp",
           "torchtitan": "fsdp2", "fsdp1": "fsdp"}


def test_every_name_maps_to_a_profile():
    assert set(FRAMEWORK.values()) == set(FRAMEWORK_NAMES)
    for alias, name in ALIASES.items():
        assert canonical_framework(alias) == name
    assert canonical_framework("maxtext") == "maxtext"          # unknown: unchanged


def test_alias_rows_predict_as_their_profile(tmp_path):
    base = pd.read_csv(validation_dir() / "calibration.csv").iloc[0]
    names = list(ALIASES) + sorted(set(ALIASES.values())) + ["maxtext"]
    rows = pd.DataFrame([base.copy().rename(None) for _ in names])
    rows["framework"], rows["id"] = names, names
    path = tmp_path / "rows.csv"
    rows.to_csv(path, index=False)
    out = predict_frame(pd.read_csv(path), str(path)).set_index("id")
    for alias, name in ALIASES.items():
        assert out.loc[alias, "status"] == "ok"
        assert out.loc[alias, "predicted_iter_time_s"] == out.loc[name, "predicted_iter_time_s"]
        assert out.loc[alias, "interval_basis"] == out.loc[name, "interval_basis"]
        assert training_cell({"framework": alias, "gpu": base["gpu"]}) == training_cell(
            {"framework": name, "gpu": base["gpu"]})
    assert out.loc["maxtext", "status"].startswith("invalid: framework: must be one of")


def test_sweep_and_compare_bands_take_the_profile_cell():
    """A sweep / compare frame's band (dse.intervals.sweep_band, as `dse sweep --framework NeMo`
    and `dse.sweep(framework="torchtitan")` call it) names the cell of the alias's profile."""
    import pandas as pd

    from dse.intervals import sweep_band
    frame = pd.DataFrame({"hardware": ["h100-sxm-80gb"], "step_time_s": [1.0]})
    for alias, name in ALIASES.items():
        got, want = sweep_band(frame, alias), sweep_band(frame, name)
        assert got["interval_basis"].iloc[0] == want["interval_basis"].iloc[0]
        assert got["step_time_lo_s"].iloc[0] == want["step_time_lo_s"].iloc[0]
