"""dse.io: every bad TOML/JSON file is one InputError line (file, field, rule), never a
traceback, for the loaders themselves and through the spec, study and CLI paths."""

from pathlib import Path

import pytest

from dse.errors import InputError
from dse.io import load_json, load_toml, read_text


def _bad_files(tmp_path, ext):
    """(label, path, needle in the rule) for each kind of bad file."""
    d = tmp_path / f"adir.{ext}"
    d.mkdir()
    binary = tmp_path / f"bin.{ext}"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe")
    latin1 = tmp_path / f"latin1.{ext}"
    latin1.write_bytes('name = "caf\xe9"\n'.encode("latin-1") if ext == "toml"
                       else '{"name": "caf\xe9"}'.encode("latin-1"))
    deep = tmp_path / f"deep.{ext}"
    n = 200_000
    deep.write_text(("a = " + "[" * n + "]" * n + "\n") if ext == "toml" else ("[" * n + "]" * n))
    syntax = tmp_path / f"syntax.{ext}"
    syntax.write_text("[x\n" if ext == "toml" else '{"a": 1,,}')
    return [
        ("directory", d, "directory"),
        ("missing", tmp_path / f"nope.{ext}", "must exist"),
        ("binary", binary, "UTF-8"),
        ("latin-1", latin1, "UTF-8"),
        ("deep", deep, "nest too deeply" if ext == "json" else "TOML"),
        ("syntax", syntax, "valid TOML" if ext == "toml" else "valid JSON"),
    ]


def _check(e: InputError, path):
    msg = str(e)
    assert len(msg.splitlines()) == 1, msg
    assert e.where == str(path) and msg.startswith(f"{path}: ")


@pytest.mark.parametrize("kind", ["directory", "missing", "binary", "latin-1", "deep", "syntax"])
def test_bad_toml_is_one_input_error(tmp_path, kind):
    label, path, needle = next(c for c in _bad_files(tmp_path, "toml") if c[0] == kind)
    with pytest.raises(InputError) as e:
        load_toml(path)
    _check(e.value, path)
    assert needle in e.value.rule


@pytest.mark.parametrize("kind", ["directory", "missing", "binary", "latin-1", "deep", "syntax"])
def test_bad_json_is_one_input_error(tmp_path, kind):
    label, path, needle = next(c for c in _bad_files(tmp_path, "json") if c[0] == kind)
    with pytest.raises(InputError) as e:
        load_json(path)
    _check(e.value, path)
    assert needle in e.value.rule


@pytest.mark.parametrize("text,got", [("[1, 2]", "list"), ("3", "int"), ('"s"', "str"),
                                      ("null", "NoneType")])
def test_json_top_level_must_be_an_object(tmp_path, text, got):
    p = tmp_path / "c.json"
    p.write_text(text)
    with pytest.raises(InputError) as e:
        load_json(p)
    _check(e.value, p)
    assert e.value.field == "json" and "JSON object" in e.value.rule and got in e.value.rule


def test_where_names_the_file_in_messages(tmp_path):
    with pytest.raises(InputError) as e:
        load_toml(tmp_path / "nope.toml", where="studies/x.toml")
    assert str(e.value) == "studies/x.toml: file: must exist"


def test_good_files_and_byte_order_mark(tmp_path):
    t = tmp_path / "a.toml"
    t.write_bytes(b'\xef\xbb\xbf[gpu]\nx = 1\n')
    assert load_toml(t) == {"gpu": {"x": 1}}
    j = tmp_path / "config.json"
    j.write_text('{"hidden_size": 8}', encoding="utf-8-sig")
    assert load_json(j) == {"hidden_size": 8}
    assert read_text(t) == "[gpu]\nx = 1\n"


def test_spec_loaders_use_it(tmp_path):
    """get_hardware / get_model / load_study / load_topology route through dse.io, and a
    top-level value that is not a table is named."""
    from dse.sim.topology import load_topology
    from dse.spec.hardware import get_hardware
    from dse.spec.model import get_model
    from dse.studies.common import load_study
    bin_toml = tmp_path / "bin.toml"
    bin_toml.write_bytes(b"\xff\xfe\x00\x01")
    for load in (get_hardware, get_model, load_study, load_topology):
        with pytest.raises(InputError, match="UTF-8"):
            load(str(bin_toml))
    (tmp_path / "dir.toml").mkdir()
    for load in (get_hardware, get_model, load_study):
        with pytest.raises(InputError, match="directory"):
            load(str(tmp_path / "dir.toml"))
    scalar = tmp_path / "scalar.toml"
    scalar.write_text("x = 1\n")
    with pytest.raises(InputError, match=r"x: must be a table"):
        get_hardware(str(scalar))
    with pytest.raises(InputError, match=r"x: must be a table"):
        get_model(str(scalar))
    js = tmp_path / "config.json"
    js.write_text("[1]")
    with pytest.raises(InputError, match="JSON object"):
        get_model(str(js))


def test_cli_bad_model_json_exits_2(tmp_path, capsys):
    from dse.cli import main
    p = tmp_path / "config.json"
    p.write_bytes(b"\x00\xff" * 10)
    rc = main(["estimate", "--model", str(p), "--hardware", "h100-sxm-80gb", "--gpus", "8"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "UTF-8" in err


@pytest.mark.parametrize("act, ok", [("banana", False), (7, False), ("relu", True), ("silu", True)])
def test_hf_config_activation_must_be_a_known_name(tmp_path, act, ok):
    """An activation transformers would not resolve is refused (it used to read as a plain
    MLP); a known name is read, gated or plain."""
    import json
    from dse.spec.model import get_model
    cfg = json.loads((Path(__file__).parent / "data" / "hf" / "qwen3-30b-a3b.json").read_text())
    cfg["hidden_act"] = act
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    if ok:
        assert get_model(str(p)).gated_mlp == (act == "silu")
    else:
        with pytest.raises(InputError, match="hidden_act: must be"):
            get_model(str(p))
