"""Enumerate every valid parallel layout for (model, GPU count, global batch, seq).

Validity is :mod:`dse.spec.layout_rules` (the one set of rules, also used for explicit
layouts): this module generates candidates from the divisor structure (tp | gpus,
pp | gpus/tp, cp | gpus/(tp pp), dp the rest; mbs | global_batch/dp; ep | num_experts;
every vpp, recompute, ZeRO and SP value the options allow) and keeps the rows the rules
mark valid.  ZeRO 0-3 are allowed with or without pipeline parallelism (PyTorch FSDP2
with pipelining, as torchtitan and Llama 3 run it; DeepSpeed alone restricts PP to
ZeRO-1).  Memory is the sweep's data-dependent constraint (dse.sweep).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from dse.spec.layout import Layout
from dse.spec.layout_rules import FIELDS, layout_mask
from dse.spec.layout_rules import check_layout as _check
from dse.spec.model import Model


def divisors(n: int) -> list[int]:
    """Divisors of ``n`` in increasing order, in O(sqrt n)."""
    small, large = [], []
    i = 1
    while i * i <= n:
        if n % i == 0:
            small.append(i)
            if i != n // i:
                large.append(n // i)
        i += 1
    return small + large[::-1]


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
                      opt: GridOptions = GridOptions(), framework: int = 0) -> dict[str, np.ndarray]:
    """All valid layouts (:func:`dse.spec.layout_rules.layout_mask`, under the framework
    profile ``framework``) within the options, as a dict of int32 arrays (one entry per
    FIELDS name)."""
    cols = candidate_layouts(model, gpus, global_batch, opt)
    keep = layout_mask(model, gpus, global_batch, seq_len, cols, framework)
    return {f: cols[f][keep].astype(np.int32) for f in FIELDS}


def candidate_layouts(model: Model, gpus: int, global_batch: int,
                      opt: GridOptions = GridOptions()) -> dict[str, np.ndarray]:
    """The options' product grid before the layout rules: every tp x pp x cp that divides
    the GPUs (dp the rest, dividing the global batch), with the options' ep, mbs, vpp,
    recompute, zero and sp (int64 arrays, one per FIELDS name).  :func:`enumerate_layouts`
    keeps the valid ones; :func:`dse.spec.layout_rules.layout_violations` on it says which
    rule a set of fixed fields breaks, so a value the options fix (``opt.pp``, ``opt.ep``,
    ``opt.mbs``, ``opt.vpp``) enters even where it breaks a rule the loops would otherwise
    skip it by (pp above the layers, ep not dividing the experts, mbs not dividing the
    batch share; a dp not dividing the batch enters with mbs 1) or lies above the search
    caps (``max_mbs``, ``max_vpp``: caps on what a blank field is searched over, not limits
    on a stated value)."""
    p2 = lambda x: (x & (x - 1)) == 0
    inner = [list(opt.recompute), list(opt.zero), list(opt.sp)]
    blocks = []
    for tp in divisors(gpus):
        if tp > opt.max_tp or not _allowed(tp, opt.tp) or (opt.pow2_only and not p2(tp) and opt.tp is None):
            continue
        rest = gpus // tp
        for pp in divisors(rest):
            if (pp > model.num_layers and opt.pp is None) or not _allowed(pp, opt.pp):
                continue
            for cp in divisors(rest // pp):
                if cp > opt.max_cp or not _allowed(cp, opt.cp):
                    continue
                dp = rest // (pp * cp)
                eps = (list(opt.ep) if opt.ep is not None
                       else divisors(int(model.num_experts)))
                # a dp that does not divide the batch enters once (mbs 1), for the rule to name
                mbss = (list(opt.mbs) if opt.mbs is not None else [1] if global_batch % dp
                        else [b for b in divisors(global_batch // dp) if b <= opt.max_mbs])
                vpps = list(opt.vpp) if opt.vpp is not None else list(range(1, opt.max_vpp + 1))
                if not (eps and mbss and vpps and all(inner)):
                    continue
                grid = np.array(list(itertools.product([tp], [pp], [dp], [cp], eps, mbss, vpps, *inner)),
                                dtype=np.int64)
                blocks.append(grid)
    arr = np.concatenate(blocks) if blocks else np.zeros((0, len(FIELDS)), dtype=np.int64)
    return {f: arr[:, i] for i, f in enumerate(FIELDS)}


def check_layout(model: Model, gpus: int, global_batch: int, seq_len: int, lay: Layout,
                 where: str = "layout", framework: int = 0) -> None:
    """Raise InputError (exit 2) unless one explicit layout obeys the rules
    (:func:`dse.spec.layout_rules.check_layout`)."""
    _check(model, gpus, global_batch, seq_len, lay, where, framework)
