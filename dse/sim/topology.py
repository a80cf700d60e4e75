"""Multi-dimensional network topology: directed links, their capacities, and routing.

A topology is a list of *dimensions* whose sizes multiply to the GPU count.  GPU ``g`` has
mixed-radix coordinates with dimension 0 fastest: ``coord_d = (g // stride_d) % size_d``,
``stride_d = prod(size_0 .. size_{d-1})`` -- so with ``[switch 8, rail 128]`` GPU ``g``
is GPU ``g % 8`` of node ``g // 8``, matching Megatron's tp-fastest rank order.  The
GPUs that differ from ``g`` only in coordinate ``d`` form ``g``'s *line* in dimension
``d``; every line of a dimension gets its own copy of that dimension's network, with
line index ``L = (g % stride_d) + (g // (stride_d * size_d)) * stride_d``.  For
``[switch 8, rail 128]`` the switch line of a GPU is its node and the rail line is its
local GPU index (= rail number).

Kinds (each link carries ``bw_bytes_per_s`` per direction unless stated):

- ``switch`` (NVLink/NVSwitch domain): every GPU has an up link ``n<L>.gpu<i>-><name>``
  and a down link ``<name>->n<L>.gpu<i>`` to one non-blocking switch.
- ``rail`` (rail-optimized scale-out, GPU i of every node on rail switch i): links
  ``<name><L>.up.n<i>`` and ``<name><L>.down.n<i>`` -- e.g. ``rail5.up.n3``.
- ``fat_tree`` (two-level leaf/spine Clos): NIC links ``<name><L>.n<i>->leaf<j>`` /
  ``<name><L>.leaf<j>->n<i>``; every leaf has one link to every spine,
  ``<name><L>.leaf<j>->spine<k>`` / ``<name><L>.spine<k>->leaf<j>``, each of bandwidth
  ``leaf_size * bw / (oversubscription * spines)`` (so a leaf's total uplink is its
  total downlink divided by the oversubscription; Al-Fares et al., "A scalable,
  commodity data center network architecture", SIGCOMM 2008).  Flows between leaves
  take spine ``i_dst % spines`` -- destination-mod-k routing, InfiniBand's static
  fat-tree routing, non-blocking for shift permutations (Zahavi et al., "Optimized
  InfiniBand fat-tree routing for shift all-to-all communication patterns", CCPE 2010)
  -- skipping spines whose links are down.
- ``torus2d`` / ``torus3d``: GPUs of a line form a ``shape`` torus with wrap-around
  neighbour links ``<name><L>.<x,y>-><x',y'>`` in both directions along each axis.

Latency: ``latency_s`` is the end-to-end latency of one traversal of a switched dimension
(split half on the up link, half on the down link; a fat-tree spine crossing adds
``spine_latency_s`` per leaf-spine link) and the per-hop latency of a torus link.  A
route's latency is the sum over its links.

Routing (:meth:`Topology.route`): dimension-order, dimension 0 first -- a flow first
moves inside its NVLink domain to the GPU on the destination's rail, then crosses the
scale-out dimension (NCCL's PXN behaviour); inside a torus, axis order with the shorter
wrap direction (ties: positive).  When that route crosses a failed link, a breadth-first
search over all links that are up (GPUs may forward, as with PXN) finds the shortest
alternative -- e.g. through another spine, or through the scale-out dimension when an
NVLink is down; no path left -> ``None`` (the simulator reports the flow as blocked).

Units: bytes, seconds, bytes/s inside; GB/s (1e9 bytes/s) and microseconds in TOML.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from dse.errors import require
from dse.io import load_toml
from dse.spec.network_schema import (CROSS_DIM_ALGOS, DIM_ALGOS, DIM_FIELDS, KINDS,  # noqa: F401
                                     TOPOLOGY_FIELDS)
from dse.spec.schema import validate_table

DEFAULT_NAMES = {"switch": "nvsw", "fat_tree": "ft", "rail": "rail",
                 "torus2d": "torus", "torus3d": "torus"}
DIM_KEYS = {f.key for f in DIM_FIELDS}
TOP_KEYS = {f.key for f in TOPOLOGY_FIELDS}


@dataclass(frozen=True)
class DimSpec:
    """One network dimension, SI units.

    ``algo`` is the all-reduce algorithm for groups that lie inside this dimension
    ("ring" or "tree"); ``shape`` is the torus shape (torus kinds); ``leaf_size``,
    ``spines``, ``oversubscription`` and ``spine_latency_s`` shape a fat tree (0 =
    default: ``leaf_size`` = largest divisor of ``size`` up to 32, ``spines`` =
    ``round(leaf_size / oversubscription)``).
    """

    kind: str
    size: int
    bw_bytes_per_s: float
    latency_s: float
    name: str = ""
    algo: str = "ring"
    shape: tuple[int, ...] = ()
    leaf_size: int = 0
    spines: int = 0
    oversubscription: float = 1.0
    spine_latency_s: float = 0.0


@dataclass
class Topology:
    """Validated topology with its directed links (build with :func:`make_topology` or
    :func:`load_topology`).

    Link arrays are indexed by link id: ``link_cap_bytes_per_s`` (nominal, per
    direction), ``link_latency_s``, ``link_src`` / ``link_dst`` (vertex ids: GPUs are
    ``0 .. num_gpus-1``, switches follow), ``link_dim`` (dimension index).
    """

    dims: tuple[DimSpec, ...]
    cross_dim_algo: str = "hierarchical"
    name: str = ""
    num_gpus: int = 0
    strides: tuple[int, ...] = ()
    link_names: list[str] = field(default_factory=list)
    link_cap_bytes_per_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    link_latency_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    link_src: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    link_dst: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    link_dim: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    vertex_names: list[str] = field(default_factory=list)
    _by_name: dict[str, int] = field(default_factory=dict, repr=False)
    _tables: list[dict] = field(default_factory=list, repr=False)
    _out: list[list[int]] = field(default_factory=list, repr=False)

    # ---- lookups -------------------------------------------------------------------
    @property
    def num_links(self) -> int:
        return len(self.link_names)

    def link_id(self, name: str) -> int:
        """Link id of ``name``; ``KeyError`` if there is none."""
        return self._by_name[name]

    def has_link(self, name: str) -> bool:
        return name in self._by_name

    def coord(self, gpu: int, d: int) -> int:
        return (gpu // self.strides[d]) % self.dims[d].size

    def coords(self, gpu: int) -> tuple[int, ...]:
        return tuple(self.coord(gpu, d) for d in range(len(self.dims)))

    def line(self, gpu: int, d: int) -> int:
        st, n = self.strides[d], self.dims[d].size
        return gpu % st + (gpu // (st * n)) * st

    def gpu_name(self, gpu: int) -> str:
        n0 = self.dims[0].size
        return f"n{gpu // n0}.gpu{gpu % n0}"

    def spanned_dims(self, gpus: Sequence[int]) -> list[int]:
        """Dimensions in which the coordinates of ``gpus`` differ."""
        g = np.asarray(gpus, dtype=np.int64)
        out = []
        for d, dim in enumerate(self.dims):
            c = (g // self.strides[d]) % dim.size
            if c.min() != c.max():
                out.append(d)
        return out

    def links_of_gpu(self, gpu: int) -> list[int]:
        """All links with ``gpu`` as an endpoint."""
        return [i for i in range(self.num_links)
                if self.link_src[i] == gpu or self.link_dst[i] == gpu]

    # ---- routing -------------------------------------------------------------------
    def _dim_route(self, d: int, a: int, b: int, down: frozenset[int]) -> list[int] | None:
        """Links from GPU ``a`` to GPU ``b`` that differ only in coordinate ``d``."""
        t = self._tables[d]
        kind = self.dims[d].kind
        if kind in ("switch", "rail"):
            return [t["up"][a], t["down"][b]]
        if kind == "fat_tree":
            la, lb = t["leaf"][a], t["leaf"][b]
            if la == lb:
                return [t["up"][a], t["down"][b]]
            ns = t["spines"]
            k0 = self.coord(b, d) % ns   # D-mod-K
            for j in range(ns):
                k = (k0 + j) % ns
                ls, sl = t["ls"][la][k], t["sl"][lb][k]
                if ls not in down and sl not in down:
                    return [t["up"][a], ls, sl, t["down"][b]]
            return None
        # torus: axis order, shorter wrap direction
        shape = t["shape"]
        ca, cb = self.coord(a, d), self.coord(b, d)
        pa = list(np.unravel_index(ca, shape, order="F"))
        pb = list(np.unravel_index(cb, shape, order="F"))
        links, cur = [], a
        for ax, n in enumerate(shape):
            delta = (pb[ax] - pa[ax]) % n
            if delta == 0:
                continue
            sgn = 1 if delta <= n - delta else -1
            hops = delta if sgn == 1 else n - delta
            for _ in range(hops):
                lk, nxt = t["nbr"][(cur, ax, sgn)]
                links.append(lk)
                cur = nxt
        return links

    def route(self, src: int, dst: int, down: frozenset[int] = frozenset()) -> list[int] | None:
        """Link ids a flow from GPU ``src`` to GPU ``dst`` crosses (dimension-order, with
        a shortest-path detour around ``down`` links); ``None`` if no path is left."""
        if src == dst:
            return []
        links: list[int] | None = []
        cur = src
        for d in range(len(self.dims)):
            cd = self.coord(dst, d)
            cc = self.coord(cur, d)
            if cc == cd:
                continue
            nxt = cur + (cd - cc) * self.strides[d]
            part = self._dim_route(d, cur, nxt, down)
            if part is None:
                links = None
                break
            links += part
            cur = nxt
        if links is not None and not any(lk in down for lk in links):
            return links
        return self._bfs(src, dst, down)

    def _bfs(self, src: int, dst: int, down: frozenset[int]) -> list[int] | None:
        prev: dict[int, int] = {src: -1}
        q = deque([src])
        while q:
            v = q.popleft()
            if v == dst:
                break
            for lk in self._out[v]:
                if lk in down:
                    continue
                w = int(self.link_dst[lk])
                if w not in prev:
                    prev[w] = lk
                    q.append(w)
        if dst not in prev:
            return None
        path, v = [], dst
        while v != src:
            lk = prev[v]
            path.append(lk)
            v = int(self.link_src[lk])
        return path[::-1]

    def route_latency_s(self, links: Iterable[int]) -> float:
        return float(sum(self.link_latency_s[lk] for lk in links))


# ---- construction -------------------------------------------------------------------

def _default_leaf(size: int) -> int:
    return max(k for k in range(1, min(size, 32) + 1) if size % k == 0)


def _default_shape(kind: str, size: int) -> tuple[int, ...] | None:
    nd = 2 if kind == "torus2d" else 3
    r = round(size ** (1.0 / nd))
    for c in (r - 1, r, r + 1):
        if c > 0 and c ** nd == size:
            return (c,) * nd
    return None


def _validate_dim(dim: DimSpec, where: str, f: str) -> DimSpec:
    require(dim.kind in KINDS, where, f"{f}.kind",
            f"kind must be one of {list(KINDS)}, but got {dim.kind!r}")
    require(isinstance(dim.size, (int, np.integer)) and not isinstance(dim.size, bool)
            and dim.size >= 1, where, f"{f}.size",
            f"`size >= 1` (an integer) must hold, but got (size={dim.size!r})")
    bw = dim.bw_bytes_per_s
    require(isinstance(bw, (int, float)) and math.isfinite(bw) and bw > 0, where,
            f"{f}.bw_gb_s", f"`bw_gb_s > 0` must hold, but got (bw_gb_s={_gb(bw)})")
    lat = dim.latency_s
    require(isinstance(lat, (int, float)) and math.isfinite(lat) and lat >= 0, where,
            f"{f}.latency_us", f"`latency_us >= 0` must hold, but got "
            f"(latency_us={_us(lat)})")
    require(dim.algo in DIM_ALGOS, where, f"{f}.algo",
            f"algo must be one of {list(DIM_ALGOS)}, but got {dim.algo!r}")
    name = dim.name or DEFAULT_NAMES[dim.kind]
    dim = replace(dim, name=name)
    if dim.kind == "fat_tree":
        leaf = dim.leaf_size or _default_leaf(dim.size)
        require(isinstance(leaf, int) and leaf >= 1 and dim.size % leaf == 0, where,
                f"{f}.leaf_size", f"`size % leaf_size == 0` and `leaf_size >= 1` must "
                f"hold, but got (size={dim.size}, leaf_size={leaf!r})")
        o = dim.oversubscription
        require(isinstance(o, (int, float)) and math.isfinite(o) and o >= 1, where,
                f"{f}.oversubscription", f"`oversubscription >= 1` must hold, but got "
                f"(oversubscription={o!r})")
        spines = dim.spines or max(1, round(leaf / o))
        require(isinstance(spines, int) and spines >= 1, where, f"{f}.spines",
                f"`spines >= 1` must hold, but got (spines={spines!r})")
        sl = dim.spine_latency_s
        require(isinstance(sl, (int, float)) and math.isfinite(sl) and sl >= 0, where,
                f"{f}.spine_latency_us", f"`spine_latency_us >= 0` must hold, but got "
                f"(spine_latency_us={_us(sl)})")
        dim = replace(dim, leaf_size=leaf, spines=spines)
    if dim.kind.startswith("torus"):
        nd = 2 if dim.kind == "torus2d" else 3
        shape = tuple(dim.shape) or _default_shape(dim.kind, dim.size)
        require(shape is not None, where, f"{f}.shape", f"a {dim.kind} of size "
                f"{dim.size} is not a perfect {'square' if nd == 2 else 'cube'}; give "
                f"`shape` ({nd} integers whose product is size)")
        ok = (len(shape) == nd and all(isinstance(s, int) and s >= 1 for s in shape)
              and math.prod(shape) == dim.size)
        require(ok, where, f"{f}.shape", f"`len(shape) == {nd}` and `prod(shape) == size`"
                f" must hold, but got (shape={list(shape)}, size={dim.size})")
        dim = replace(dim, shape=tuple(int(s) for s in shape))
    return dim


def _gb(x: Any) -> Any:
    return x / 1e9 if isinstance(x, (int, float)) else x


def _us(x: Any) -> Any:
    return x * 1e6 if isinstance(x, (int, float)) else x


def make_topology(dims: Sequence[DimSpec], *, cross_dim_algo: str = "hierarchical",
                  name: str = "", num_gpus: int | None = None,
                  where: str = "<topology>") -> Topology:
    """Validate ``dims`` and build the link graph.

    Raises :class:`InputError` for an unknown kind, sizes whose product is not
    ``num_gpus`` (when given), non-positive bandwidth, negative latency, a bad torus
    shape or fat-tree parameter, or duplicate dimension names.
    """
    require(len(dims) >= 1, where, "dim", "at least one `[[dim]]` must be given")
    vd = [_validate_dim(dm, where, f"dim[{i}]") for i, dm in enumerate(dims)]
    kinds_count: dict[str, int] = {}
    for dm in dims:
        n = dm.name or DEFAULT_NAMES.get(dm.kind, dm.kind)
        kinds_count[n] = kinds_count.get(n, 0) + 1
    for i, dm in enumerate(dims):  # default names collide -> suffix the dimension index
        if not dm.name and kinds_count[vd[i].name] > 1:
            vd[i] = replace(vd[i], name=f"{vd[i].name}{i}")
    names = [dm.name for dm in vd]
    require(len(set(names)) == len(names), where, "dim.name",
            f"dimension names must be unique, but got {names}")
    total = math.prod(dm.size for dm in vd)
    if num_gpus is not None:
        require(total == num_gpus, where, "dim.size", f"`prod(dim.size) == num_gpus` "
                f"must hold, but got (prod(dim.size)={total}, num_gpus={num_gpus})")
    require(cross_dim_algo in CROSS_DIM_ALGOS, where, "collectives.cross_dim",
            f"cross_dim must be one of {list(CROSS_DIM_ALGOS)}, but got "
            f"{cross_dim_algo!r}")
    topo = Topology(dims=tuple(vd), cross_dim_algo=cross_dim_algo, name=name,
                    num_gpus=total)
    _build_links(topo)
    return topo


def _build_links(topo: Topology) -> None:
    n = topo.num_gpus
    strides, s = [], 1
    for dm in topo.dims:
        strides.append(s)
        s *= dm.size
    topo.strides = tuple(strides)
    vnames = [""] * n
    for g in range(n):
        vnames[g] = topo.gpu_name(g)
    lnames: list[str] = []
    cap: list[float] = []
    lat: list[float] = []
    lsrc: list[int] = []
    ldst: list[int] = []
    ldim: list[int] = []

    def vertex(name: str) -> int:
        vnames.append(name)
        return len(vnames) - 1

    def link(name: str, a: int, b: int, bw: float, latency: float, d: int) -> int:
        lnames.append(name)
        cap.append(bw)
        lat.append(latency)
        lsrc.append(a)
        ldst.append(b)
        ldim.append(d)
        return len(lnames) - 1

    tables = []
    for d, dm in enumerate(topo.dims):
        st, size = strides[d], dm.size
        nlines = n // size
        t: dict[str, Any] = {}
        half = dm.latency_s / 2
        bases = [(line % st) + (line // st) * st * size for line in range(nlines)]
        if dm.kind in ("switch", "rail"):
            up = np.zeros(n, np.int64)
            dn = np.zeros(n, np.int64)
            for line, base in enumerate(bases):
                if dm.kind == "switch":
                    sw = vertex(f"n{line}.{dm.name}")
                else:
                    sw = vertex(f"{dm.name}{line}")
                for i in range(size):
                    g = base + i * st
                    if dm.kind == "switch":
                        gn = f"n{line}.gpu{i}"
                        up[g] = link(f"{gn}->{dm.name}", g, sw, dm.bw_bytes_per_s, half, d)
                        dn[g] = link(f"{dm.name}->{gn}", sw, g, dm.bw_bytes_per_s, half, d)
                    else:
                        up[g] = link(f"{dm.name}{line}.up.n{i}", g, sw,
                                     dm.bw_bytes_per_s, half, d)
                        dn[g] = link(f"{dm.name}{line}.down.n{i}", sw, g,
                                     dm.bw_bytes_per_s, half, d)
            t.update(up=up.tolist(), down=dn.tolist())
        elif dm.kind == "fat_tree":
            leaf_size, ns = dm.leaf_size, dm.spines
            nleaf = size // leaf_size
            spine_bw = leaf_size * dm.bw_bytes_per_s / (dm.oversubscription * ns)
            up = np.zeros(n, np.int64)
            dn = np.zeros(n, np.int64)
            leaf_of = np.zeros(n, np.int64)
            ls_tab: list[list[int]] = []
            sl_tab: list[list[int]] = []
            for line, base in enumerate(bases):
                p = f"{dm.name}{line}"
                leaves = [vertex(f"{p}.leaf{j}") for j in range(nleaf)]
                spines = [vertex(f"{p}.spine{k}") for k in range(ns)] if nleaf > 1 else []
                gl0 = len(ls_tab)
                for j in range(nleaf):
                    ls_tab.append([link(f"{p}.leaf{j}->spine{k}", leaves[j], spines[k],
                                        spine_bw, dm.spine_latency_s, d)
                                   for k in range(len(spines))])
                    sl_tab.append([link(f"{p}.spine{k}->leaf{j}", spines[k], leaves[j],
                                        spine_bw, dm.spine_latency_s, d)
                                   for k in range(len(spines))])
                for i in range(size):
                    g = base + i * st
                    j = i // leaf_size
                    leaf_of[g] = gl0 + j
                    up[g] = link(f"{p}.n{i}->leaf{j}", g, leaves[j], dm.bw_bytes_per_s,
                                 half, d)
                    dn[g] = link(f"{p}.leaf{j}->n{i}", leaves[j], g, dm.bw_bytes_per_s,
                                 half, d)
            t.update(up=up.tolist(), down=dn.tolist(), leaf=leaf_of.tolist(),
                     ls=ls_tab, sl=sl_tab, spines=ns)
        else:  # torus
            shape = dm.shape
            nbr: dict[tuple[int, int, int], tuple[int, int]] = {}
            for line, base in enumerate(bases):
                for i in range(size):
                    g = base + i * st
                    pos = np.unravel_index(i, shape, order="F")
                    for ax, na in enumerate(shape):
                        if na == 1:
                            continue
                        for sgn in (1, -1):
                            if na == 2 and sgn == -1:
                                nbr[(g, ax, -1)] = nbr[(g, ax, 1)]
                                continue
                            q = list(pos)
                            q[ax] = (q[ax] + sgn) % na
                            j = int(np.ravel_multi_index(q, shape, order="F"))
                            h = base + j * st
                            a_s = ",".join(str(int(x)) for x in pos)
                            b_s = ",".join(str(int(x)) for x in q)
                            lk = link(f"{dm.name}{line}.{a_s}->{b_s}", g, h,
                                      dm.bw_bytes_per_s, dm.latency_s, d)
                            nbr[(g, ax, sgn)] = (lk, h)
            t.update(nbr=nbr, shape=shape)
        tables.append(t)
    topo.link_names = lnames
    topo.link_cap_bytes_per_s = np.asarray(cap, dtype=np.float64)
    topo.link_latency_s = np.asarray(lat, dtype=np.float64)
    topo.link_src = np.asarray(lsrc, dtype=np.int64)
    topo.link_dst = np.asarray(ldst, dtype=np.int64)
    topo.link_dim = np.asarray(ldim, dtype=np.int64)
    topo.vertex_names = vnames
    topo._by_name = {nm: i for i, nm in enumerate(lnames)}
    topo._tables = tables
    out: list[list[int]] = [[] for _ in vnames]
    for i, a in enumerate(lsrc):
        out[a].append(i)
    topo._out = out


# ---- TOML ---------------------------------------------------------------------------

def topology_from_dict(data: Mapping[str, Any], where: str = "<topology>",
                       num_gpus: int | None = None) -> Topology:
    """Build a topology from the TOML schema (:data:`dse.spec.network_schema.TOPOLOGY_FIELDS`,
    every problem of the file in one message; see the module docstring of
    :mod:`dse.sim.topology` and ``studies/topologies/*.toml``)."""
    v = validate_table(data, TOPOLOGY_FIELDS, where)
    dims = []
    for i, raw in enumerate(v["dim"]):
        f = f"dim[{i}]"
        kw: dict[str, Any] = {}
        if raw["name"] is not None:
            require(raw["name"].isidentifier(), where, f"{f}.name",
                    f"must be an identifier, but got {raw['name']!r}")
            kw["name"] = raw["name"]
        if raw["shape"] is not None:
            kw["shape"] = tuple(raw["shape"])
        for key in ("leaf_size", "spines"):
            if raw[key] is not None:
                kw[key] = raw[key]
        dims.append(DimSpec(kind=raw["kind"], size=raw["size"], bw_bytes_per_s=raw["bw_gb_s"] * 1e9,
                            latency_s=raw["latency_us"] * 1e-6, algo=raw["algo"],
                            oversubscription=raw["oversubscription"],
                            spine_latency_s=raw["spine_latency_us"] * 1e-6, **kw))
    file_n = v["num_gpus"]
    if file_n is not None:
        total = math.prod(dm.size for dm in dims)
        require(total == file_n, where, "dim.size", f"`prod(dim.size) == num_gpus` must "
                f"hold, but got (prod(dim.size)={total}, num_gpus={file_n})")
    coll = v["collectives"]
    cross = coll.get("cross_dim") or "hierarchical"
    return make_topology(dims, cross_dim_algo=cross, name=v["name"], num_gpus=num_gpus, where=where)


def load_topology(path: str | Path, num_gpus: int | None = None) -> Topology:
    """Load and validate a topology TOML file; ``num_gpus`` (e.g. the job's world
    size) must equal the product of the dimension sizes when given."""
    path = Path(path)
    where = str(path)
    data = load_toml(path)
    return topology_from_dict(data, where=where, num_gpus=num_gpus)


def topology_for_hardware(hw, num_gpus: int, scale_out: str = "rail",
                          name: str = ""):
    """A topology matching the cost model's view of ``hw``: NVLink switch domains of
    ``nvlink_domain_gpus`` x a scale-out dimension (``rail`` or ``fat_tree``, non-blocking)
    of the NIC bandwidth; link bandwidths are the *effective* ones the cost model uses
    (nominal x ``eff_nvlink`` / ``eff_nic``), latencies the per-hop NVLink / NIC
    latencies."""
    dom = int(round(float(hw.nvlink_domain_gpus)))
    dom = max(1, min(dom, num_gpus))
    require(num_gpus % dom == 0, "topology", "num_gpus", f"`num_gpus % nvlink_domain == 0` "
            f"must hold, but got (num_gpus={num_gpus}, nvlink_domain={dom})")
    dims = [DimSpec("switch", dom, float(hw.nvlink_bw_bytes_per_s * hw.eff_nvlink),
                    float(hw.nvlink_latency_s))]
    if num_gpus // dom > 1:
        dims.append(DimSpec(scale_out, num_gpus // dom, float(hw.nic_bw_bytes_per_s * hw.eff_nic),
                            float(hw.nic_latency_s)))
    return make_topology(dims, name=name or f"{hw.name}-{scale_out}-{num_gpus}",
                         num_gpus=num_gpus)
