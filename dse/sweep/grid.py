"""Enumerate every valid parallel layout for (model, GPU count, global batch, seq).

Validity rules (Megatron-LM ``arguments.py`` and ``parallel_state.py``):
  * dp * tp * pp * cp == gpus
  * tp divides num_attention_heads and num_kv_heads (query groups are split over TP)
  * pp <= num_layers; the heaviest stage holds ceil(L/pp) layers (uneven split allowed,
    documented in dse.train.memory)
  * cp divides seq_len and seq_len/cp is a multiple of 2*cp (zig-zag load balancing)
  * global_batch % dp == 0 and mbs divides global_batch/dp
  * vpp > 1 needs pp > 1, num_layers % (pp*vpp) == 0 and micro-batches % pp == 0
  * sp only with tp > 1; ep divides num_experts and dp*cp (dense models: ep = 1)
  * zero in {0,1,2,3}; ZeRO-2/3 only without pipeline parallelism (DeepSpeed rejects
    ZeRO-2/3 with PP; Megatron's FSDP likewise runs with pp = 1)
  * recompute in {none, selective, full}
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
    recompute: tuple[int, ...] = (0, 1, 2)
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
                                      if pp > 1 and model.num_layers % (pp * v) == 0 and m % pp == 0]
                        for vpp in vpps:
                            if not _allowed(vpp, opt.vpp):
                                continue
                            for rc, z, sp in itertools.product(opt.recompute, opt.zero, opt.sp):
                                if (sp and tp == 1) or (z >= 2 and pp > 1):
                                    continue
                                out.append((tp, pp, dp, cp, ep, mbs, vpp, rc, z, sp))
    arr = np.asarray(out, dtype=np.int32).reshape(-1, len(FIELDS))
    return {f: arr[:, i] for i, f in enumerate(FIELDS)}


def layouts_to_pytree(cols: dict[str, np.ndarray]) -> Layout:
    return Layout(**{f: cols[f] for f in FIELDS})
