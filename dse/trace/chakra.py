"""Chakra execution-trace (ET) files: write a :class:`TraceSet` to disk and read it back.

Wire format: the MLCommons Chakra schema ``schema/protobuf/et_def.proto`` (package
``ChakraProtoMsg``; github.com/mlcommons/chakra, read at commit f5124d76).  An ET file is
one length-delimited ``GlobalMetadata`` followed by length-delimited ``Node`` messages; each
length is a base-128 varint, the framing of ``encodeMessage``/``decodeMessage`` in Chakra's
``src/third_party/utils/protolib.py``.  The message classes are built at import time from a
``FileDescriptorProto`` assembled below (no ``protoc``, no grpcio-tools) with the field
numbers and types of et_def.proto, so the files decode with Chakra's tools and ASTRA-sim.

Node attributes are the ones Chakra's ET feeder reads, with its value types
(``src/feeder/et_feeder_node.cpp``): ``is_cpu_op`` bool, ``num_ops`` int64, ``tensor_size``
uint64, ``comm_type`` int64 (a ``CollectiveCommType``), ``comm_size`` int64, ``comm_src`` /
``comm_dst`` / ``comm_tag`` int32, ``pg_name`` string (written ``"<dim>:<r0>,<r1>,..."``).
Whatever those cannot carry exactly (seconds as a double, fractional sizes, stream, peer
step, values outside int32/int64) goes into ``dse.<field>`` attributes, so that
``read_trace_set(write_trace_set(ts))`` equals ``ts`` exactly.

On disk: one ``<role>.et`` per role (role names sanitized for file names) and
``roles.json`` = ``{"format", "meta", "roles": {role: {"file", "rank"}}, "rank_role":
[[role, first_rank, stop_rank), ...]}``, ranges half-open and consecutive.  ASTRA-sim wants
one ``<prefix>.<rank>.et`` per rank; a role file serves every rank of its role.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import zlib
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from dse.errors import InputError, require
from dse.report.atomic import atomic_write
from dse.trace.graph import CollectiveKind, NodeKind, NodeTable, RankTrace, TraceNode, TraceSet

PACKAGE = "ChakraProtoMsg"
CHAKRA_VERSION = "0.0.4"  # GlobalMetadata.version Chakra's own converters write
ROLES_FILE = "roles.json"
ROLES_FORMAT = "dse.chakra.roles/1"

_F = descriptor_pb2.FieldDescriptorProto
# et_def.proto AttributeProto: name = 1, doc_string = 2, then oneof ``value`` with
# <t>_val = 3 + 2i and <t>_list = 4 + 2i for the scalar types in this order.
_SCALARS = (("Double", _F.TYPE_DOUBLE), ("Float", _F.TYPE_FLOAT), ("Int32", _F.TYPE_INT32),
            ("Int64", _F.TYPE_INT64), ("Uint32", _F.TYPE_UINT32), ("Uint64", _F.TYPE_UINT64),
            ("Sint32", _F.TYPE_SINT32), ("Sint64", _F.TYPE_SINT64),
            ("Fixed32", _F.TYPE_FIXED32), ("Fixed64", _F.TYPE_FIXED64),
            ("Sfixed32", _F.TYPE_SFIXED32), ("Sfixed64", _F.TYPE_SFIXED64),
            ("Bool", _F.TYPE_BOOL), ("String", _F.TYPE_STRING), ("Bytes", _F.TYPE_BYTES))
_NODE_TYPES = ("INVALID_NODE", "METADATA_NODE", "MEM_LOAD_NODE", "MEM_STORE_NODE",
               "COMP_NODE", "COMM_SEND_NODE", "COMM_RECV_NODE", "COMM_COLL_NODE")
_COMM_TYPES = ("ALL_REDUCE", "REDUCE", "ALL_GATHER", "GATHER", "SCATTER", "BROADCAST",
               "ALL_TO_ALL", "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK", "BARRIER")


def _schema() -> descriptor_pb2.FileDescriptorProto:
    """et_def.proto as a FileDescriptorProto (same names, numbers, types)."""
    fd = descriptor_pb2.FileDescriptorProto(name="et_def.proto", package=PACKAGE,
                                            syntax="proto3")

    def add(msg, name, number, ftype, *, repeated=False, ref="", oneof=None):
        f = msg.field.add(name=name, number=number, type=ftype,
                          label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
        if ref:
            f.type_name = f".{PACKAGE}.{ref}"
        if oneof is not None:
            f.oneof_index = oneof

    attr = fd.message_type.add(name="AttributeProto")
    add(attr, "name", 1, _F.TYPE_STRING)
    add(attr, "doc_string", 2, _F.TYPE_STRING)
    attr.oneof_decl.add(name="value")
    for i, (cap, ftype) in enumerate(_SCALARS):
        add(attr, f"{cap.lower()}_val", 3 + 2 * i, ftype, oneof=0)
        add(attr, f"{cap.lower()}_list", 4 + 2 * i, _F.TYPE_MESSAGE, ref=f"{cap}List", oneof=0)
    for cap, ftype in _SCALARS:
        add(fd.message_type.add(name=f"{cap}List"), "values", 1, ftype, repeated=True)
    gm = fd.message_type.add(name="GlobalMetadata")
    add(gm, "version", 1, _F.TYPE_STRING)
    add(gm, "attr", 2, _F.TYPE_MESSAGE, repeated=True, ref="AttributeProto")
    for enum_name, values in (("NodeType", _NODE_TYPES), ("CollectiveCommType", _COMM_TYPES)):
        enum = fd.enum_type.add(name=enum_name)
        for number, value in enumerate(values):
            enum.value.add(name=value, number=number)
    node = fd.message_type.add(name="Node")
    add(node, "id", 1, _F.TYPE_UINT64)
    add(node, "name", 2, _F.TYPE_STRING)
    add(node, "type", 3, _F.TYPE_ENUM, ref="NodeType")
    add(node, "ctrl_deps", 4, _F.TYPE_UINT64, repeated=True)
    add(node, "data_deps", 5, _F.TYPE_UINT64, repeated=True)
    add(node, "start_time_micros", 6, _F.TYPE_UINT64)
    add(node, "duration_micros", 7, _F.TYPE_UINT64)
    add(node, "inputs", 8, _F.TYPE_MESSAGE, ref="IOInfo")
    add(node, "outputs", 9, _F.TYPE_MESSAGE, ref="IOInfo")
    add(node, "attr", 10, _F.TYPE_MESSAGE, repeated=True, ref="AttributeProto")
    io = fd.message_type.add(name="IOInfo")
    for number, name in enumerate(("values", "shapes", "types", "strides"), start=1):
        add(io, name, number, _F.TYPE_STRING)
    tensor = fd.message_type.add(name="Tensor")
    for number, name in enumerate(("tensor_id", "storage_id", "offset", "num_elem",
                                   "elem_bytes"), start=1):
        add(tensor, name, number, _F.TYPE_UINT64)
    add(tensor, "device", 6, _F.TYPE_STRING)
    return fd


_POOL = descriptor_pool.DescriptorPool()  # private: no clash with a protoc-built et_def_pb2
_POOL.Add(_schema())
_classes = {n: message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.{n}"))
            for n in ("AttributeProto", "GlobalMetadata", "Node", "IOInfo", "Tensor")}
AttributeProto = _classes["AttributeProto"]
GlobalMetadata = _classes["GlobalMetadata"]
Node = _classes["Node"]
IOInfo = _classes["IOInfo"]
Tensor = _classes["Tensor"]
NODE_TYPE = {name: i for i, name in enumerate(_NODE_TYPES)}
COMM_TYPE = {name: i for i, name in enumerate(_COMM_TYPES)}

_TYPE_OF_KIND = {NodeKind.COMPUTE: NODE_TYPE["COMP_NODE"],
                 NodeKind.COLLECTIVE: NODE_TYPE["COMM_COLL_NODE"],
                 NodeKind.SEND: NODE_TYPE["COMM_SEND_NODE"],
                 NodeKind.RECV: NODE_TYPE["COMM_RECV_NODE"]}
_KIND_OF_TYPE = {t: k for k, t in _TYPE_OF_KIND.items()}
_I32, _I64, _U64 = (-(2 ** 31), 2 ** 31 - 1), (-(2 ** 63), 2 ** 63 - 1), (0, 2 ** 64 - 1)
# Fields the Chakra attributes may not carry exactly -> the oneof member of their override.
_OVERRIDES = {"duration_s": "double_val", "num_ops": "double_val",
              "tensor_bytes": "double_val", "comm_bytes": "double_val",
              "group": "int64_list", "group_dim": "string_val", "peer": "int64_val",
              "peer_delta": "int64_val", "tag": "int64_val", "stream": "int64_val",
              "latency_s": "double_val"}
_PREFIX = "dse."
_PG_RANKS = re.compile(r"(-?[0-9]+(,-?[0-9]+)*)?")


# ---------------------------------------------------------------- framing (protolib.py)

def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    out.append(value)
    return bytes(out)


def _frames(data: bytes, where: str) -> list[tuple[int, bytes]]:
    """Split ``data`` into (offset, message bytes) by varint length prefixes."""
    frames, pos, n = [], 0, len(data)
    while pos < n:
        start, length, shift = pos, 0, 0
        if data[pos] < 0x80 and pos + 1 + data[pos] <= n:     # a one-byte prefix: most
            length = data[pos]
            frames.append((start, data[pos + 1:pos + 1 + length]))
            pos += 1 + length
            continue
        while True:
            if pos >= len(data) or shift >= 64:
                raise InputError(where, f"message at byte {start}", "the length prefix "
                                 "must be a varint of at most 10 bytes, but the file ends "
                                 "inside it or it runs on (truncated or not a Chakra ET file)")
            byte = data[pos]
            pos, length, shift = pos + 1, length | (byte & 0x7F) << shift, shift + 7
            if not byte & 0x80:
                break
        require(pos + length <= n, where, f"message at byte {start}",
                f"`length <= bytes left` must hold, but got (length={length}, "
                f"bytes left={n - pos}) (truncated file)")
        frames.append((start, data[pos:pos + length]))
        pos += length
    return frames


def _parse(cls, buf: bytes, where: str, field: str):
    msg = cls()
    try:
        msg.ParseFromString(buf)
    except DecodeError as exc:
        raise InputError(where, field, f"must decode as ChakraProtoMsg.{cls.__name__}, "
                         f"but got: {exc}") from None
    return msg


# ---------------------------------------------------------------- node translation

def _clamped(x: float, bounds: tuple[int, int]) -> int:
    return min(max(round(x), bounds[0]), bounds[1])


def _standard_attrs(node: TraceNode, rank: int) -> list[tuple[str, str, object]]:
    """(name, oneof member, value) of the attributes Chakra's feeder reads."""
    a = [("is_cpu_op", "bool_val", False)]
    if node.kind is NodeKind.COMPUTE:
        a += [("num_ops", "int64_val", _clamped(node.num_ops, _I64)),
              ("tensor_size", "uint64_val", _clamped(node.tensor_bytes, _U64))]
    if node.comm_kind is not None:
        a.append(("comm_type", "int64_val", COMM_TYPE[node.comm_kind.name]))
    if node.kind is not NodeKind.COMPUTE:
        a.append(("comm_size", "int64_val", _clamped(node.comm_bytes, _I64)))
    if node.kind in (NodeKind.SEND, NodeKind.RECV):
        src, dst = (rank, node.peer) if node.kind is NodeKind.SEND else (node.peer, rank)
        a += [("comm_src", "int32_val", _clamped(src, _I32)),
              ("comm_dst", "int32_val", _clamped(dst, _I32)),
              ("comm_tag", "int32_val", _clamped(node.tag, _I32))]
    if node.kind is NodeKind.COLLECTIVE or node.group:
        a.append(("pg_name", "string_val",
                  f"{node.group_dim}:{','.join(str(r) for r in node.group)}"))
    return a


