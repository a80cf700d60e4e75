"""Faults injected into a replay: slow links, failed links, stragglers, packet loss.

TOML schema (one ``[[fault]]`` table per fault)::

    [[fault]]
    kind = "slow_link"      # bandwidth / factor
    link = "n3.gpu5->nvsw"  # a link name, or an fnmatch pattern ("rail5.*")
    factor = 4.0            # >= 1

    [[fault]]
    kind = "link_down"      # routing avoids it; no path left -> result.blocked
    link = "ft0.leaf0->spine1"

    [[fault]]
    kind = "straggler"      # compute durations on that GPU * factor
    rank = 37               # global GPU index on the topology
    factor = 1.3            # >= 1

    [[fault]]
    kind = "packet_loss"    # goodput factor on the link(s), see goodput_factor()
    link = "rail*"
    p = 1e-3                # 0 <= p < 1
    recovery = "selective_repeat"   # or "go_back_n"
    window_packets = 64             # go_back_n only

A link name that does not exist (or a pattern matching none) is an :class:`InputError`.

The GPUs a fault *touches* (``ResolvedFaults.touched_gpus``: at an end of a faulty link,
or attached to a switch at an end of a faulty switch-to-switch link) and stragglers get
their own rank classes (:mod:`dse.sim.symmetry`), so the symmetry breaks only there.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from dse.errors import InputError, require
from dse.sim.topology import Topology
from dse.io import load_toml
from dse.spec.network_schema import FAULTS_FIELDS, RECOVERY  # noqa: F401 (RECOVERY re-exported)
from dse.spec.schema import validate_table


@dataclass(frozen=True)
class SlowLink:
    """Link(s) ``link`` run at ``bandwidth / factor``."""

    link: str
    factor: float


@dataclass(frozen=True)
class LinkDown:
    """Link(s) ``link`` carry nothing; routes detour (:meth:`Topology.route`)."""

    link: str


@dataclass(frozen=True)
class Straggler:
    """GPU ``rank`` (global index on the topology) runs compute ``factor`` times
    slower."""

    rank: int
    factor: float


@dataclass(frozen=True)
class PacketLoss:
    """Link(s) ``link`` lose each packet with probability ``p``; effective bandwidth is
    ``bw * goodput_factor(p, recovery, window_packets)``."""

    link: str
    p: float
    recovery: str = "selective_repeat"
    window_packets: int = 64


Fault = SlowLink | LinkDown | Straggler | PacketLoss


def goodput_factor(p: float, recovery: str = "selective_repeat",
                   window_packets: int = 64) -> float:
    """Fraction of link bandwidth delivered as goodput under i.i.d. packet loss ``p``.

    Selective repeat retransmits only lost packets: a packet needs ``1/(1-p)``
    transmissions on average, so ``goodput = bw * (1 - p)``.  Go-back-N with a window of
    ``W`` packets resends the whole window after a loss, costing ``W`` slots per loss:
    expected slots per delivered packet ``E = 1 + W p / (1 - p)``, so
    ``goodput = bw * (1 - p) / (1 - p + W p)`` (Bertsekas & Gallager, *Data Networks*,
    2nd ed., 1992, sec. 2.4; RoCE NICs recover with go-back-N).  Timeout stalls are not
    modelled.
    """
    if recovery == "go_back_n":
        return (1.0 - p) / (1.0 - p + window_packets * p)
    return 1.0 - p


@dataclass(frozen=True)
class FaultSet:
    """A list of faults (construct directly or with :func:`load_faults`)."""

    faults: tuple[Fault, ...] = ()
    where: str = "<faults>"


@dataclass
class ResolvedFaults:
    """Faults bound to a topology's link ids (see :func:`resolve`)."""

    cap_factor: np.ndarray          # per link: multiply nominal bandwidth
    down: frozenset[int]            # failed link ids
    rank_factor: dict[int, float]   # GPU -> compute slowdown
    touched_gpus: frozenset[int]    # GPUs whose traffic may cross a slowed / failed / lossy
                                    # link: at an end of it, or under the switch at its end
    down_names: tuple[str, ...] = field(default_factory=tuple)


def _match(topo: Topology, pattern: str, where: str, f: str) -> list[int]:
    require(isinstance(pattern, str) and pattern != "", where, f,
            "must be a link name or pattern (string)")
    if topo.has_link(pattern):
        return [topo.link_id(pattern)]
    if any(ch in pattern for ch in "*?["):
        ids = [i for i, nm in enumerate(topo.link_names) if fnmatch.fnmatchcase(nm, pattern)]
        require(bool(ids), where, f, f"pattern {pattern!r} must match at least one link "
                f"of the topology, but matches none (e.g. {topo.link_names[0]!r})")
        return ids
    raise InputError(where, f, f"link {pattern!r} must exist in the topology, but does "
                     f"not (names look like {topo.link_names[0]!r})")


