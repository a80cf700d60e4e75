"""Topology construction, TOML validation and routing for every kind."""

from pathlib import Path

import pytest

from dse.errors import InputError
from dse.sim import DimSpec, load_topology, make_topology, topology_from_dict

ROOT = Path(__file__).resolve().parents[2]
TOPOS = ROOT / "studies" / "topologies"


def names(topo, links):
    return [topo.link_names[lk] for lk in links]


def dgx(nodes=4, gpus=8):
    return make_topology([DimSpec("switch", gpus, 450e9, 1.5e-6),
                          DimSpec("rail", nodes, 50e9, 5e-6)])


# ---- validation ------------------------------------------------------------------------

def toml_dims(*dims, **top):
    return {"dim": [dict(d) for d in dims], **top}


SW = {"kind": "switch", "size": 8, "bw_gb_s": 450, "latency_us": 1.5}


@pytest.mark.parametrize("bad, field, text", [
    ({"kind": "hypercube"}, "dim[0].kind", "kind must be one of"),
    ({"bw_gb_s": 0}, "dim[0].bw_gb_s", "`bw_gb_s > 0`"),
    ({"bw_gb_s": -3.0}, "dim[0].bw_gb_s", "`bw_gb_s > 0`"),
    ({"latency_us": -1}, "dim[0].latency_us", "`latency_us >= 0`"),
    ({"size": 0}, "dim[0].size", "`size >= 1`"),
    ({"size": 2.5}, "dim[0].size", "`size >= 1`"),
    ({"bogus": 1}, "dim[0].bogus", "unknown key"),
    ({"algo": "butterfly"}, "dim[0].algo", "algo must be one of"),
])
def test_dim_validation(bad, field, text):
    with pytest.raises(InputError) as e:
        topology_from_dict(toml_dims({**SW, **bad}), where="t.toml")
    assert e.value.where == "t.toml" and e.value.field == field and text in e.value.rule
    assert "\n" not in str(e.value)


def test_sizes_must_multiply_to_gpu_count():
    with pytest.raises(InputError) as e:
        topology_from_dict(toml_dims(SW, {**SW, "kind": "rail", "size": 4}, num_gpus=64),
                           where="t.toml")
    assert e.value.field == "dim.size" and "prod(dim.size) == num_gpus" in e.value.rule
    with pytest.raises(InputError, match="num_gpus=16"):
        topology_from_dict(toml_dims(SW), where="t.toml", num_gpus=16)
    assert topology_from_dict(toml_dims(SW), num_gpus=8).num_gpus == 8


def test_fat_tree_and_torus_parameters_validated():
    ft = {"kind": "fat_tree", "size": 12, "bw_gb_s": 50, "latency_us": 5}
    with pytest.raises(InputError, match="leaf_size"):
        topology_from_dict(toml_dims({**ft, "leaf_size": 5}))
    with pytest.raises(InputError, match="oversubscription >= 1"):
        topology_from_dict(toml_dims({**ft, "oversubscription": 0.5}))
    tor = {"kind": "torus2d", "size": 12, "bw_gb_s": 50, "latency_us": 1}
    with pytest.raises(InputError, match="perfect square"):
        topology_from_dict(toml_dims(tor))
    with pytest.raises(InputError, match="prod\\(shape\\) == size"):
        topology_from_dict(toml_dims({**tor, "shape": [3, 5]}))
    assert topology_from_dict(toml_dims({**tor, "shape": [3, 4]})).dims[0].shape == (3, 4)


def test_missing_and_bad_files(tmp_path):
    with pytest.raises(InputError, match="file: must exist"):
        load_topology(tmp_path / "nope.toml")
    p = tmp_path / "bad.toml"
    p.write_text("[[dim]]\nkind = 'switch'\nsize = 8\nbw_gb_s = 450\n")
    with pytest.raises(InputError) as e:
        load_topology(p)
    assert e.value.where == str(p) and e.value.field == "dim[0].latency_us"


def test_example_files_load():
    files = sorted(f for f in TOPOS.glob("*.toml") if "fault" not in f.name)
    assert len(files) >= 3
    for f in files:
        topo = load_topology(f)
        assert topo.num_gpus >= 8 and topo.num_links > 0
    t = load_topology(TOPOS / "dgx-h100-rail-1024.toml", num_gpus=1024)
    assert t.dims[0].bw_bytes_per_s == 450e9 and t.dims[1].latency_s == pytest.approx(5e-6)


def test_duplicate_default_names_are_suffixed():
    t = make_topology([DimSpec("switch", 2, 1e9, 0), DimSpec("switch", 2, 1e9, 0)])
    assert [d.name for d in t.dims] == ["nvsw0", "nvsw1"]
    with pytest.raises(InputError, match="unique"):
        make_topology([DimSpec("switch", 2, 1e9, 0, name="a"),
                       DimSpec("rail", 2, 1e9, 0, name="a")])


# ---- routing ------------------------------------------------------------------------------

