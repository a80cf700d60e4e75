"""In-memory execution-trace graph: the one representation shared by the trace
generator, the Chakra/Perfetto writers and the event-driven simulator.

A trace set is one :class:`RankTrace` per *role* (ranks that execute the same op
sequence, e.g. every DP replica of pipeline stage 0), plus the map role -> ranks.  Node
semantics follow Chakra's ``et_def.proto`` (COMP_NODE, COMM_COLL_NODE, COMM_SEND_NODE,
COMM_RECV_NODE; data and control dependencies) so the Chakra writer is a field-by-field
translation.

Units: seconds, bytes, floating-point operations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class NodeKind(str, Enum):
    COMPUTE = "compute"        # Chakra COMP_NODE
    COLLECTIVE = "collective"  # Chakra COMM_COLL_NODE
    SEND = "send"              # Chakra COMM_SEND_NODE
    RECV = "recv"              # Chakra COMM_RECV_NODE


class CollectiveKind(str, Enum):
    """Chakra ``CollectiveCommType`` names."""

    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    ALL_TO_ALL = "all_to_all"
    BROADCAST = "broadcast"


@dataclass
class TraceNode:
    """One operator on one rank.

    ``duration_s`` is the isolated execution time from the cost model (compute nodes) or
    the cost model's uncontended estimate (communication nodes; the simulator recomputes
    communication time from the topology).  ``group`` is the process group as a tuple of
    *global* rank ids, or for SEND/RECV the peer rank in ``peer``.  ``stream`` separates
    concurrently executing streams on one rank (0 = compute, 1.. = communication), as
    Megatron overlaps DP/TP/PP traffic on side streams.
    """

    id: int
    name: str
    kind: NodeKind
    duration_s: float = 0.0
    num_ops: float = 0.0
    tensor_bytes: float = 0.0
    comm_kind: CollectiveKind | None = None
    comm_bytes: float = 0.0
    group: tuple[int, ...] = ()
    group_dim: str = ""        # "tp" | "cp" | "dp" | "ep" | "edp" | "pp": which RankGrid axis
    peer: int = -1
    peer_delta: int = 0        # SEND/RECV: peer = neighbour along group_dim by this step
    tag: int = 0
    stream: int = 0
    # COLLECTIVE: fixed seconds the call pays beyond its route's per-step latencies -- NCCL's
    # protocol base and hop latency of the framework's bucket calls it stands for
    # (dse.trace.generate: the data-parallel buckets of dse.graph.train.dp_ops); the simulator
    # adds it after the last phase
    latency_s: float = 0.0
    data_deps: list[int] = field(default_factory=list)
    ctrl_deps: list[int] = field(default_factory=list)


class NodeTable:
    """One role's nodes in columns, as the generator builds them: node ``i`` has id ``i``,
    name ``names[i]``, data dependencies ``deps[i]`` (sorted, unique), no control
    dependencies, and every other field from its *body* ``protos[body[i]]`` -- the few
    distinct node bodies of a role (a layer's forward, a TP all-gather, a pipeline SEND
    ...) are shared by all micro-batches and layers, so a node costs three list entries
    instead of a :class:`TraceNode` (rank symmetry within a role: only ids, names and
    dependencies differ).  :meth:`materialize` gives the :class:`TraceNode` list."""

    __slots__ = ("protos", "body", "names", "deps", "_index")

    def __init__(self):
        self.protos: list[TraceNode] = []
        self.body: list[int] = []
        self.names: list[str] = []
        self.deps: list[list[int]] = []
        self._index: dict[tuple, int] = {}

    def proto(self, kind: NodeKind, **fields) -> int:
        """The index of the body with these fields (``id``/``name``/deps excluded), added
        on first use."""
        key = (kind, *sorted(fields.items()))
        i = self._index.get(key)
        if i is None:
            i = self._index[key] = len(self.protos)
            self.protos.append(TraceNode(id=0, name="", kind=kind, **fields))
        return i

    def __len__(self) -> int:
        return len(self.body)

    def materialize(self) -> list[TraceNode]:
        """The nodes as :class:`TraceNode` objects (each its own; the dependency lists are
        handed over, not copied -- the table is not used after this)."""
        new, bodies, out = object.__new__, [p.__dict__ for p in self.protos], []
        append = out.append
        for i, (b, name, deps) in enumerate(zip(self.body, self.names, self.deps)):
            n = new(TraceNode)
            d = n.__dict__
            d.update(bodies[b])
            d["id"], d["name"], d["data_deps"], d["ctrl_deps"] = i, name, deps, []
            append(n)
        return out


class RankTrace:
    """The op sequence one role executes; ``rank`` is its representative global rank.

    Built either from a node list or from a :class:`NodeTable` (the generator's columnar
    form); :attr:`nodes` materializes the table on first access, after which the list is
    the one truth (callers may edit nodes) and :attr:`table` is ``None``.  Writers use
    :attr:`table` when it is set (bulk encoding of shared bodies)."""

    __slots__ = ("rank", "_nodes", "_table")

    def __init__(self, rank: int, nodes: list[TraceNode] | None = None,
                 table: NodeTable | None = None):
        if (nodes is None) == (table is None):
            raise TypeError("RankTrace needs exactly one of nodes and table")
        self.rank, self._nodes, self._table = rank, nodes, table

    @property
    def nodes(self) -> list[TraceNode]:
        if self._nodes is None:
            self._nodes, self._table = self._table.materialize(), None
        return self._nodes

    @nodes.setter
    def nodes(self, value: list[TraceNode]) -> None:
        self._nodes, self._table = value, None

    @property
    def table(self) -> NodeTable | None:
        return self._table

    @property
    def num_nodes(self) -> int:
        """Node count, without materializing a table."""
        return len(self._table) if self._nodes is None else len(self._nodes)

    def __eq__(self, other) -> bool:
        if not isinstance(other, RankTrace):
            return NotImplemented
        return self.rank == other.rank and self.nodes == other.nodes

    def __repr__(self) -> str:
        return f"RankTrace(rank={self.rank!r}, nodes=<{self.num_nodes} nodes>)"


@dataclass
class TraceSet:
    """Traces per role and the role of every global rank (``rank_role[r]`` is a key of
    ``roles``).  ``meta`` carries free-form strings (model, layout, hardware) written into
    Chakra's GlobalMetadata and the Perfetto header."""

    roles: dict[str, RankTrace]
    rank_role: list[str]
    meta: dict[str, str] = field(default_factory=dict)

    @property
    def num_ranks(self) -> int:
        return len(self.rank_role)