def _factor(x: Any, where: str, f: str) -> float:
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) \
        and x >= 1
    require(ok, where, f, f"`factor >= 1` must hold, but got (factor={x!r})")
    return float(x)


def resolve(faults: FaultSet | Sequence[Fault] | None, topo: Topology) -> ResolvedFaults:
    """Bind ``faults`` to ``topo``: validate names and values, combine factors
    (multiplicatively) per link and per GPU."""
    if faults is None:
        faults = FaultSet()
    if not isinstance(faults, FaultSet):
        faults = FaultSet(tuple(faults))
    where = faults.where
    cap = np.ones(topo.num_links)
    down: set[int] = set()
    rf: dict[int, float] = {}
    touched: set[int] = set()
    attached: dict[int, list[int]] | None = None   # switch vertex -> GPUs linked to it
    for i, ft in enumerate(faults.faults):
        f = f"fault[{i}]"
        if isinstance(ft, Straggler):
            r = ft.rank
            ok = isinstance(r, (int, np.integer)) and 0 <= r < topo.num_gpus
            require(ok, where, f"{f}.rank", f"`0 <= rank < num_gpus` must hold, but got "
                    f"(rank={r!r}, num_gpus={topo.num_gpus})")
            rf[int(r)] = rf.get(int(r), 1.0) * _factor(ft.factor, where, f"{f}.factor")
            continue
        ids = _match(topo, ft.link, where, f"{f}.link")
        if isinstance(ft, SlowLink):
            cap[ids] /= _factor(ft.factor, where, f"{f}.factor")
        elif isinstance(ft, LinkDown):
            down.update(ids)
        elif isinstance(ft, PacketLoss):
            p = ft.p
            ok = isinstance(p, (int, float)) and not isinstance(p, bool) and 0 <= p < 1
            require(ok, where, f"{f}.p", f"`0 <= p < 1` must hold, but got (p={p!r})")
            require(ft.recovery in RECOVERY, where, f"{f}.recovery",
                    f"recovery must be one of {list(RECOVERY)}, but got {ft.recovery!r}")
            w = ft.window_packets
            require(isinstance(w, int) and w >= 1, where, f"{f}.window_packets",
                    f"`window_packets >= 1` must hold, but got (window_packets={w!r})")
            cap[ids] *= goodput_factor(p, ft.recovery, w)
        else:
            raise InputError(where, f, f"unknown fault type {type(ft).__name__}")
        for lk in ids:
            ends = (int(topo.link_src[lk]), int(topo.link_dst[lk]))
            if min(ends) < topo.num_gpus:
                touched.update(v for v in ends if v < topo.num_gpus)
                continue
            # a switch-to-switch link (fat-tree leaf <-> spine): the GPUs under either
            # switch are the sources and destinations of the flows that may cross it
            if attached is None:
                attached = {}
                G = topo.num_gpus
                for a, b in zip(topo.link_src.tolist(), topo.link_dst.tolist()):
                    if a < G <= b:
                        attached.setdefault(b, []).append(a)
            for v in ends:
                touched.update(attached.get(v, ()))
    return ResolvedFaults(cap_factor=cap, down=frozenset(down), rank_factor=rf,
                          touched_gpus=frozenset(touched),
                          down_names=tuple(topo.link_names[i] for i in sorted(down)))


def faults_from_dict(data: Mapping[str, Any], where: str = "<faults>") -> FaultSet:
    """Parse the TOML schema in this module's docstring
    (:data:`dse.spec.network_schema.FAULTS_FIELDS`, every problem of the file in one
    message; names are checked against a topology by :func:`resolve`)."""
    v = validate_table(data, FAULTS_FIELDS, where)
    out: list[Fault] = []
    for t in v["fault"]:
        kind = t["kind"]
        if kind == "slow_link":
            out.append(SlowLink(t["link"], t["factor"]))
        elif kind == "link_down":
            out.append(LinkDown(t["link"]))
        elif kind == "straggler":
            out.append(Straggler(t["rank"], t["factor"]))
        else:
            out.append(PacketLoss(t["link"], t["p"], t["recovery"], t["window_packets"]))
    return FaultSet(tuple(out), where)


def load_faults(path: str | Path, topo: Topology | None = None) -> FaultSet:
    """Load a faults TOML file; with ``topo`` also validate it against the topology."""
    path = Path(path)
    where = str(path)
    data = load_toml(path)
    fs = faults_from_dict(data, where)
    if topo is not None:
        resolve(fs, topo)
    return fs
