"""A role's op list as the simulator executes it: flattened into arrays, with its
streams, dependency counts, successors and communication channels.

Every stream issues its nodes in program order (CUDA stream semantics).  Communication
nodes are matched across ranks by *channel* and per-channel sequence number (the k-th
node a rank issues on a channel meets the k-th of its partners, as NCCL requires):

- a collective's channel is ``("d", dim)`` (a :class:`~dse.trace.graph.RankGrid` axis)
  or ``("l", group)`` (a literal group of global ranks);
- a send's or receive's channel is ``("d", dim, peer_delta, tag, kind)`` or
  ``("p", peer, tag, kind)``.

Units: seconds, bytes.
"""

from __future__ import annotations

import math

import numpy as np

from dse.errors import InputError
from dse.sim import collectives as coll
from dse.trace.graph import NodeKind

COMP, COLL, SEND, RECV = 0, 1, 2, 3
KIND = {NodeKind.COMPUTE: COMP, NodeKind.COLLECTIVE: COLL, NodeKind.SEND: SEND,
        NodeKind.RECV: RECV}
CATEGORY = ("compute", "collective", "send", "recv")


class RoleProgram:
    """The static program of one role: per node its name, kind, duration, stream,
    bytes, collective kind, successors, dependency count, channel and sequence number;
    per stream its node queue.  ``literal`` is true when some node names its group or
    peer literally (no rank grid); ``coll_dims`` / ``p2p_dims`` are the grid axes (and
    peer deltas) the role communicates on."""

    def __init__(self, name: str, nodes, uses_grid: bool):
        self.name = name
        self.n = len(nodes)
        idx = {}
        for i, nd in enumerate(nodes):
            if nd.id in idx:
                raise InputError(f"trace role {name!r}", f"node {nd.id}",
                                 "node ids must be unique within a role")
            idx[nd.id] = i
        self.names = [nd.name for nd in nodes]
        self.kind = [KIND[NodeKind(nd.kind)] for nd in nodes]
        self.dur = [float(nd.duration_s) for nd in nodes]
        self.stream = [int(nd.stream) for nd in nodes]
        self.bytes = [float(nd.comm_bytes or nd.tensor_bytes) for nd in nodes]
        self.xlat = [float(nd.latency_s) for nd in nodes]
        self.ckind = [(nd.comm_kind.value if hasattr(nd.comm_kind, "value")
                       else str(nd.comm_kind or "all_reduce")) for nd in nodes]
        for i, nd in enumerate(nodes):
            if not (math.isfinite(self.xlat[i]) and self.xlat[i] >= 0.0):
                raise InputError(f"trace role {name!r}", f"node {nd.id}.latency_s",
                                 f"must be a finite number >= 0, but got {self.xlat[i]!r}")
            if self.kind[i] == COLL and self.ckind[i] not in coll.KINDS[:-1]:
                raise InputError(f"trace role {name!r}", f"node {nd.id}.comm_kind",
                                 f"comm_kind must be one of {list(coll.KINDS[:-1])}, but "
                                 f"got {self.ckind[i]!r}")
        self.succ: list[list[int]] = [[] for _ in nodes]
        self.ndeps = [0] * self.n
        for i, nd in enumerate(nodes):
            deps = set(nd.data_deps) | set(nd.ctrl_deps)
            for d in deps:
                if d not in idx:
                    raise InputError(f"trace role {name!r}", f"node {nd.id}.deps",
                                     f"dependency {d} must name a node of the same role")
                self.succ[idx[d]].append(i)
            self.ndeps[i] = len(deps)
        self.stream_ids = sorted(set(self.stream))
        pos = {s: k for k, s in enumerate(self.stream_ids)}
        self.sidx = [pos[s] for s in self.stream]       # stream index per node
        self.queues: list[list[int]] = [[] for _ in self.stream_ids]
        for i, k in enumerate(self.sidx):
            self.queues[k].append(i)
        self.is_comp = np.array([k == COMP for k in self.kind], dtype=bool)
        # channels and per-channel sequence numbers (program order)
        self.chan: list[tuple] = [()] * self.n
        self.seq = [0] * self.n
        self.literal = False
        counters: dict[tuple, int] = {}
        for i, nd in enumerate(nodes):
            k = self.kind[i]
            if k == COMP:
                continue
            dim = nd.group_dim if uses_grid else ""
            if k == COLL:
                ch = ("d", dim) if dim else ("l", tuple(nd.group))
            else:
                ch = (("d", dim, int(nd.peer_delta)) if dim else ("p", int(nd.peer)))
                ch = ch + (int(nd.tag), k)
            if not dim:
                self.literal = True
            self.chan[i] = ch
            self.seq[i] = counters.get(ch, 0)
            counters[ch] = self.seq[i] + 1
        self.coll_dims = {c[1] for c in self.chan if c and c[0] == "d" and len(c) == 2}
        self.p2p_dims = {(c[1], c[2]) for c in self.chan if c and c[0] == "d" and len(c) > 2}
