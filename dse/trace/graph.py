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
    group_dim: str = ""        # "tp" | "cp" | "dp" | "ep" | "pp": which RankGrid axis
    peer: int = -1
    peer_delta: int = 0        # SEND/RECV: peer = neighbour along group_dim by this step
    tag: int = 0
    stream: int = 0
    data_deps: list[int] = field(default_factory=list)
    ctrl_deps: list[int] = field(default_factory=list)


@dataclass
class RankTrace:
    """The op sequence one role executes; ``rank`` is its representative global rank."""

    rank: int
    nodes: list[TraceNode]


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
    (``megatron/core/parallel_state.py``, order "tp-cp-ep-dp-pp"; EP is folded inside DP
    for the expert layers).  Rank r has coordinates
    ``tp = r % TP, cp = (r // TP) % CP, dp = (r // (TP*CP)) % DP, pp = r // (TP*CP*DP)``.
    """

    tp: int
    cp: int
    dp: int
    pp: int
    ep: int = 1

    @property
    def size(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    def _strides(self) -> dict[str, tuple[int, int]]:
        t, c, d = self.tp, self.cp, self.dp
        return {"tp": (1, t), "cp": (t, c), "dp": (t * c, d), "pp": (t * c * d, self.pp),
                "ep": (t * c, self.ep)}

    def coord(self, rank: int, dim: str) -> int:
        stride, n = self._strides()[dim]
        return (rank // stride) % n

    def group(self, rank: int, dim: str) -> tuple[int, ...]:
        """All ranks that differ from ``rank`` only in coordinate ``dim`` (EP groups are
        the first ``ep`` DP coordinates of each aligned block)."""
        stride, n = self._strides()[dim]
        if dim == "ep":
            dp_stride, _ = self._strides()["dp"]
            dpc = self.coord(rank, "dp")
            base = rank - (dpc % self.ep) * dp_stride
            return tuple(base + i * dp_stride for i in range(self.ep))
        base = rank - self.coord(rank, dim) * stride
        return tuple(base + i * stride for i in range(n))

    def neighbor(self, rank: int, dim: str, delta: int) -> int:
        """The rank ``delta`` steps along ``dim`` (no wrap; -1 when off the grid)."""
        stride, n = self._strides()[dim]
        c = self.coord(rank, dim) + delta
        return rank + delta * stride if 0 <= c < n else -1
