"""`dse trace`: Chakra execution traces (one file per role) + roles.json + a Chrome/Perfetto
timeline of one explicit layout, optionally replayed by the event-driven simulator on a
topology with faults.  Bad input exits with status 2 and one line (dse.errors)."""

from __future__ import annotations

import contextlib
import gc
import math


@contextlib.contextmanager
def _no_cyclic_gc():
    """Python's cyclic collector off while the trace is generated, written, read back and
    scheduled: these phases allocate ~10^5 objects with few reference cycles (they are
    freed by reference counting), and every collection of the oldest generation would
    traverse all of JAX's import-time objects too (``gc.freeze`` moves those out of its
    way first) -- ~15 % of the command's CPU time measured on the README trace.  The
    collector is back on before the simulator runs."""
    was = gc.isenabled()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _summary_links(res, k: int = 5) -> list[str]:
    """Per-dimension-kind mean/max link utilization and the busiest links."""
    import numpy as np
    names = np.asarray(res.link_names, dtype=object)
    util = res.link_util
    out = []
    groups: dict[str, list[int]] = {}
    for i, nm in enumerate(names):
        key = "nvlink" if "nvsw" in nm else nm.split(".")[0].rstrip("0123456789") or nm
        groups.setdefault(key, []).append(i)
    for key, ids in sorted(groups.items()):
        u = util[ids]
        out.append(f"  {key:<8} {len(ids):6d} links  mean util {u.mean():6.1%}  max {u.max():6.1%}")
    out.append("  busiest: " + ", ".join(f"{n} {u:.1%}" for n, u in res.busiest_links(k)))
    return out


def cmd_trace(a) -> int:
    from dse.cli_layout import resolve_layout
    from dse.errors import require
    from dse.trace.chakra import read_trace_set, write_trace_set
    from dse.trace.generate import generate_trace_set, model_step_time_s, rank_grid
    from dse.trace.perfetto import process_names, timeline_from_trace_set, write_chrome_trace

    from dse.report.atomic import check_output_dir, make_output_dir
    check_output_dir(a.out, "--out", create=False)       # before any work; created below
    with _no_cyclic_gc():     # back on for the simulator
        model, hw, wl, lay = resolve_layout(a)
        from dse.cli_layout import print_assumptions
        print_assumptions(a, model)
        require(not (a.topology or a.faults) or a.simulate, "command line", "--topology/--faults",
                "need --simulate")
        if a.simulate:             # validate the network files before writing anything
            from dse.sim import load_faults, load_topology, simulate
            from dse.sim.topology import topology_for_hardware
            if a.topology:
                topo = load_topology(a.topology, num_gpus=a.gpus)
            else:
                topo = topology_for_hardware(hw, a.gpus)
            require(topo.num_gpus == a.gpus, str(a.topology or "topology"), "num_gpus",
                    f"`topology GPUs == --gpus` must hold, but got ({topo.num_gpus}, {a.gpus})")
            faults = load_faults(a.faults, topo) if a.faults else None
        ts = generate_trace_set(model, wl, lay, hw)
        out = make_output_dir(a.out, "--out")
        paths = write_trace_set(ts, out)
        ts = read_trace_set(out)          # replay what was written (round trip)
        vec = model_step_time_s(model, wl, lay, hw)
        nodes = sum(len(t.nodes) for t in ts.roles.values())
        print(f"{model.name} on {a.gpus} x {hw.name}: {ts.meta['layout']}")
        print(f"  wrote {len(paths) - 1} Chakra ET files ({nodes} nodes) + roles.json to {out}/")
        tl = out / "timeline.json"
        if not a.simulate:
            events = timeline_from_trace_set(ts)     # the list schedule, once
            step = max(e.start_s + e.dur_s for e in events)
            write_chrome_trace(events, tl, process_names=process_names(ts), meta=ts.meta)
            print(f"  list-schedule step time (no network, no cross-stage waits) {step:.3f} s;"
                  f" vectorized model {vec:.3f} s")
            print(f"  wrote {tl}")
            return 0
    res = simulate(ts, topo, faults, grid=rank_grid(lay))
    require(res.blocked is None, str(a.faults or a.topology or "simulation"), "replay",
            f"must finish, but {res.blocked}")
    res.meta.update(ts.meta)
    res.write_chrome_trace(tl)
    print(f"  simulated step time {res.step_time_s:.3f} s on {topo.name} "
          f"(vectorized model {vec:.3f} s, sim/vec {res.step_time_s / vec:.3f})")
    print(f"  {res.num_events} events in {res.wall_s:.2f} s ({res.events_per_s:,.0f} events/s),"
          f" {res.num_classes} rank classes")
    print("  link utilization:")
    for line in _summary_links(res):
        print(line)
    print(f"  wrote {tl}")
    return 0 if math.isfinite(res.step_time_s) else 1


def register(subparsers) -> None:
    from dse.cli_layout import layout_args
    s = subparsers.add_parser("trace", help="Chakra traces + Perfetto timeline of one layout; "
                                            "--simulate replays them on a topology")
    layout_args(s)
    s.add_argument("--out", required=True, help="output directory")
    s.add_argument("--simulate", action="store_true", help="replay on the event-driven simulator")
    s.add_argument("--topology", default=None, help="topology TOML (default: built from the "
                                                     "hardware: NVLink switch x rail)")
    s.add_argument("--faults", default=None, help="faults TOML (slow/failed links, stragglers, loss)")
    s.set_defaults(fn=cmd_trace)
