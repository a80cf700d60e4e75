"""Event-driven replay of execution traces over a multi-dimensional network topology,
with link sharing (max-min), slow/failed links, stragglers and packet loss, and the
compute slowdown of collectives overlapping it (SM sharing).

Modules: ``topology`` (dimensions, links, routes), ``collectives`` (phases of each
algorithm), ``faults``, ``flows`` (max-min flow network), ``program`` (a role's op list
as executed), ``symmetry`` (rank classes), ``engine`` (the event loop, ``simulate``),
``result`` (``SimResult``); `make bench`'s simulator figures: :mod:`dse.bench_sim`.

Public API::

    load_topology(path, num_gpus=None) -> Topology
    make_topology(dims, *, cross_dim_algo="hierarchical", name="", num_gpus=None) -> Topology
    DimSpec(kind, size, bw_bytes_per_s, latency_s, ...)
    plan(topo, kind, gpus, algo=None) -> list[Phase]            (collectives)
    load_faults(path, topo=None) -> FaultSet; SlowLink, LinkDown, Straggler, PacketLoss
    simulate(jobs, topology, faults=None, *, grid=None, coalesce=True,
             record_timeline=True, comm_sm_fraction=None, aggregate=True) -> SimResult
"""

from dse.sim.collectives import Phase, busbw_factor, plan, ring_time_s
from dse.sim.engine import Job, simulate
from dse.sim.faults import (FaultSet, LinkDown, PacketLoss, SlowLink, Straggler,
                            faults_from_dict, goodput_factor, load_faults, resolve)
from dse.sim.flows import maxmin_rates
from dse.sim.result import SimResult
from dse.sim.topology import (DimSpec, Topology, load_topology, make_topology,
                              topology_from_dict)

__all__ = ["DimSpec", "FaultSet", "Job", "LinkDown", "PacketLoss", "Phase", "SimResult",
           "SlowLink", "Straggler", "Topology", "busbw_factor", "faults_from_dict",
           "goodput_factor", "load_faults", "load_topology", "make_topology",
           "maxmin_rates", "plan", "resolve", "ring_time_s", "simulate",
           "topology_from_dict"]
