"""Helpers shared by the simulator tests: synthetic trace builders."""

from __future__ import annotations

from dse.trace.graph import (CollectiveKind, NodeKind, RankGrid, RankTrace, TraceNode,
                             TraceSet)

AG, RS, AR = CollectiveKind.ALL_GATHER, CollectiveKind.REDUCE_SCATTER, CollectiveKind.ALL_REDUCE


class Builder:
    """Append nodes to one role's op list with automatic ids."""

    def __init__(self):
        self.nodes: list[TraceNode] = []

    def add(self, name, kind, deps=(), **kw) -> int:
        nid = len(self.nodes)
        self.nodes.append(TraceNode(id=nid, name=name, kind=kind,
                                    data_deps=[d for d in deps if d is not None], **kw))
        return nid

    def comp(self, name, dur_s, deps=(), stream=0) -> int:
        return self.add(name, NodeKind.COMPUTE, deps, duration_s=dur_s, stream=stream)

    def coll(self, name, kind, nbytes, dim, deps=(), stream=0) -> int:
        return self.add(name, NodeKind.COLLECTIVE, deps, comm_kind=kind, comm_bytes=nbytes,
                        group_dim=dim, stream=stream)

    def send(self, name, nbytes, dim, delta, tag=0, deps=(), stream=2) -> int:
        return self.add(name, NodeKind.SEND, deps, comm_bytes=nbytes, group_dim=dim,
                        peer_delta=delta, tag=tag, stream=stream)

    def recv(self, name, nbytes, dim, delta, tag=0, deps=(), stream=1) -> int:
        return self.add(name, NodeKind.RECV, deps, comm_bytes=nbytes, group_dim=dim,
                        peer_delta=delta, tag=tag, stream=stream)


def make_1f1b_trace(tp: int, dp: int, pp: int, microbatches: int, layers: int, *,
                    fwd_nodes: int = 24, bwd_nodes: int = 40, act_bytes: float = 134e6,
                    grad_bytes: float = 430e6, comp_s: float = 1e-4,
                    dp_overlap: bool = True) -> tuple[TraceSet, RankGrid]:
    """A Megatron-like 1F1B step: per layer and micro-batch ``fwd_nodes`` forward nodes
    (4 of them TP all-gather / reduce-scatter, sequence parallel) and ``bwd_nodes``
    backward nodes (4 TP collectives), PP send/recv on side streams, a DP
    reduce-scatter per layer after the last backward (stream 3), an optimizer step and
    DP all-gathers.  One role per pipeline stage."""
    grid = RankGrid(tp=tp, cp=1, dp=dp, pp=pp)
    roles = {}
    for s in range(pp):
        b = Builder()
        warm = min(pp - s - 1, microbatches)
        order = [("F", m) for m in range(warm)]
        for i in range(microbatches - warm):
            order += [("F", warm + i), ("B", i)]
        order += [("B", m) for m in range(microbatches - warm, microbatches)]
        last_b = {}
        dp_nodes = []
        prev = None
        for ph, m in order:
            if ph == "F":
                dep = prev
                if s > 0:
                    dep = b.recv(f"recv_f{m}", act_bytes, "pp", -1, tag=0)
                for layer in range(layers):
                    for k in range(fwd_nodes):
                        if k in (0, fwd_nodes // 2):
                            dep = b.coll(f"F{m}.L{layer}.ag{k}", AG, act_bytes, "tp", [dep])
                        elif k in (fwd_nodes // 2 - 1, fwd_nodes - 1):
                            dep = b.coll(f"F{m}.L{layer}.rs{k}", RS, act_bytes, "tp", [dep])
                        else:
                            dep = b.comp(f"F{m}.L{layer}.op{k}", comp_s * (1 + k % 3), [dep])
                if s < pp - 1:
                    b.send(f"send_f{m}", act_bytes, "pp", +1, tag=0, deps=[dep])
                prev = dep
            else:
                dep = prev
                if s < pp - 1:
                    dep = b.recv(f"recv_b{m}", act_bytes, "pp", +1, tag=1, deps=[])
                    dep_list = [dep, prev]
                else:
                    dep_list = [prev]
                first = True
                for layer in reversed(range(layers)):
                    for k in range(bwd_nodes):
                        deps = dep_list if first else [dep]
                        first = False
                        if k in (0, bwd_nodes // 2):
                            dep = b.coll(f"B{m}.L{layer}.ag{k}", AG, act_bytes, "tp", deps)
                        elif k in (bwd_nodes // 2 - 1, bwd_nodes - 1):
                            dep = b.coll(f"B{m}.L{layer}.rs{k}", RS, act_bytes, "tp", deps)
                        else:
                            dep = b.comp(f"B{m}.L{layer}.op{k}", 2 * comp_s * (1 + k % 3),
                                         deps)
                    last_b[layer] = dep
                    if m == microbatches - 1 and dp > 1:
                        dp_nodes.append(b.coll(f"dp_rs.L{layer}", RS, grad_bytes, "dp",
                                               [dep], stream=3 if dp_overlap else 0))
                if s > 0:
                    b.send(f"send_b{m}", act_bytes, "pp", -1, tag=1, deps=[dep])
                prev = dep
        opt = b.comp("optimizer", 20 * comp_s, dp_nodes + [prev])
        for layer in range(layers):
            if dp > 1:
                b.coll(f"dp_ag.L{layer}", AG, grad_bytes / 2, "dp", [opt], stream=3)
        roles[f"stage{s}"] = RankTrace(rank=s * tp * dp, nodes=b.nodes)
    rank_role = [f"stage{grid.coord(r, 'pp')}" for r in range(grid.size)]
    return TraceSet(roles=roles, rank_role=rank_role), grid


def one_role(nodes: list[TraceNode], num_ranks: int) -> TraceSet:
    """A trace set in which every rank runs ``nodes``."""
    return TraceSet(roles={"r": RankTrace(rank=0, nodes=nodes)}, rank_role=["r"] * num_ranks)


def coll_trace(kind, nbytes: float, grid: RankGrid, dim: str = "tp",
               pre_s: float = 0.0) -> TraceSet:
    """Every rank: optional compute of ``pre_s`` then one collective on ``dim``."""
    b = Builder()
    dep = b.comp("pre", pre_s) if pre_s > 0 else None
    b.coll("c", kind, nbytes, dim, [dep])
    return one_role(b.nodes, grid.size)
