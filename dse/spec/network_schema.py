"""Schemas of the network input files the replay simulator reads: topology files
(``studies/topologies/*.toml``, loaded by :func:`dse.sim.topology.load_topology`) and
fault files / a study's ``fault = [...]`` lists (:func:`dse.sim.faults.load_faults`).

Declared here, below both dse/sim and the study schemas (:mod:`dse.spec.study`), so a
study file's scenarios are checked at load with the same fields, and ``dse list`` can
describe them (:mod:`dse.spec.describe`).  Units: GB/s (1e9 bytes/s) and microseconds in
the files, SI inside (``scale``).  Wording follows what the loaders have always said
(``kind must be one of``, ``\\`size >= 1\\` (an integer) must hold``).
"""

from __future__ import annotations

from dse.spec.schema import Field

KINDS = ("switch", "fat_tree", "rail", "torus2d", "torus3d")
DIM_ALGOS = ("ring", "tree")
CROSS_DIM_ALGOS = ("hierarchical", "ring", "tree")
RECOVERY = ("selective_repeat", "go_back_n")


def _choice(key: str, choices: tuple, doc: str, **kw) -> Field:
    return Field(key, kind="string", choices=choices, doc=doc,
                 rule=f"{key} must be one of {{choices}}, but got {{v!r}}", **kw)


def _count(key: str, doc: str, **kw) -> Field:
    return Field(key, kind="integer", lo=1, doc=doc,
                 rule=f"`{key} >= 1` (an integer) must hold, but got ({key}={{v!r}})", **kw)


#: One ``[[dim]]`` table of a topology file.
DIM_FIELDS: tuple[Field, ...] = (
    _choice("kind", KINDS, "network of this dimension", required=True),
    _count("size", "GPUs along this dimension (sizes multiply to the GPU count)", unit="GPUs",
           required=True),
    Field("bw_gb_s", scale=1e9, unit="GB/s", lo=0.0, lo_open=True, required=True,
          doc="link bandwidth per direction"),
    Field("latency_us", scale=1e-6, unit="us", lo=0.0, required=True,
          doc="one traversal of a switched dimension; per hop on a torus"),
    Field("name", kind="string", doc="identifier used in link names (default: by kind)"),
    _choice("algo", DIM_ALGOS, "all-reduce algorithm inside this dimension", default="ring"),
    Field("shape", kind="list", item="integer", lo=1, min_items=1,
          doc="torus shape (2 or 3 integers whose product is size; default: a square / cube)"),
    _count("leaf_size", "fat tree: GPUs (nodes) per leaf switch (default: largest divisor <= 32)"),
    _count("spines", "fat tree: spine switches (default: leaf_size / oversubscription)"),
    Field("oversubscription", lo=1.0, default=1.0, doc="fat tree: leaf downlink / uplink"),
    Field("spine_latency_us", scale=1e-6, unit="us", lo=0.0, default=0.0,
          doc="fat tree: added per leaf-spine link"),
)

#: A topology file.
TOPOLOGY_FIELDS: tuple[Field, ...] = (
    Field("name", kind="string", default="", doc="label"),
    _count("num_gpus", "GPUs in the topology (must equal the product of the sizes)", unit="GPUs"),
    Field("dim", kind="tables", fields=DIM_FIELDS, required=True, min_items=1,
          rule="at least one `[[dim]]` table must be given", doc="network dimensions, fastest first"),
    Field("collectives", kind="table", default={}, doc="collective algorithms",
          fields=(_choice("cross_dim", CROSS_DIM_ALGOS, "groups spanning dimensions",
                          default="hierarchical"),)),
)

_KIND = Field("kind", kind="string", choices=("link_down", "packet_loss", "slow_link", "straggler"),
              required=True, doc="fault type", rule="kind must be one of {choices}, but got {v!r}")
_LINK = Field("link", kind="string", required=True,
              doc="a link name or an fnmatch pattern (\"rail5.*\"), checked against the topology")
_FACTOR = Field("factor", lo=1.0, required=True, doc="slowdown (bandwidth / factor, compute x factor)")

#: ``[[fault]]`` tables, one schema per ``kind``.
FAULT_CASES: tuple = (
    ("slow_link", (_KIND, _LINK, _FACTOR)),
    ("link_down", (_KIND, _LINK)),
    ("straggler", (_KIND, Field("rank", kind="integer", lo=0, required=True,
                                doc="global GPU index on the topology"), _FACTOR)),
    ("packet_loss", (_KIND, _LINK,
                     Field("p", lo=0.0, hi=1.0, hi_open=True, required=True, doc="loss probability per packet"),
                     _choice("recovery", RECOVERY, "retransmission scheme", default="selective_repeat"),
                     Field("window_packets", kind="integer", lo=1, default=64, unit="packets",
                           doc="go_back_n window"))),
)
FAULT = Field("fault", kind="tables", tag="kind", cases=FAULT_CASES, default=[],
              doc="faults injected into the replay")
#: A fault file.
FAULTS_FIELDS: tuple[Field, ...] = (FAULT,)