def _apply_attrs(node: TraceNode, attrs: dict[str, tuple[str, object]], where: str) -> None:
    """Set ``node``'s fields from its Chakra attributes, name -> (oneof member, value):
    the standard ones first, then ``dse.<field>`` overrides.  The one decoding rule, used
    by the reader and (to find what needs an override) by the writer."""
    f = f"node {node.id}"

    def get(name, member, default):
        if name not in attrs:
            return default
        got, value = attrs[name]
        if got != member:
            raise InputError(where, f"{f}: attr {name!r}",
                             f"must be set as {member}, but got {got}")
        return value

    node.num_ops = float(get("num_ops", "int64_val", 0))
    node.tensor_bytes = float(get("tensor_size", "uint64_val", 0))
    node.comm_bytes = float(get("comm_size", "int64_val", 0))
    node.tag = get("comm_tag", "int32_val", 0)
    comm_type = get("comm_type", "int64_val", None)
    if comm_type is not None:
        name = _COMM_TYPES[comm_type] if 0 <= comm_type < len(_COMM_TYPES) else str(comm_type)
        if name not in CollectiveKind.__members__:
            raise InputError(where, f"{f}: comm_type", f"must be one of "
                             f"{sorted(CollectiveKind.__members__)}, but got {name}")
        node.comm_kind = CollectiveKind[name]
    if node.kind is NodeKind.SEND:
        node.peer = get("comm_dst", "int32_val", -1)
    elif node.kind is NodeKind.RECV:
        node.peer = get("comm_src", "int32_val", -1)
    if "pg_name" in attrs:
        dim, sep, ranks = get("pg_name", "string_val", "").rpartition(":")
        if not sep or not _PG_RANKS.fullmatch(ranks):
            raise InputError(where, f"{f}: pg_name", "must read '<dim>:<rank>,<rank>,...'")
        node.group_dim, node.group = dim, tuple(int(r) for r in ranks.split(",") if r)
    for name, member in _OVERRIDES.items():
        value = get(_PREFIX + name, member, None)
        if value is not None:
            setattr(node, name, tuple(value) if name == "group" else value)


