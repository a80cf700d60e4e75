"""Command-line flags of one explicit layout and their validation, shared by every
subcommand that takes one (`estimate`, `trace`, `sensitivity`): a module of its own so
the subcommands' modules need not import `dse.cli` (no import cycle)."""

from __future__ import annotations

import argparse


INT_MAX = 2**31 - 1       # integer flags stay in the range every array type holds exactly
GPUS_MAX = 2**20          # the largest job the layout enumeration takes (1,048,576 GPUs)


def _positive_int(s: str, hi: int = INT_MAX) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, but got {s!r}") from None
    if v <= 0 or v > hi:
        raise argparse.ArgumentTypeError(f"must be a positive integer <= {hi}, but got {s!r}")
    return v


def _gpu_count(s: str) -> int:
    """A GPU count: ``1 <= gpus <= 2^20``."""
    return _positive_int(s, GPUS_MAX)


def _tcp_port(s: str) -> int:
    v = _positive_int(s)
    if v > 65535:
        raise argparse.ArgumentTypeError(f"`1 <= port <= 65535` must hold, but got {s!r}")
    return v


def layout_args(s: argparse.ArgumentParser) -> None:
    """Flags of one explicit layout (shared by `estimate` and `trace`)."""
    s.add_argument("--model", required=True, help="catalog name, config.json or .toml")
    s.add_argument("--hardware", required=True, help="catalog name or .toml file")
    s.add_argument("--gpus", required=True, type=_gpu_count, help="GPUs in the job")
    s.add_argument("--global-batch", type=_positive_int, default=1024, help="sequences per step")
    s.add_argument("--seq", type=_positive_int, default=None,
                   help="tokens per sequence (default: the model's seq_length)")
    s.add_argument("--precision", default="bf16", help="fp32 | tf32 | bf16 | fp16 | fp8")
    s.add_argument("--attention", default="flash", help="flash | unfused (pre-2022 Megatron)")
    s.add_argument("--framework", default="megatron", help="megatron | deepspeed | fsdp (FSDP1, llm-foundry) | fsdp2 (torchtitan): memory accounting, pipeline sends, ZeRO-3 gathers (dse/spec/frameworks.py)")
    s.add_argument("--tp-overlap", action="store_true", help="TP comm/GEMM overlap (--tp-comm-overlap; needs --sp)")
    helps = {"tp": "tensor-parallel size", "pp": "pipeline-parallel stages",
             "dp": "data-parallel size (default: gpus / (tp x pp x cp))",
             "cp": "context-parallel size", "ep": "expert-parallel size",
             "mbs": "micro-batch size (sequences)", "vpp": "virtual pipeline stages per rank"}
    for f in ("tp", "pp", "dp", "cp", "ep", "mbs", "vpp"):
        s.add_argument(f"--{f}", type=_positive_int, default=None if f == "dp" else 1, help=helps[f])
    s.add_argument("--recompute", default="none",
                   help="none | selective | full | block (full on the fewest layers that fit)")
    s.add_argument("--zero", type=int, default=1, help="ZeRO stage (0-3)")
    s.add_argument("--sp", action="store_true", help="sequence parallelism")


def resolve_layout(a):
    """(model, hardware, workload, layout) from layout flags, validated (exit 2 if bad)."""
    from dse.spec.hardware import get_hardware
    from dse.spec.layout import (Layout, Workload, attention_code, framework_code, precision_code,
                                 recompute_code)
    from dse.spec.model import get_model
    from dse.sweep.grid import check_layout
    model = get_model(a.model)
    hw = get_hardware(a.hardware)
    seq = a.seq or model.seq_length
    dp = a.dp or max(a.gpus // (a.tp * a.pp * a.cp), 1)
    lay = Layout(tp=a.tp, pp=a.pp, dp=dp, cp=a.cp, ep=a.ep, mbs=a.mbs, vpp=a.vpp,
                 recompute=recompute_code(a.recompute), zero=a.zero, sp=int(a.sp))
    check_layout(model, a.gpus, a.global_batch, seq, lay, where="command line")
    from dse.spec.hardware import check_precision
    check_precision(hw, precision_code(a.precision), "--precision")
    wl = Workload(global_batch=a.global_batch, seq_len=seq, precision=precision_code(a.precision),
                  attention=attention_code(a.attention), framework=framework_code(a.framework),
                  tp_overlap=int(a.tp_overlap))
    return model, hw, wl, lay


