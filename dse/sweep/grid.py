"""Enumerate every valid parallel layout for (model, GPU count, global batch, seq).

Validity rules (Megatron-LM ``arguments.py`` and ``parallel_state.py``):
  * dp * tp * pp * cp == gpus
  * tp divides num_attention_heads and num_kv_heads (query groups are split over TP)
  * pp <= num_layers; the heaviest stage holds ceil(L/pp) layers (uneven split allowed,
    documented in dse.train.memory)
  * cp divides seq_len and seq_len/cp is a multiple of 2*cp (zig-zag load balancing)
  * global_batch % dp == 0 and mbs divides global_batch/dp
  * vpp > 1 needs pp > 1, pp*vpp <= num_layers + 2 and micro-batches % pp == 0 (the +2:
    Megatron-Core's ``account_for_embedding_in_pipeline_split`` and
    ``account_for_loss_in_pipeline_split`` let the embedding and the loss fill a virtual
    stage each, as Llama 3.1 405B's 126 layers on PP16 x VPP8 do); when num_layers %
    (pp*vpp) != 0 the heaviest virtual stage holds ceil(L/(pp*vpp)) layers
    (uneven split, Megatron-Core ``--decoder-first/last-pipeline-num-layers``; Llama 3
    trained 126 layers on PP16 this way, arXiv:2407.21783 §3.3.2)
  * sp only with tp > 1; ep divides num_experts and dp*cp (dense models: ep = 1)
  * zero in {0,1,2,3}, with or without pipeline parallelism (PyTorch FSDP2 with
    pipelining, as torchtitan and Llama 3 run it; DeepSpeed alone restricts PP to ZeRO-1).
    ZeRO-2 and -3 pay their collectives every micro-batch (dse.train.step).
  * recompute in {none, selective, full, block}
Integer rules are checked here, once, in numpy; memory is the sweep's data-dependent
constraint (dse.sweep).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from dse.spec.layout import Layout
from dse.spec.model import Model

FIELDS = ("tp", "pp", "dp", "cp", "ep", "mbs", "vpp", "recompute", "zero", "sp")


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@dataclass(frozen=True)
class GridOptions:
    """Which values each axis may take (None = every valid value)."""

    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    cp: tuple[int, ...] | None = None
    ep: tuple[int, ...] | None = None
    mbs: tuple[int, ...] | None = None
    vpp: tuple[int, ...] | None = None
    recompute: tuple[int, ...] = (0, 1, 2, 3)
    zero: tuple[int, ...] = (0, 1, 2, 3)
    sp: tuple[int, ...] = (0, 1)
    max_tp: int = 64
    max_cp: int = 16
    max_mbs: int = 16
    max_vpp: int = 8
    pow2_only: bool = True


def _allowed(v: int, choice) -> bool:
    return choice is None or v in choice


def enumerate_layouts(model: Model, gpus: int, global_batch: int, seq_len: int,
                      opt: GridOptions = GridOptions()) -> dict[str, np.ndarray]:
    """All valid layouts as a dict of int32 arrays (one entry per FIELDS name)."""
    p2 = lambda x: (x & (x - 1)) == 0
    out: list[tuple[int, ...]] = []
    for tp in divisors(gpus):
        if tp > opt.max_tp or not _allowed(tp, opt.tp) or (opt.pow2_only and not p2(tp) and opt.tp is None):
            continue
        if model.num_attention_heads % tp or model.num_kv_heads % tp:
            continue
        rest = gpus // tp
        for pp in divisors(rest):
            if pp > model.num_layers or not _allowed(pp, opt.pp):
                continue
            for cp in divisors(rest // pp):
                if cp > opt.max_cp or not _allowed(cp, opt.cp):
                    continue
                if seq_len % cp or (cp > 1 and (seq_len // cp) % (2 * cp)):
                    continue
                dp = rest // (pp * cp)
                if global_batch % dp:
                    continue
                local = global_batch // dp
                eps = [1] if model.num_experts == 1 else [
                    e for e in divisors(model.num_experts) if (dp * cp) % e == 0]
                for ep in eps:
                    if not _allowed(ep, opt.ep):
                        continue
                    for mbs in divisors(local):
                        if mbs > opt.max_mbs or not _allowed(mbs, opt.mbs):
                            continue
                        m = local // mbs
                        vpps = [1] + [v for v in range(2, opt.max_vpp + 1)
                                      if pp > 1 and pp * v <= model.num_layers + 2 and m % pp == 0]
                        for vpp in vpps:
                            if not _allowed(vpp, opt.vpp):
                                continue
                            for rc, z, sp in itertools.product(opt.recompute, opt.zero, opt.sp):
                                if sp and tp == 1:
                                    continue
                                out.append((tp, pp, dp, cp, ep, mbs, vpp, rc, z, sp))
    arr = np.asarray(out, dtype=np.int32).reshape(-1, len(FIELDS))
    return {f: arr[:, i] for i, f in enumerate(FIELDS)}


def check_layout(model: Model, gpus: int, global_batch: int, seq_len: int, lay: Layout,
                 where: str = "layout") -> None:
    """Raise InputError (exit 2) unless one explicit layout obeys the rules above."""
    from dse.errors import require
    for f in FIELDS:
        v = getattr(lay, f)
        lo = 0 if f in ("recompute", "zero", "sp") else 1
        require(isinstance(v, (int, np.integer)) and v >= lo, where, f, f"must be an integer >= {lo}, but got {v!r}")
    require(lay.zero <= 3, where, "zero", f"`zero <= 3` must hold, but got (zero={lay.zero})")
    require(lay.recompute <= 3, where, "recompute", "must be none, selective, full or block")
    require(model.num_attention_heads % lay.tp == 0, where, "tp",
            f"`num_attention_heads % tp == 0` must hold, but got (num_attention_heads="
            f"{model.num_attention_heads}, tp={lay.tp})")
    require(model.num_kv_heads % lay.tp == 0, where, "tp",
            f"`num_kv_heads % tp == 0` must hold, but got (num_kv_heads={model.num_kv_heads}, tp={lay.tp})")
    cells = lay.tp * lay.pp * lay.cp
    require(gpus % cells == 0, where, "gpus",
            f"`gpus % (tp*pp*cp) == 0` must hold, but got (gpus={gpus}, tp*pp*cp={cells})")
    require(lay.dp * cells == gpus, where, "dp",
            f"`dp*tp*pp*cp == gpus` must hold, but got (dp={lay.dp}, tp*pp*cp={cells}, gpus={gpus})")
    require(lay.pp <= model.num_layers, where, "pp",
            f"`pp <= num_layers` must hold, but got (pp={lay.pp}, num_layers={model.num_layers})")
    require(seq_len % lay.cp == 0, where, "cp", f"`seq_len % cp == 0` must hold, but got (seq_len={seq_len}, cp={lay.cp})")
    require(global_batch % (lay.dp * lay.mbs) == 0, where, "mbs",
            f"`global_batch % (dp*mbs) == 0` must hold, but got (global_batch={global_batch}, dp={lay.dp}, mbs={lay.mbs})")
    if lay.vpp > 1:
        require(lay.pp > 1 and lay.pp * lay.vpp <= model.num_layers + 2, where, "vpp",
                f"`pp > 1 and pp*vpp <= num_layers + 2` must hold, but got (num_layers={model.num_layers}, "
                f"pp={lay.pp}, vpp={lay.vpp})")
    require(not (lay.sp and lay.tp == 1), where, "sp", "sequence parallelism needs tp > 1")
    require(model.num_experts % lay.ep == 0 and (lay.dp * lay.cp) % lay.ep == 0, where, "ep",
            f"`num_experts % ep == 0` and `(dp*cp) % ep == 0` must hold, but got (num_experts={model.num_experts}, "
            f"ep={lay.ep}, dp*cp={lay.dp * lay.cp})")
