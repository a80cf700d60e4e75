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
    peer: int = -1
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