def _check_node(node: TraceNode, where: str) -> None:
    ids = (node.id, *node.data_deps, *node.ctrl_deps)
    floats = (node.duration_s, node.num_ops, node.tensor_bytes, node.comm_bytes, node.latency_s)
    ints = (node.peer, node.peer_delta, node.tag, node.stream, *node.group)
    if (all(isinstance(i, int) and _U64[0] <= i <= _U64[1] for i in ids)
            and all(map(math.isfinite, floats)) and node.duration_s >= 0 and node.latency_s >= 0
            and all(isinstance(i, int) and _I64[0] <= i <= _I64[1] for i in ints)):
        return  # fast path; below, find the rule that fails and name it
    f = f"node {node.id}"
    for i in ids:
        require(isinstance(i, int) and _U64[0] <= i <= _U64[1], where, f,
                f"`0 <= id < 2**64` must hold for the node and its deps, but got {i!r}")
    for name, x in zip(("duration_s", "num_ops", "tensor_bytes", "comm_bytes", "latency_s"), floats):
        require(math.isfinite(x), where, f"{f}: {name}", f"must be finite, but got {x!r}")
    for name in ("duration_s", "latency_s"):
        x = getattr(node, name)
        require(x >= 0, where, f"{f}: {name}", f"`{name} >= 0` must hold, but got ({name}={x!r})")
    raise InputError(where, f, "peer, peer_delta, tag, stream and group ranks must be "
                     f"int64, but got {ints!r}")


