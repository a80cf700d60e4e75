"""Chakra ET writer/reader: exact round trip, wire format per et_def.proto, bad files.

Field numbers below are typed in from github.com/mlcommons/chakra
``schema/protobuf/et_def.proto`` (commit f5124d76) and attribute value types from
``src/feeder/et_feeder_node.cpp``; the manual decoder shares no code with dse.trace.chakra.
"""

from __future__ import annotations

import gzip
import json
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.errors import InputError
from dse.trace import chakra
from dse.trace.graph import CollectiveKind, NodeKind, RankTrace, TraceNode, TraceSet

# ------------------------------------------------------------------ strategies

finite = st.floats(min_value=0, max_value=1e21, allow_nan=False, allow_infinity=False)
small_int = st.integers(min_value=-(2 ** 40), max_value=2 ** 40)


@st.composite
def rank_traces(draw) -> RankTrace:
    n = draw(st.integers(0, 8))
    ids = draw(st.lists(st.integers(0, 2 ** 64 - 1), min_size=n, max_size=n, unique=True))
    nodes = []
    for i, nid in enumerate(ids):
        kind = draw(st.sampled_from(NodeKind))
        deps = (lambda k: st.lists(st.sampled_from(ids[:i]), max_size=k, unique=True)) if i \
            else (lambda k: st.just([]))
        comm_kind = (draw(st.sampled_from(CollectiveKind)) if kind is NodeKind.COLLECTIVE
                     else draw(st.none() | st.sampled_from(CollectiveKind)))
        nodes.append(TraceNode(
            id=nid, name=draw(st.text(max_size=12)), kind=kind,
            duration_s=draw(st.floats(0, 10, allow_nan=False) | st.sampled_from([0.0, 1e-6])),
            num_ops=draw(finite), tensor_bytes=draw(finite | st.integers(0, 2 ** 40).map(float)),
            comm_kind=comm_kind, comm_bytes=draw(finite),
            group=tuple(draw(st.lists(st.integers(-1, 4096), max_size=5))),
            group_dim=draw(st.sampled_from(["", "tp", "cp", "dp", "ep", "pp", "a:b"])),
            peer=draw(st.integers(-1, 2 ** 32)), peer_delta=draw(small_int),
            tag=draw(st.integers(0, 2 ** 33)), stream=draw(st.integers(0, 3)),
            latency_s=draw(st.floats(0, 1, allow_nan=False) | st.just(0.0)),
            data_deps=draw(deps(3)),
            ctrl_deps=draw(deps(2))))
    return RankTrace(rank=draw(st.integers(0, 2 ** 31 + 7)), nodes=nodes)


@st.composite
def trace_sets(draw) -> TraceSet:
    names = draw(st.lists(st.text(min_size=0, max_size=8), min_size=1, max_size=3, unique=True))
    roles = {name: draw(rank_traces()) for name in names}
    rank_role = draw(st.lists(st.sampled_from(names), min_size=1, max_size=20))
    meta = draw(st.dictionaries(st.text(max_size=6), st.text(max_size=10), max_size=3))
    return TraceSet(roles=roles, rank_role=rank_role, meta=meta)


def example_trace_set() -> TraceSet:
    nodes = [
        TraceNode(id=0, name="fwd_gemm", kind=NodeKind.COMPUTE, duration_s=1.5e-3,
                  num_ops=2.0e12, tensor_bytes=3.0e8),
        TraceNode(id=1, name="tp_reduce_scatter", kind=NodeKind.COLLECTIVE, duration_s=2.25e-4,
                  comm_kind=CollectiveKind.REDUCE_SCATTER, comm_bytes=6.4e7,
                  group=(0, 1, 2, 3), group_dim="tp", stream=1, data_deps=[0]),
        TraceNode(id=2, name="pp_send", kind=NodeKind.SEND, duration_s=1e-4, comm_bytes=1e6,
                  peer=4, group_dim="pp", peer_delta=1, tag=7, stream=2, data_deps=[1]),
        TraceNode(id=3, name="pp_recv", kind=NodeKind.RECV, duration_s=1e-4, comm_bytes=1e6,
                  peer=4, group_dim="pp", peer_delta=1, tag=8, stream=2, ctrl_deps=[2]),
    ]
    return TraceSet(roles={"stage 0/dp": RankTrace(rank=0, nodes=nodes),
                           "stage1": RankTrace(rank=4, nodes=nodes[:1])},
                    rank_role=["stage 0/dp"] * 4 + ["stage1"] * 4,
                    meta={"model": "llama3-8b", "layout": "tp4-pp2"})


