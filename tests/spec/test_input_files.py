"""Every shipped input file loads through its schema; the schemas agree with the code
that consumes them; the validator reports every problem of a file at once, suggests near
misses, and turns binary files into one clean line; ``dse list`` renders the schemas."""

from __future__ import annotations

from pathlib import Path

import pytest

from dse.cli import main
from dse.errors import InputError
from dse.spec.schema import Field, validate_table

REPO = Path(__file__).resolve().parents[2]
STUDIES = sorted((REPO / "studies").glob("*.toml"))
TOPOLOGIES = sorted(p for p in (REPO / "studies" / "topologies").glob("*.toml") if "faults" not in p.name)


def test_every_catalog_entry_loads():
    from dse.io import load_toml
    from dse.spec.hardware import CATALOG as HW, catalog as hw_catalog
    from dse.spec.model import CATALOG as MODELS, catalog as model_catalog
    assert set(hw_catalog()) == set(load_toml(HW)) and len(hw_catalog()) >= 15
    assert set(model_catalog()) == set(load_toml(MODELS)) and len(model_catalog()) >= 7


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.name)
def test_every_study_file_loads(path, monkeypatch):
    from dse.studies.common import load_study, parse_workload
    monkeypatch.chdir(REPO)                      # files refer to studies/... relatively
    d, p = load_study(str(path.relative_to(REPO)))
    if "workload" in d:                          # a serving study names its models itself
        parse_workload(d, str(p), hardware_required=False)


@pytest.mark.parametrize("path", sorted((REPO / "tests" / "data" / "hf").glob("*.json")), ids=lambda p: p.name)
def test_every_stored_hf_config_loads(path):
    from dse.spec.model import get_model
    assert get_model(str(path)).num_params() > 0


@pytest.mark.parametrize("path", TOPOLOGIES, ids=lambda p: p.name)
def test_every_topology_file_loads(path):
    from dse.sim import load_topology
    assert load_topology(path).num_gpus > 0


def test_the_example_fault_file_loads_against_its_topology():
    from dse.sim import load_faults, load_topology
    topo = load_topology(REPO / "studies" / "topologies" / "dgx-h100-rail-1024.toml")
    assert len(load_faults(REPO / "studies" / "topologies" / "faults-example.toml", topo).faults) == 4


def test_schemas_agree_with_the_code_that_reads_them():
    from dse.search.runner import SAMPLERS
    from dse.spec.layout import RECOMPUTE
    from dse.spec.study import CODESIGN_KNOBS, COST_KEYS, LAYOUT_KEYS, SAMPLERS as S, STUDY_KINDS
    from dse.studies import faults
    from dse.studies.codesign import COST_TERMS, KNOB_UNITS
    from dse.study import KINDS
    assert STUDY_KINDS == KINDS
    assert set(CODESIGN_KNOBS) == set(KNOB_UNITS) and set(COST_KEYS) == set(COST_TERMS)
    assert S == SAMPLERS and LAYOUT_KEYS == faults.LAYOUT_KEYS
    assert faults.PIN_KEYS == set(LAYOUT_KEYS) | {"recompute", "sp"} and set(RECOMPUTE) >= {"none", "block"}
    from dse.spec import study as spec_study
    from dse.studies import codesign, serving
    assert tuple(spec_study.CODESIGN_OBJECTIVES) == tuple(codesign.OBJECTIVES)
    assert {k: d for k, (_, d, _) in spec_study.TCO_FIELDS_UNITS.items()} == spec_study.TCO_DEFAULTS
    assert spec_study.SERVING_PRECISIONS == serving.PRECISIONS
    assert (spec_study.SERVING_MAX_BATCH, spec_study.SERVING_MAX_LEN) == (serving.MAX_BATCH, serving.MAX_LEN)
    fields = {f.key for f in spec_study.SERVING_STUDY}
    assert fields == serving.TOP_KEYS
    assert {f.key for f in next(f for f in spec_study.SERVING_STUDY if f.key == "serving").fields} == \
        serving.SERVING_KEYS


SCHEMA = (Field("n", lo=0.0, lo_open=True, required=True), Field("i", kind="integer", lo=1, default=1),
          Field("b", kind="bool", default=False), Field("s", kind="string", choices=("x", "y"), default="x"),
          Field("t", kind="table", fields=(Field("hardware", kind="string"),)))