def test_switch_and_rail_routing_dimension_order():
    t = dgx()
    assert names(t, t.route(3 * 8 + 5, 3 * 8 + 2)) == ["n3.gpu5->nvsw", "nvsw->n3.gpu2"]
    assert names(t, t.route(3 * 8 + 5, 1 * 8 + 5)) == ["rail5.up.n3", "rail5.down.n1"]
    # NVLink to the destination's rail first (PXN), then the rail
    assert names(t, t.route(3 * 8 + 5, 1 * 8 + 2)) == [
        "n3.gpu5->nvsw", "nvsw->n3.gpu2", "rail2.up.n3", "rail2.down.n1"]
    assert t.route(7, 7) == []
    lat = t.route_latency_s(t.route(3 * 8 + 5, 1 * 8 + 2))
    assert lat == pytest.approx(1.5e-6 + 5e-6)


def test_fat_tree_routing():
    t = make_topology([DimSpec("fat_tree", 8, 50e9, 2e-6, leaf_size=4, spines=2,
                               spine_latency_s=0.5e-6)])
    assert names(t, t.route(0, 3)) == ["ft0.n0->leaf0", "ft0.leaf0->n3"]
    # destination-mod-k: spine = 7 % 2
    r = names(t, t.route(1, 7))
    assert r == ["ft0.n1->leaf0", "ft0.leaf0->spine1", "ft0.spine1->leaf1", "ft0.leaf1->n7"]
    assert t.route_latency_s(t.route(1, 6)) == pytest.approx(3e-6)
    assert names(t, t.route(2, 6))[1] == "ft0.leaf0->spine0"
    # leaf-spine bandwidth = leaf_size * bw / (oversubscription * spines)
    assert t.link_cap_bytes_per_s[t.link_id("ft0.leaf0->spine0")] == pytest.approx(100e9)
    t2 = make_topology([DimSpec("fat_tree", 8, 50e9, 2e-6, leaf_size=4,
                                oversubscription=2.0)])
    assert t2.dims[0].spines == 2
    assert t2.link_cap_bytes_per_s[t2.link_id("ft0.leaf1->spine1")] == pytest.approx(50e9)


def test_fat_tree_reroutes_around_failed_spine_link():
    t = make_topology([DimSpec("fat_tree", 8, 50e9, 2e-6, leaf_size=4, spines=2)])
    down = frozenset({t.link_id("ft0.leaf0->spine1")})
    assert names(t, t.route(1, 7, down)) == [
        "ft0.n1->leaf0", "ft0.leaf0->spine0", "ft0.spine0->leaf1", "ft0.leaf1->n7"]
    all_up = frozenset({t.link_id("ft0.leaf0->spine0"), t.link_id("ft0.leaf0->spine1")})
    assert t.route(1, 6, all_up) is None
    assert t.route(1, 2, all_up) is not None   # same leaf: unaffected


def test_switch_failure_falls_back_to_scale_out():
    t = dgx(nodes=2, gpus=4)
    down = frozenset({t.link_id("n0.gpu1->nvsw")})
    r = names(t, t.route(1, 2, down))
    assert r == ["rail1.up.n0", "rail1.down.n1", "n1.gpu1->nvsw", "nvsw->n1.gpu2",
                 "rail2.up.n1", "rail2.down.n0"]
    single = make_topology([DimSpec("switch", 4, 450e9, 1e-6)])
    assert single.route(1, 2, frozenset({single.link_id("n0.gpu1->nvsw")})) is None


def test_torus_routing_wraps_and_uses_dimension_order():
    t = make_topology([DimSpec("torus2d", 16, 50e9, 1e-6)])
    assert t.dims[0].shape == (4, 4)
    # (0,0) -> (3,0): one wrap-around hop in the negative direction
    assert names(t, t.route(0, 3)) == ["torus0.0,0->3,0"]
    # (0,0) -> (2,1): x first (2 hops, tie -> positive), then y
    assert names(t, t.route(0, 2 + 4)) == ["torus0.0,0->1,0", "torus0.1,0->2,0",
                                          "torus0.2,0->2,1"]
    assert t.route_latency_s(t.route(0, 6)) == pytest.approx(3e-6)
    t3 = make_topology([DimSpec("torus3d", 27, 50e9, 1e-6)])
    assert t3.dims[0].shape == (3, 3, 3)
    assert len(t3.route(0, 26)) == 3   # one wrap hop per axis
    assert sum(1 for n in t3.link_names) == 27 * 6
    # failed hop -> detour of equal or longer length
    down = frozenset({t.link_id("torus0.0,0->3,0")})
    assert len(t.route(0, 3, down)) == 3


def test_multi_line_naming_and_counts():
    t = dgx(nodes=4, gpus=8)
    assert t.num_gpus == 32 and t.num_links == 2 * 32 + 2 * 32
    assert t.has_link("rail7.down.n3") and t.has_link("nvsw->n3.gpu7")
    assert t.coords(3 * 8 + 5) == (5, 3) and t.line(3 * 8 + 5, 1) == 5
    assert t.spanned_dims([0, 1, 2]) == [0] and t.spanned_dims([0, 8]) == [1]