@dataclass(frozen=True)
class RankGrid:
    """Megatron-LM's rank order: tensor-parallel fastest, then context, data, pipeline
    (``megatron/core/parallel_state.py``, order "tp-cp-ep-dp-pp").  Rank r has coordinates
    ``tp = r % TP, cp = (r // TP) % CP, dp = (r // (TP*CP)) % DP, pp = r // (TP*CP*DP)``.

    The expert layers tile the same ``tp x cp x dp`` ranks of a stage with their own
    grid (MoE parallel folding: ``expert_decoder_rank_generator``, a ``RankGenerator``
    with ``tp = etp``, ``ep``, ``dp = edp``, ``cp = 1``, the same order): the ``ep``
    ranks of one expert group are ``etp`` apart, the ``edp`` ranks of one expert shard
    (the expert parameters' gradient reduce and optimizer shard,
    ``get_expert_data_parallel_world_size``) ``etp*ep`` apart,
    ``edp = TP*CP*DP / (etp*ep)``.  ``etp`` 0 means the default of
    :func:`dse.graph.moe.expert_tp`: ``tp`` where ``ep`` divides ``dp*cp``, else 1.
    """

    tp: int
    cp: int
    dp: int
    pp: int
    ep: int = 1
    etp: int = 0

    @property
    def size(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    @property
    def expert_tp(self) -> int:
        if self.etp:
            return self.etp
        return self.tp if (self.dp * self.cp) % self.ep == 0 else 1

    def _strides(self) -> dict[str, tuple[int, int]]:
        t, c, d = self.tp, self.cp, self.dp
        e = self.expert_tp
        return {"tp": (1, t), "cp": (t, c), "dp": (t * c, d), "pp": (t * c * d, self.pp),
                "ep": (e, self.ep), "edp": (e * self.ep, max(t * c * d // (e * self.ep), 1))}

    def coord(self, rank: int, dim: str) -> int:
        stride, n = self._strides()[dim]
        return (rank // stride) % n

    def group(self, rank: int, dim: str) -> tuple[int, ...]:
        """All ranks that differ from ``rank`` only in coordinate ``dim`` (for ``ep`` and
        ``edp`` the coordinate of the expert grid)."""
        stride, n = self._strides()[dim]
        base = rank - self.coord(rank, dim) * stride
        return tuple(base + i * stride for i in range(n))

    def neighbor(self, rank: int, dim: str, delta: int) -> int:
        """The rank ``delta`` steps along ``dim`` (no wrap; -1 when off the grid)."""
        stride, n = self._strides()[dim]
        c = self.coord(rank, dim) + delta
        return rank + delta * stride if 0 <= c < n else -1