def test_every_problem_of_a_table_in_one_line():
    with pytest.raises(InputError) as e:
        validate_table({"n": -1, "i": 2.5, "b": "yes", "s": "z", "t": {"hardwre": "a"}, "colour": 1},
                       SCHEMA, "f.toml")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("f.toml: colour: unknown key")
    for part in ("n: `n > 0` must hold, but got (n=-1)", "i: must be an integer, but got 2.5",
                 "b: must be true or false, but got 'yes'", "s: must be one of ['x', 'y'], but got 'z'",
                 "t.hardwre: unknown key (did you mean 'hardware'?)"):
        assert part in msg, part
    assert e.value.field == "colour"                       # the first problem is field and rule


@pytest.mark.parametrize("value,rule", [
    (True, "must be a number"), ("1", "must be a number"), (float("nan"), "finite"),
    (float("inf"), "finite"), (0, "`n > 0`")])
def test_numbers_are_finite_numbers(value, rule):
    with pytest.raises(InputError, match=rule):
        validate_table({"n": value}, SCHEMA, "f.toml")


def test_a_required_key_missing_and_defaults_filled():
    with pytest.raises(InputError, match="n: is required"):
        validate_table({}, SCHEMA, "f.toml")
    assert validate_table({"n": 2}, SCHEMA, "f.toml") == {"n": 2.0, "i": 1, "b": False, "s": "x", "t": None}


def test_hardware_file_reports_every_problem_at_once(tmp_path):
    """Issue 9: a custom GPU used to be reported one error at a time."""
    from dse.spec.hardware import get_hardware
    f = tmp_path / "hw.toml"
    f.write_text('[x]\nbase = "h100-sxm-80gb"\nhbm_gb = 96\nnvlink_gb_s = -1\nthrottle_clock = "no"\n')
    with pytest.raises(InputError) as e:
        get_hardware(str(f))
    msg = str(e.value)
    assert "x.hbm_gb: unknown key (did you mean 'hbm_gib'?)" in msg
    assert "x.nvlink_gb_s: `nvlink_gb_s > 0` must hold" in msg and "x.throttle_clock: must be true or false" in msg


BINARY = b"\x89PNG\r\n\x1a\n\x00\xff\xfe" * 20
TRAIN = ["--gpus", "8", "--tp", "8", "--global-batch", "8", "--seq", "1024"]