# ------------------------------------------------------------------ round trip

@settings(max_examples=150, deadline=None)
@given(trace_sets())
def test_round_trip_is_exact(ts):
    with tempfile.TemporaryDirectory() as tmp:
        paths = chakra.write_trace_set(ts, Path(tmp))
        assert paths[-1].name == "roles.json"
        assert len({p.name for p in paths}) == len(ts.roles) + 1
        assert chakra.read_trace_set(Path(tmp)) == ts


@settings(max_examples=100, deadline=None)
@given(trace_sets())
def test_body_cached_decoding_equals_message_by_message(ts):
    """read_et_file decodes each distinct node body once (chakra._nodes_by_body); the
    nodes must equal protobuf's decoding of every message."""
    with tempfile.TemporaryDirectory() as tmp:
        chakra.write_trace_set(ts, Path(tmp))
        for path in Path(tmp).glob("*.et"):
            frames = chakra._frames(path.read_bytes(), str(path))[1:]
            slow = [chakra.node_from_chakra(chakra._parse(chakra.Node, b, "t", "n"), "t")
                    for _, b in frames]
            assert chakra._nodes_by_body(frames, "t") == slow


def test_other_field_orders_decode_by_protobuf(tmp_path):
    """A message whose fields are not in the writer's order (legal protobuf: any order,
    a repeated field unpacked) is not split by hand (chakra._split_node): the file is
    decoded message by message, with the same nodes."""
    a = chakra.Node(id=3, name="n", type=chakra.NODE_TYPE["COMP_NODE"], duration_micros=5,
                    data_deps=[1, 2])
    parts = {f.number: chakra.Node(**{f.name: getattr(a, f.name)}).SerializeToString()
             for f, _ in a.ListFields()}
    reordered = parts[3] + parts[7] + parts[1] + parts[2] + b"\x28\x01\x28\x02"  # unpacked deps
    assert chakra._nodes_by_body([(0, reordered)], "t") is None
    head = chakra.GlobalMetadata(version="0.0.4").SerializeToString()
    dep = chakra.Node(id=1, type=chakra.NODE_TYPE["COMP_NODE"]).SerializeToString()
    dep2 = chakra.Node(id=2, type=chakra.NODE_TYPE["COMP_NODE"]).SerializeToString()
    data = b"".join(chakra._varint(len(m)) + m for m in (head, dep, dep2, reordered))
    (tmp_path / "x.et").write_bytes(data)
    _, nodes = chakra.read_et_file(tmp_path / "x.et")
    assert nodes[-1] == chakra.node_from_chakra(a)
    assert (nodes[-1].id, nodes[-1].name, nodes[-1].data_deps) == (3, "n", [1, 2])


def test_round_trip_example_and_file_names(tmp_path):
    ts = example_trace_set()
    paths = chakra.write_trace_set(ts, tmp_path)
    assert [p.name for p in paths] == ["stage_0_dp.et", "stage1.et", "roles.json"]
    index = json.loads((tmp_path / "roles.json").read_text())
    assert index["rank_role"] == [["stage 0/dp", 0, 4], ["stage1", 4, 8]]
    assert index["roles"]["stage1"] == {"file": "stage1.et", "rank": 4}
    assert chakra.read_trace_set(tmp_path) == ts


def test_colliding_role_names_get_distinct_files(tmp_path):
    node = TraceNode(id=1, name="x", kind=NodeKind.COMPUTE)
    ts = TraceSet(roles={r: RankTrace(rank=i, nodes=[node]) for i, r in
                         enumerate(["a/b", "a_b", "A_B", "", "..", "roles"])},
                  rank_role=["a/b", "a_b", "A_B", "", "..", "roles"])
    names = [p.name for p in chakra.write_trace_set(ts, tmp_path)]
    assert len({n.lower() for n in names}) == len(names)
    assert all(not n.startswith(".") for n in names)
    assert chakra.read_trace_set(tmp_path) == ts


def test_gzipped_file_reads(tmp_path):
    ts = example_trace_set()
    chakra.write_trace_set(ts, tmp_path)
    path = tmp_path / "stage1.et"
    path.write_bytes(gzip.compress(path.read_bytes()))
    assert chakra.read_trace_set(tmp_path) == ts


# ------------------------------------------------------------------ wire format, by hand

