import json

import pytest

from dse.errors import InputError
from dse.spec.hardware import catalog as hw_catalog, get_hardware, hardware_from_dict
from dse.spec.model import catalog as model_catalog, get_model

REQUIRED_HW = ["a100-pcie-80gb", "a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm-80gb",
               "h100-nvl-94gb", "gh200", "b300", "gb300", "rtx-pro-6000", "mi300x", "mi325x",
               "mi355x",
               "h200-sxm-141gb", "b200", "gb200"]
REQUIRED_MODELS = ["llama3-8b", "llama3-70b", "llama3-405b", "llama2-7b", "llama2-13b",
                   "llama2-70b", "gpt3-175b"]


def test_catalog_names_present():
    assert set(REQUIRED_HW) <= set(hw_catalog())
    assert set(REQUIRED_MODELS) <= set(model_catalog())


@pytest.mark.parametrize("name,params_b", [("llama3-8b", 8.03), ("llama3-70b", 70.6),
                                           ("llama2-7b", 6.74), ("gpt3-175b", 174.6)])
def test_parameter_counts_match_published(name, params_b):
    assert get_model(name).num_params() / 1e9 == pytest.approx(params_b, rel=0.01)


def test_a100_numbers_in_si():
    hw = get_hardware("a100-sxm-80gb")
    assert hw.peak_bf16_flops_per_s == pytest.approx(312e12)
    assert hw.hbm_bw_bytes_per_s == pytest.approx(2.039e12)
    assert hw.nvlink_domain_gpus == 8


def _base():
    d = dict(hw_catalog_raw())
    return d


def hw_catalog_raw():
    from dse.io import tomllib
    from dse.spec.hardware import CATALOG
    return tomllib.loads(CATALOG.read_text())["a100-sxm-80gb"]


@pytest.mark.parametrize("key,val,msg", [
    ("hbm_bw_tb_s", 0, "hbm_bw_tb_s > 0"),
    ("nvlink_gb_s", -5, "nvlink_gb_s > 0"),
    ("throttle", 1.5, "0 <= throttle < 1"),
    ("throttle", -0.1, "0 <= throttle < 1"),
    ("throttle", 1, "0 <= throttle < 1"),              # no bandwidth left: inf step times
    ("throttle_clock", "no", "must be true or false"),
    ("bogus_key", 1, "unknown key"),
    ("num_sms", "many", "must be an integer"),
    ("num_sms", 0.001, "must be an integer"),
    ("nvlink_domain", 0.5, "must be an integer"),
    ("hbm_bw_tb_s", float("inf"), "finite"),
    ("peak_tflops_bf16", float("nan"), "finite"),
    ("nic_latency_us", float("inf"), "finite"),
    ("hbm_gib", 1e30, "float32-safe"),
    ("description", 3, "must be a string"),
])
def test_bad_hardware_fields(key, val, msg):
    d = hw_catalog_raw()
    d[key] = val
    with pytest.raises(InputError, match=msg):
        hardware_from_dict(d, "x.toml", "gpu")


def test_malformed_toml(tmp_path):
    p = tmp_path / "hw.toml"
    p.write_text("[gpu\nnum_sms = 1")
    with pytest.raises(InputError, match="valid TOML"):
        get_hardware(str(p))


def test_hf_config(tmp_path):
    c = {"num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,
         "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
         "max_position_embeddings": 8192, "hidden_act": "silu", "rms_norm_eps": 1e-5}
    p = tmp_path / "llama" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps(c))
    m = get_model(str(p))
    assert m.num_params() == get_model("llama3-8b").num_params()


def test_hf_config_bad_heads(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 100, "num_attention_heads": 3,
                             "vocab_size": 10}))
    with pytest.raises(InputError, match="hidden_size % num_attention_heads"):
        get_model(str(p))


@pytest.mark.parametrize("key,val,msg", [
    ("tie_word_embeddings", "false", "must be true or false"),
    ("head_dim", 1.5, "positive integer"),
    ("hidden_act", ["silu"], "must be a string"),
])
def test_bad_hf_config_values(tmp_path, key, val, msg):
    import json
    c = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
         "num_attention_heads": 4, "vocab_size": 100, key: val}
    p = tmp_path / "m" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps(c))
    with pytest.raises(InputError, match=msg):
        get_model(str(p))


@pytest.mark.parametrize("field,value", [("num_sms", 9223372036854775807), ("nvlink_domain", 99999999999999999999),
                                         ("gpu_power_w", 1e30), ("tdp_w", 1e7)])
def test_hardware_counts_and_power_have_sanity_ceilings(tmp_path, field, value):
    """A typo-sized count or power is bad input, not a design point that runs."""
    from dse.errors import InputError
    from dse.spec.hardware import get_hardware
    p = tmp_path / "hw.toml"
    p.write_text(f'[x]\nbase = "h100-sxm-80gb"\n{field} = {value}\n')
    with pytest.raises(InputError, match=f"{field} <="):
        get_hardware(str(p))