@pytest.mark.parametrize("name,args", [
    ("hw.toml", ["estimate", "--model", "llama3-8b", "--hardware", "hw.toml", *TRAIN]),
    ("m.toml", ["estimate", "--model", "m.toml", "--hardware", "h100-sxm-80gb", *TRAIN]),
    ("config.json", ["estimate", "--model", "config.json", "--hardware", "h100-sxm-80gb", *TRAIN]),
    ("s.toml", ["study", "s.toml"]),
    ("t.toml", ["trace", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", *TRAIN, "--out", "tr",
                "--simulate", "--topology", "t.toml"]),
])
def test_binary_files_are_one_clean_line(name, args, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_bytes(BINARY)
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {name}: file: must be UTF-8 text"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_list_fields_renders_every_key(capsys):
    from dse.spec.hardware import HARDWARE_FIELDS
    from dse.spec.model import MODEL_FIELDS
    from dse.spec.network_schema import DIM_FIELDS
    for what, fields, prefix in (("hardware", HARDWARE_FIELDS, ""), ("models", MODEL_FIELDS, ""),
                                 ("topology", DIM_FIELDS, "dim[].")):
        assert main(["list", what, "--fields"] if what != "topology" else ["list", what]) == 0
        keys = {ln.split()[0] for ln in capsys.readouterr().out.splitlines() if ln.strip()}
        assert {prefix + f.key for f in fields} <= keys, what
    assert main(["list", "studies", "--fields"]) == 0
    out = capsys.readouterr().out
    for line in ("search.seed", "knobs.throttle.high", "scenario[].fault[kind=straggler].rank",
                 "report.published[].speedup"):
        assert any(ln.split()[:1] == [line] for ln in out.splitlines()), line
    thr = next(ln for ln in out.splitlines() if ln.startswith("knobs.throttle.high"))
    assert "0 <= high < 1" in thr


def test_list_knobs_docs_come_from_the_hardware_schema(capsys):
    from dse.spec.hardware import HARDWARE_FIELDS
    assert main(["list", "knobs"]) == 0
    out = capsys.readouterr().out
    hbm = next(f for f in HARDWARE_FIELDS if f.key == "hbm_bw_tb_s")
    line = next(ln for ln in out.splitlines() if ln.startswith("hbm_bw "))
    assert hbm.key in line and hbm.doc in line


def test_list_help_names_every_top_level_key(capsys):
    from dse.spec.hardware import HARDWARE_FIELDS
    from dse.spec.network_schema import TOPOLOGY_FIELDS
    assert main(["list", "--help"]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    for f in HARDWARE_FIELDS + TOPOLOGY_FIELDS:
        assert f" {f.key}," in flat or f" {f.key} " in flat or f" {f.key}." in flat, f.key


def test_later_problems_do_not_repeat_the_allowed_keys():
    with pytest.raises(InputError) as e:
        validate_table({"n": 1, "aa": 1, "bb": 2}, SCHEMA, "f.toml")
    assert str(e.value).count("allowed keys are") == 1 and "bb: unknown key" in str(e.value)


HF_BASE = {"num_hidden_layers": 8, "hidden_size": 512, "num_attention_heads": 8,
           "num_key_value_heads": 2, "vocab_size": 1000, "intermediate_size": 1024,
           "hidden_act": "silu", "rms_norm_eps": 1e-5}


@pytest.mark.parametrize("kw, field, rule", [
    # HF divides the layer index by these (Llama4TextConfig, Gemma3 layer kinds): 0 is no
    # "absent" but a config transformers cannot load, and must not become the default
    ({"model_type": "llama4_text", "attention_chunk_size": 64, "no_rope_layer_interval": 0},
     "no_rope_layer_interval", "must be a positive integer"),
    ({"model_type": "gemma3_text", "sliding_window": 128, "sliding_window_pattern": 0},
     "sliding_window_pattern", "must be a positive integer"),
    # two window kinds and no layer_types to say which layer has which: not one silently
    ({"sliding_window": 128, "attention_chunk_size": 64}, "sliding_window",
     "must be null or 0 when attention_chunk_size is set"),
    ({"sliding_window": -1}, "sliding_window", "must be 0 (= absent) or a positive integer"),
    ({"sliding_window": 4096.0}, "sliding_window", "must be 0 (= absent) or a positive integer"),
    ({"sliding_window": 128, "layer_types": ["full_attention", "foo"] + ["full_attention"] * 6},
     "layer_types", "must hold full_attention and one of"),
    ({"sliding_window": 128, "layer_types": ["sliding_attention", "chunked_attention"]
      + ["full_attention"] * 6, "attention_chunk_size": 64}, "layer_types", "must hold full_attention"),
    ({"layer_types": ["sliding_attention"] * 8}, "sliding_window", "must be a positive integer"),
])
def test_bad_hf_window_keys_are_one_clean_line(kw, field, rule, tmp_path, monkeypatch, capsys):
    import json
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**HF_BASE, **kw}))
    assert main(["estimate", "--model", "config.json", "--hardware", "h100-sxm-80gb", *TRAIN]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: config.json: {field}: {rule}"), err


@pytest.mark.parametrize("extra, field", [
    ("sliding_window = -1", "m.sliding_window"), ("sliding_window = 1e30", "m.sliding_window"),
    ('sliding_window = "abc"', "m.sliding_window"), ("sliding_window = true", "m.sliding_window"),
    ("sliding_window = inf", "m.sliding_window"), ("sliding_window = nan", "m.sliding_window"),
    ("sliding_window = 4096\nwindow_layers = 9", "window_layers"),
    ("sliding_window = 4096\nattention_chunk_size = 8192", "attention_chunk_size"),
    ("window_layers = 4", "window_layers"),
])
def test_bad_toml_window_fields_are_one_clean_line(extra, field, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.toml").write_text("[m]\nnum_layers = 8\nhidden_size = 512\nffn_hidden_size = 1024\n"
                                     "num_attention_heads = 8\nnum_kv_heads = 2\nvocab_size = 1000\n"
                                     + extra + "\n")
    assert main(["estimate", "--model", "m.toml", "--hardware", "h100-sxm-80gb", *TRAIN]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: m.toml: {field}: "), err