def node_to_chakra(node: TraceNode, rank: int, where: str = "trace") -> "Node":
    """Chakra ``Node`` for ``node`` on global rank ``rank`` (the role's representative),
    with a ``dse.<field>`` attribute for every field the standard attributes lose."""
    _check_node(node, where)
    micros = _clamped(node.duration_s * 1e6, _U64)
    attrs = _standard_attrs(node, rank)
    back = TraceNode(id=node.id, name=node.name, kind=node.kind, duration_s=micros * 1e-6)
    _apply_attrs(back, {name: (member, value) for name, member, value in attrs}, where)
    for name, member in _OVERRIDES.items():
        value = getattr(node, name)
        if getattr(back, name) != (tuple(value) if name == "group" else value):
            attrs.append((_PREFIX + name, member, value))
    return Node(id=node.id, name=node.name, type=_TYPE_OF_KIND[node.kind],
                ctrl_deps=node.ctrl_deps, data_deps=node.data_deps, duration_micros=micros,
                attr=[{"name": name, member: {"values": v} if member.endswith("_list") else v}
                      for name, member, v in attrs])


def node_from_chakra(msg: "Node", where: str = "trace") -> TraceNode:
    """The :class:`TraceNode` a Chakra ``Node`` holds (exactly, if :func:`node_to_chakra`
    wrote it; SEND/RECV peers come from ``comm_dst``/``comm_src``)."""
    kind = _KIND_OF_TYPE.get(msg.type)
    if kind is None:
        got = _NODE_TYPES[msg.type] if 0 <= msg.type < len(_NODE_TYPES) else msg.type
        raise InputError(where, f"node {msg.id}: type", "must be COMP_NODE, COMM_COLL_NODE, "
                         f"COMM_SEND_NODE or COMM_RECV_NODE, but got {got}")
    attrs = {}
    for a in msg.attr:
        member = a.WhichOneof("value")
        value = getattr(a, member) if member else None
        attrs[a.name] = (member, list(value.values) if member and member.endswith("_list")
                         else value)
    node = TraceNode(id=msg.id, name=msg.name, kind=kind,
                     duration_s=msg.duration_micros * 1e-6,
                     data_deps=list(msg.data_deps), ctrl_deps=list(msg.ctrl_deps))
    _apply_attrs(node, attrs, where)
    return node


