"""Every command states what it assumed (model and parameter count, sequence length,
global batch, precision, framework) in one ``assumed:`` line; the sequence length is an
explicit default (4096), never a model config's ``max_position_embeddings``."""

import json

import pytest

from dse.cli import build_parser, main
from dse.cli_layout import DEFAULT_SEQ

SMALL = ["--model", "llama3-8b", "--global-batch", "8"]


def _line(out: str) -> str:
    """The ``assumed:`` line (with its wrapped continuation lines joined)."""
    lines = out.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("assumed:")]
    assert len(starts) == 1, out
    i = starts[0]
    block = [lines[i]]
    while i + 1 < len(lines) and lines[i + 1].startswith("  ") and not lines[i + 1].startswith("  memory"):
        i += 1
        block.append(lines[i].strip())
    return " ".join(block)


def test_default_seq_is_explicit_and_stated_in_help():
    assert DEFAULT_SEQ == 4096
    for cmd in ("sweep", "estimate", "trace", "compare", "sensitivity"):
        sp = build_parser()._subparsers._group_actions[0].choices[cmd]
        act = next(x for x in sp._actions if "--seq" in x.option_strings)
        assert act.default == 4096, cmd
        assert "max_position_embeddings is never used" in act.help, cmd


@pytest.mark.parametrize("argv, seq_text", [
    (["estimate", "--hardware", "a100-sxm-80gb", "--gpus", "8", "--tp", "2"], "4096 (default)"),
    (["estimate", "--hardware", "a100-sxm-80gb", "--gpus", "8", "--tp", "2", "--seq", "4096"], "4096,"),
    (["sweep", "--hardware", "a100-sxm-80gb", "--gpus", "8", "--seq", "1024", "--top", "1"], "1024,"),
    (["compare", "--hardware", "a100-sxm-80gb", "--gpus", "8", "--seq", "1024"], "1024,"),
])
def test_commands_print_one_assumption_line(argv, seq_text, capsys):
    main(argv[:1] + SMALL + argv[1:])
    line = _line(capsys.readouterr().out)
    assert "model llama3-8b (8.03 B params)" in line
    assert f"seq length {seq_text}" in line
    assert "global batch 8," in line and "precision bf16" in line and "framework megatron" in line


def test_trace_prints_assumptions(tmp_path, capsys):
    rc = main(["trace", *SMALL, "--hardware", "a100-sxm-80gb", "--gpus", "8", "--tp", "2", "--seq", "1024",
               "--framework", "deepspeed", "--out", str(tmp_path / "t")])
    assert rc == 0
    line = _line(capsys.readouterr().out)
    assert "seq length 1024," in line and "framework deepspeed" in line


def test_hf_config_context_length_is_not_the_sequence_length(tmp_path, capsys):
    c = {"num_hidden_layers": 4, "hidden_size": 1024, "intermediate_size": 4096,
         "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 32000,
         "max_position_embeddings": 131072, "hidden_act": "silu"}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(c))
    main(["estimate", "--model", str(p), "--hardware", "h100-sxm-80gb", "--gpus", "8", "--global-batch", "8"])
    assert "seq length 4096 (default)" in _line(capsys.readouterr().out)


def test_sensitivity_prints_assumptions(tmp_path, capsys):
    main(["sensitivity", *SMALL, "--hardware", "a100-sxm-80gb", "--gpus", "8", "--tp", "2",
          "-o", str(tmp_path / "s")])
    assert "seq length 4096 (default)" in _line(capsys.readouterr().out)