def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        value |= (b & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not b & 0x80:
            return value, pos


def length_delimited(buf: bytes) -> list[bytes]:
    """Chakra protolib framing: varint length, then that many bytes; repeat."""
    out, pos = [], 0
    while pos < len(buf):
        n, pos = read_varint(buf, pos)
        out.append(buf[pos:pos + n])
        pos += n
    assert pos == len(buf)
    return out


def wire_fields(buf: bytes) -> list[tuple[int, int, object]]:
    """(field number, wire type, raw value) of one protobuf message."""
    out, pos = [], 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        number, wt = key >> 3, key & 7
        if wt == 0:
            value, pos = read_varint(buf, pos)
        elif wt == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wt == 2:
            n, pos = read_varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wt == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise AssertionError(f"unexpected wire type {wt}")
        out.append((number, wt, value))
    return out


def signed64(u: int) -> int:
    return u - (1 << 64) if u >= 1 << 63 else u


def packed(buf: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(buf):
        v, pos = read_varint(buf, pos)
        out.append(v)
    return out


# et_def.proto AttributeProto oneof members used here -> (field number, wire type)
ATTR_FIELDS = {3: ("double_val", 1), 7: ("int32_val", 0), 9: ("int64_val", 0),
               10: ("int64_list", 2), 13: ("uint64_val", 0), 27: ("bool_val", 0),
               29: ("string_val", 2)}


def decode_attr(buf: bytes) -> tuple[str, str, object]:
    fields = wire_fields(buf)
    assert fields[0][:2] == (1, 2)  # name = 1
    name = fields[0][2].decode()
    (number, wt, raw), = fields[1:]
    member, want_wt = ATTR_FIELDS[number]
    assert wt == want_wt
    if member == "double_val":
        value = struct.unpack("<d", raw)[0]
    elif member in ("string_val",):
        value = raw.decode()
    elif member == "int64_list":
        (n, w, inner), = wire_fields(raw)  # Int64List.values = 1, packed
        assert (n, w) == (1, 2)
        value = [signed64(v) for v in packed(inner)]
    else:
        value = signed64(raw)
    return name, member, value


def test_file_framing_and_field_numbers_by_hand(tmp_path):
    chakra.write_trace_set(example_trace_set(), tmp_path)
    frames = length_delimited((tmp_path / "stage_0_dp.et").read_bytes())
    assert all(frames), "Chakra's decodeMessage stops at a zero-length message"
    # GlobalMetadata { string version = 1; repeated AttributeProto attr = 2; }
    meta = wire_fields(frames[0])
    assert meta[0] == (1, 2, b"0.0.4")
    attrs = {decode_attr(v)[0]: decode_attr(v)[2] for n, wt, v in meta[1:] if n == 2}
    assert attrs == {"model": "llama3-8b", "layout": "tp4-pp2"}
    assert {n for n, _, _ in meta} == {1, 2}

    nodes = []
    for frame in frames[1:]:
        node = {"attr": {}}
        for number, wt, value in wire_fields(frame):
            if number == 1:                         # uint64 id = 1
                node["id"] = value
            elif number == 2:                       # string name = 2
                node["name"] = value.decode()
            elif number == 3:                       # NodeType type = 3
                node["type"] = value
            elif number in (4, 5):                  # repeated uint64 ctrl/data_deps, packed
                assert wt == 2
                node["ctrl_deps" if number == 4 else "data_deps"] = packed(value)
            elif number == 7:                       # uint64 duration_micros = 7
                node["duration_micros"] = value
            elif number == 10:                      # repeated AttributeProto attr = 10
                name, member, v = decode_attr(value)
                node["attr"][name] = (member, v)
            else:
                raise AssertionError(f"unexpected Node field {number}")
        nodes.append(node)

    comp, coll, send, recv = nodes
    # NodeType: COMP_NODE = 4, COMM_SEND_NODE = 5, COMM_RECV_NODE = 6, COMM_COLL_NODE = 7
    assert [n["type"] for n in nodes] == [4, 7, 5, 6]
    assert comp.get("id", 0) == 0  # proto3 omits a zero id
    assert [coll["id"], send["id"], recv["id"]] == [1, 2, 3]
    assert comp["name"] == "fwd_gemm" and comp["duration_micros"] == 1500
    assert comp["attr"]["is_cpu_op"] == ("bool_val", 0)
    assert comp["attr"]["num_ops"] == ("int64_val", 2 * 10 ** 12)
    assert comp["attr"]["tensor_size"] == ("uint64_val", 3 * 10 ** 8)
    # CollectiveCommType REDUCE_SCATTER = 7
    assert coll["attr"]["comm_type"] == ("int64_val", 7)
    assert coll["attr"]["comm_size"] == ("int64_val", 64 * 10 ** 6)
    assert coll["attr"]["pg_name"] == ("string_val", "tp:0,1,2,3")
    assert coll["attr"]["dse.stream"] == ("int64_val", 1)
    assert coll["data_deps"] == [0] and coll["duration_micros"] == 225
    assert send["attr"]["comm_src"] == ("int32_val", 0)
    assert send["attr"]["comm_dst"] == ("int32_val", 4)
    assert send["attr"]["comm_tag"] == ("int32_val", 7)
    assert recv["attr"]["comm_src"] == ("int32_val", 4)
    assert recv["attr"]["comm_dst"] == ("int32_val", 0)
    assert recv["ctrl_deps"] == [2]
    assert send["attr"]["dse.peer_delta"] == ("int64_val", 1)
    assert send["attr"]["dse.group_dim"] == ("string_val", "pp")


def test_descriptor_numbers_match_et_def_proto():
    node = {f.name: f.number for f in chakra.Node.DESCRIPTOR.fields}
    assert node == {"id": 1, "name": 2, "type": 3, "ctrl_deps": 4, "data_deps": 5,
                    "start_time_micros": 6, "duration_micros": 7, "inputs": 8, "outputs": 9,
                    "attr": 10}
    attr = {f.name: f.number for f in chakra.AttributeProto.DESCRIPTOR.fields}
    assert attr["name"] == 1 and attr["doc_string"] == 2
    assert {k: attr[k] for k in ("double_val", "int32_val", "int64_val", "uint64_val",
                                 "bool_val", "string_val", "bytes_list")} == {
        "double_val": 3, "int32_val": 7, "int64_val": 9, "uint64_val": 13, "bool_val": 27,
        "string_val": 29, "bytes_list": 32}
    assert {f.name for f in chakra.AttributeProto.DESCRIPTOR.oneofs_by_name["value"].fields} \
        == set(attr) - {"name", "doc_string"}
    assert chakra.NODE_TYPE == {"INVALID_NODE": 0, "METADATA_NODE": 1, "MEM_LOAD_NODE": 2,
                                "MEM_STORE_NODE": 3, "COMP_NODE": 4, "COMM_SEND_NODE": 5,
                                "COMM_RECV_NODE": 6, "COMM_COLL_NODE": 7}
    assert chakra.COMM_TYPE["ALL_REDUCE"] == 0 and chakra.COMM_TYPE["ALL_GATHER"] == 2
    assert chakra.COMM_TYPE["BROADCAST"] == 5 and chakra.COMM_TYPE["ALL_TO_ALL"] == 6
    assert chakra.COMM_TYPE["REDUCE_SCATTER"] == 7 and chakra.COMM_TYPE["BARRIER"] == 9
    gm = {f.name: f.number for f in chakra.GlobalMetadata.DESCRIPTOR.fields}
    assert gm == {"version": 1, "attr": 2}
    assert chakra.Node.DESCRIPTOR.full_name == "ChakraProtoMsg.Node"


# ------------------------------------------------------------------ bad files

def test_truncated_file_names_file_and_rule(tmp_path):
    chakra.write_trace_set(example_trace_set(), tmp_path)
    path = tmp_path / "stage_0_dp.et"
    data = path.read_bytes()
    path.write_bytes(data[:-5])
    with pytest.raises(InputError) as err:
        chakra.read_trace_set(tmp_path)
    assert "stage_0_dp.et" in str(err.value) and "truncated" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("payload", [b"", b"\xff" * 12, b"\x05abc", b"\x03\xff\xff\xff",
                                     b"\x1f\x8b\x00garbage"])
def test_corrupt_file_raises_input_error(tmp_path, payload):
    chakra.write_trace_set(example_trace_set(), tmp_path)
    (tmp_path / "stage1.et").write_bytes(payload)
    with pytest.raises(InputError, match="stage1.et"):
        chakra.read_trace_set(tmp_path)


def test_missing_roles_json(tmp_path):
    chakra.write_trace_set(example_trace_set(), tmp_path)
    (tmp_path / "roles.json").unlink()
    with pytest.raises(InputError, match="roles.json"):
        chakra.read_trace_set(tmp_path)


@pytest.mark.parametrize("edit", [
    lambda d: d.pop("rank_role"),
    lambda d: d.update(rank_role=[["stage1", 1, 4]]),
    lambda d: d.update(rank_role=[["nope", 0, 4]]),
    lambda d: d["roles"]["stage1"].update(file="../x.et"),
    lambda d: d["roles"]["stage1"].update(file="missing.et"),
    lambda d: d.update(meta={"model": "other"}),
    lambda d: d.update(format="v0"),
    lambda d: d.update(rank_role=[[["stage1"], 0, 8]]),
])
def test_bad_roles_json(tmp_path, edit):
    chakra.write_trace_set(example_trace_set(), tmp_path)
    index = json.loads((tmp_path / "roles.json").read_text())
    edit(index)
    (tmp_path / "roles.json").write_text(json.dumps(index))
    with pytest.raises(InputError):
        chakra.read_trace_set(tmp_path)


def _write_raw(path: Path, *nodes) -> None:
    msgs = [chakra.GlobalMetadata(version="0.0.4"), *nodes]
    out = b""
    for m in msgs:
        buf = m.SerializeToString()
        out += chakra._varint(len(buf)) + buf
    path.write_bytes(out)


@pytest.mark.parametrize("node", [
    chakra.Node(id=1, type=chakra.NODE_TYPE["METADATA_NODE"]),
    chakra.Node(id=1, type=chakra.NODE_TYPE["COMP_NODE"], data_deps=[9]),
    chakra.Node(id=1, type=chakra.NODE_TYPE["COMM_COLL_NODE"],
                attr=[chakra.AttributeProto(name="comm_type", int64_val=1)]),   # REDUCE
    chakra.Node(id=1, type=chakra.NODE_TYPE["COMP_NODE"],
                attr=[chakra.AttributeProto(name="num_ops", string_val="x")]),
    chakra.Node(id=1, type=chakra.NODE_TYPE["COMM_COLL_NODE"],
                attr=[chakra.AttributeProto(name="pg_name", string_val="tp0,1")]),
])
def test_unsupported_nodes_raise_input_error(tmp_path, node):
    chakra.write_trace_set(example_trace_set(), tmp_path)
    _write_raw(tmp_path / "stage1.et", node)
    with pytest.raises(InputError, match="stage1.et: node 1"):
        chakra.read_trace_set(tmp_path)


def test_duplicate_ids_rejected(tmp_path):
    chakra.write_trace_set(example_trace_set(), tmp_path)
    n = chakra.Node(id=1, type=chakra.NODE_TYPE["COMP_NODE"])
    _write_raw(tmp_path / "stage1.et", n, n)
    with pytest.raises(InputError, match="unique"):
        chakra.read_trace_set(tmp_path)


def test_foreign_minimal_chakra_node_reads():
    """A node as Chakra's own generators write it (no dse.* attributes)."""
    msg = chakra.Node(id=5, name="ar", type=chakra.NODE_TYPE["COMM_COLL_NODE"],
                      duration_micros=12,
                      attr=[chakra.AttributeProto(name="comm_type", int64_val=0),
                            chakra.AttributeProto(name="comm_size", int64_val=1024)])
    node = chakra.node_from_chakra(msg)
    assert node.kind is NodeKind.COLLECTIVE and node.comm_kind is CollectiveKind.ALL_REDUCE
    assert node.comm_bytes == 1024.0 and node.duration_s == pytest.approx(12e-6)


def test_writer_rejects_bad_nodes(tmp_path):
    bad = [TraceNode(id=-1, name="x", kind=NodeKind.COMPUTE),
           TraceNode(id=1, name="x", kind=NodeKind.COMPUTE, duration_s=-1.0),
           TraceNode(id=1, name="x", kind=NodeKind.COMPUTE, num_ops=float("nan")),
           TraceNode(id=1, name="x", kind=NodeKind.COLLECTIVE, latency_s=-1e-6),
           TraceNode(id=1, name="x", kind=NodeKind.COLLECTIVE, latency_s=float("inf"))]
    for node in bad:
        ts = TraceSet(roles={"r": RankTrace(rank=0, nodes=[node])}, rank_role=["r"])
        with pytest.raises(InputError):
            chakra.write_trace_set(ts, tmp_path)
    ts = TraceSet(roles={}, rank_role=["r"])
    with pytest.raises(InputError, match="rank_role"):
        chakra.write_trace_set(ts, tmp_path)