# ---------------------------------------------------------------- files

def _file_name(role: str, taken: set[str]) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", role)[:100].lstrip(".") or "_"
    name, i = f"{stem}.et", 1
    while name.lower() in taken or name == ROLES_FILE:
        name, i = f"{stem}-{i}.et", i + 1
    taken.add(name.lower())
    return name


def _rank_ranges(rank_role: list[str]) -> list[list]:
    out: list[list] = []
    for r, role in enumerate(rank_role):
        if out and out[-1][0] == role:
            out[-1][2] = r + 1
        else:
            out.append([role, r, r + 1])
    return out


_VARINT_TABLE: list[bytes] = []


def _varints(n: int) -> list[bytes]:
    """``_varint(i)`` for ``i < n`` (at least 2**14), computed once and kept."""
    if len(_VARINT_TABLE) < n:
        _VARINT_TABLE[:] = ([bytes((i,)) for i in range(128)]
                            + [bytes((0x80 | (i & 0x7F), i >> 7))
                               for i in range(128, 1 << 14)]
                            + [_varint(i) for i in range(1 << 14, max(n, 1 << 14))])
    return _VARINT_TABLE


def _encode_table(table: NodeTable, rank: int, where: str) -> list[bytes]:
    """The framed Chakra messages of a role's :class:`NodeTable`, byte-identical to
    ``node_to_chakra(node).SerializeToString()`` of each materialized node: a ``Node`` is
    serialized in field-number order (protobuf encoding spec, "Field order"), and of its
    fields only ``id`` (1), ``name`` (2) and the packed ``data_deps`` (5) differ between
    nodes of one body -- ``type`` (3) and ``duration_micros`` (7), ``attr`` (10) are the
    body's, serialized once (with ``id = 0``, an empty name and no deps, which proto3
    leaves out) and split around ``data_deps``."""
    bodies = []
    for p in table.protos:
        buf = node_to_chakra(p, rank, where).SerializeToString()
        assert buf[0] == 0x18 and buf[1] < 0x80      # type: tag 3 varint, one-byte value
        bodies.append((buf[:2], buf[2:]))              # before / after data_deps
    n = len(table.body)
    V = _varints(n + 2)
    vi = lambda i: V[i] if i < len(V) else _varint(i)
    chunks = []
    append = chunks.append
    for i, (b, name, deps) in enumerate(zip(table.body, table.names, table.deps)):
        before, after = bodies[b]
        parts = [b"\x08" + V[i]] if i else []        # id (uint64, left out when 0)
        if name:
            nb = name.encode("utf-8")
            parts.append(b"\x12" + vi(len(nb)) + nb)
        parts.append(before)
        if deps:
            packed = b"".join([V[d] for d in deps])
            parts.append(b"\x2a" + vi(len(packed)) + packed)
        parts.append(after)
        msg = b"".join(parts)
        append(vi(len(msg)))
        append(msg)
    return chunks


def write_trace_set(ts: TraceSet, out_dir: Path) -> list[Path]:
    """Write one ``<role>.et`` per role and ``roles.json`` into ``out_dir``; return the
    paths written (role files in ``ts.roles`` order, then ``roles.json``).

    Every file is encoded in memory first, then written to a temporary file beside its
    target; only when all are written are they renamed into place
    (:func:`dse.report.atomic.atomic_write`), the role files first and ``roles.json``
    last: a failure while encoding or writing leaves the previous trace set as it was
    (a kill between two renames, a window of microseconds, can leave a mix)."""
    out_dir = Path(out_dir)
    unknown = sorted(set(ts.rank_role) - set(ts.roles))
    require(not unknown, str(out_dir), "rank_role",
            f"every rank's role must be a key of roles, but got unknown {unknown[:5]}")
    meta = GlobalMetadata(version=CHAKRA_VERSION,
                          attr=[{"name": k, "string_val": v} for k, v in ts.meta.items()])
    head = meta.SerializeToString()
    taken: set[str] = set()
    files, roles = [], {}
    for role, trace in ts.roles.items():
        path = out_dir / _file_name(role, taken)
        chunks = [_varint(len(head)), head]
        if trace.table is not None:
            chunks += _encode_table(trace.table, trace.rank, f"role {role!r}")
        else:
            for node in trace.nodes:
                buf = node_to_chakra(node, trace.rank, f"role {role!r}").SerializeToString()
                chunks += [_varint(len(buf)), buf]
        files.append((path, b"".join(chunks)))
        roles[role] = {"file": path.name, "rank": trace.rank}
    index = {"format": ROLES_FORMAT, "meta": ts.meta, "roles": roles,
             "rank_role": _rank_ranges(ts.rank_role)}
    text = json.dumps(index, indent=1, ensure_ascii=False) + "\n"
    files.append((out_dir / ROLES_FILE, text.encode("utf-8")))
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_all([files[-1], *files[:-1]])
    return [path for path, _ in files]


def _write_all(files: list[tuple[Path, bytes]], k: int = 0) -> None:
    """Write every ``(path, data)`` through nested :func:`~dse.report.atomic.atomic_write`
    calls: all temporary files are written (and flushed) before the first rename, and
    the renames run innermost first, ``files[0]`` last -- so a failure while writing
    any file renames none, and the index (``files[0]``) names only files already in place."""
    if k < len(files):
        path, data = files[k]
        atomic_write(path, lambda t: (Path(t).write_bytes(data), _write_all(files, k + 1)))


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it) of the varint at ``pos``; IndexError if truncated."""
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _packed(buf: bytes, pos: int, n: int):
    """(values, position after) of the packed varint field whose length prefix is at
    ``pos``; ``None`` if it runs past ``n``."""
    ln, pos = _read_varint(buf, pos)
    end = pos + ln
    if end > n:
        return None
    out = []
    append = out.append
    while pos < end:
        b = buf[pos]
        if b < 0x80:
            append(b)
            pos += 1
        else:
            d, pos = _read_varint(buf, pos)
            append(d)
    return (out, pos) if pos == end else None


def _split_node(buf: bytes):
    """``(id, name, ctrl_deps, data_deps, body)`` of a ``Node`` message laid out as the
    writer lays it out (protobuf's field-number order: ``id`` 1, ``name`` 2, ``type`` 3 of
    one byte, packed ``ctrl_deps`` 4 and ``data_deps`` 5, the rest), with ``body`` the
    message less those four fields; ``None`` for any other layout.  Raises IndexError /
    UnicodeDecodeError on a truncated varint or a bad name."""
    n = len(buf)
    pos, nid, name, ctrl, data = 0, 0, "", [], []
    if n and buf[0] == 0x08:
        nid, pos = _read_varint(buf, 1)
    if pos < n and buf[pos] == 0x12:
        ln, pos = _read_varint(buf, pos + 1)
        if pos + ln > n:
            return None
        name = buf[pos:pos + ln].decode("utf-8")
        pos += ln
    if pos + 1 >= n or buf[pos] != 0x18 or buf[pos + 1] >= 0x80:
        return None
    before = buf[pos:pos + 2]
    pos += 2
    for tag in (0x22, 0x2a):               # ctrl_deps, data_deps
        if pos < n and buf[pos] == tag:
            got = _packed(buf, pos + 1, n)
            if got is None:
                return None
            if tag == 0x22:
                ctrl, pos = got
            else:
                data, pos = got
    return nid, name, ctrl, data, before + buf[pos:]


def _top_fields(buf: bytes) -> set[int] | None:
    """Field numbers of a message's top-level fields (``None`` if it does not split
    into fields)."""
    out, pos, n = set(), 0, len(buf)
    try:
        while pos < n:
            tag, pos = _read_varint(buf, pos)
            wire = tag & 7
            if wire == 0:
                _, pos = _read_varint(buf, pos)
            elif wire == 2:
                ln, pos = _read_varint(buf, pos)
                pos += ln
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
            else:
                return None
            out.add(tag >> 3)
    except IndexError:
        return None
    return out if pos == n else None


def _nodes_by_body(frames: list[tuple[int, bytes]], where: str) -> list[TraceNode] | None:
    """The nodes of ``frames`` as :func:`node_from_chakra` gives them, translating each
    distinct *body* -- a message less its id, name and dependencies, what the nodes of
    one :class:`~dse.trace.graph.NodeTable` body share -- once, and per node only those
    fields, split off the message's bytes (:func:`_split_node`; a body is checked once
    to hold none of them).  ``None`` where a message is laid out otherwise, does not
    decode or its body does not translate (the caller then decodes message by message
    with protobuf, naming the node in the error)."""
    protos: dict[bytes, dict] = {}
    new, out, msg = object.__new__, [], Node()
    append = out.append
    try:
        for _, buf in frames:
            split = _split_node(buf)
            if split is None:
                return None
            nid, name, ctrl, data, body = split
            proto = protos.get(body)
            if proto is None:
                fields = _top_fields(body)
                if fields is None or fields & {1, 2, 4, 5}:
                    return None
                msg.ParseFromString(body)
                proto = protos[body] = node_from_chakra(msg, where).__dict__
            node = new(TraceNode)
            d = node.__dict__
            d.update(proto)
            d["id"], d["name"], d["data_deps"], d["ctrl_deps"] = nid, name, data, ctrl
            append(node)
    except (DecodeError, InputError, IndexError, UnicodeDecodeError):
        return None
    return out


def read_et_file(path: Path) -> tuple[dict[str, str], list[TraceNode]]:
    """(GlobalMetadata string attributes, nodes) of one ET file (gzip accepted, as Chakra's
    ``openFileRd`` does).  Raises :class:`InputError` naming the file on a truncated or
    undecodable message, a node kind other than COMP/COLL/SEND/RECV, a duplicate node id or
    a dependency on a node not in the file."""
    where = str(path)
    try:
        data = Path(path).read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(where, "file", f"must be readable, but got: {exc}") from None
    frames = _frames(data, where)
    require(bool(frames), where, "GlobalMetadata",
            "the file must begin with a length-delimited GlobalMetadata, but it is empty")
    meta = _parse(GlobalMetadata, frames[0][1], where, "GlobalMetadata at byte 0")
    meta_attrs = {}
    for a in meta.attr:
        require(a.WhichOneof("value") == "string_val", where, f"GlobalMetadata.attr {a.name!r}",
                f"must be set as string_val, but got {a.WhichOneof('value')}")
        meta_attrs[a.name] = a.string_val
    nodes = _nodes_by_body(frames[1:], where)
    if nodes is None:            # something unusual: every message through protobuf
        nodes = [node_from_chakra(_parse(Node, buf, where, f"Node at byte {off}"), where)
                 for off, buf in frames[1:]]
    ids = {n.id for n in nodes}
    require(len(ids) == len(nodes), where, "Node.id", "node ids must be unique")
    known = ids.issuperset
    for n in nodes:
        if not (known(n.data_deps) and known(n.ctrl_deps)):
            missing = sorted(set(n.data_deps + n.ctrl_deps) - ids)
            require(False, where, f"node {n.id}: deps",
                    f"every dependency must be a node of this file, but got unknown {missing[:5]}")
    return meta_attrs, nodes


def _load_index(path: Path) -> dict:
    where = str(path)
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(where, "file", f"must be readable JSON (written by "
                         f"write_trace_set), but got: {exc}") from None

    def is_int(x):
        return isinstance(x, int) and not isinstance(x, bool)

    require(isinstance(index, dict) and index.get("format") == ROLES_FORMAT, where, "format",
            f"must be {ROLES_FORMAT!r}")
    meta, roles, ranges = index.get("meta"), index.get("roles"), index.get("rank_role")
    require(isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values()),
            where, "meta", "must be an object of strings")
    require(isinstance(roles, dict), where, "roles", "must be an object")
    for role, entry in roles.items():
        ok = (isinstance(entry, dict) and isinstance(entry.get("file"), str)
              and Path(entry["file"]).name == entry["file"] and is_int(entry.get("rank")))
        require(ok, where, f"roles.{role}", 'must be {"file": <file name>, "rank": <int>}')
    require(isinstance(ranges, list), where, "rank_role", "must be a list of ranges")
    stop = 0
    for i, item in enumerate(ranges):
        ok = (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
              and item[0] in roles
              and is_int(item[1]) and is_int(item[2]) and item[1] == stop < item[2])
        require(ok, where, f"rank_role[{i}]", f"must be [role, {stop}, stop > {stop}] "
                f"with role a key of roles, but got {item!r}")
        stop = item[2]
    return index


def read_trace_set(out_dir: Path) -> TraceSet:
    """Read a directory written by :func:`write_trace_set`; :class:`InputError` (naming
    the file) if ``roles.json`` is missing or malformed, a listed file is missing or bad,
    or a file's GlobalMetadata attributes differ from ``roles.json``'s ``meta``."""
    out_dir = Path(out_dir)
    index_path = out_dir / ROLES_FILE
    require(index_path.is_file(), str(index_path), "file",
            "roles.json must exist next to the .et files (written by write_trace_set)")
    index = _load_index(index_path)
    roles = {}
    for role, entry in index["roles"].items():
        path = out_dir / entry["file"]
        require(path.is_file(), str(path), "file", f"must exist (roles.json lists it for "
                f"role {role!r})")
        meta, nodes = read_et_file(path)
        require(meta == index["meta"], str(path), "GlobalMetadata.attr",
                f"must equal roles.json meta, but got {meta} vs {index['meta']}")
        roles[role] = RankTrace(rank=entry["rank"], nodes=nodes)
    rank_role = [role for role, first, stop in index["rank_role"] for _ in range(first, stop)]
    return TraceSet(roles=roles, rank_role=rank_role, meta=dict(index["meta"]))
