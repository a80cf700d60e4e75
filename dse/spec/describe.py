"""What ``dse list`` prints, rendered from the input schemas' metadata (one source for
the validator, the listings and the help; :mod:`dse.spec.schema`).

* ``dse list models|hardware|knobs|studies``: the catalogs and study files; column
  headers and units, and each knob's hardware-file key, doc and bounds, come from the
  schemas.
* ``dse list engines``: the serving engine profiles (:mod:`dse.infer.engines`), each
  row's figures read from the profile, with the releases an engine text routes to it.
* ``dse list <what> --fields`` (and ``dse list topology`` / ``faults``): every key of
  that file kind -- type, unit, bounds, default, doc -- as the validator checks it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from dse.errors import InputError
from dse.spec.schema import Field, describe

LIST_WHAT = ("models", "hardware", "knobs", "studies", "engines", "topology", "faults")
FIELD_HEAD = ("key", "type", "unit", "bounds", "default", "doc")


def schemas(what: str) -> list[tuple[str, tuple[Field, ...]]]:
    """(title, fields) of every file kind ``dse list <what> --fields`` describes."""
    if what == "models":
        from dse.spec.model import HF_FIELDS, MODEL_FIELDS
        return [("model table (catalog/models.toml, file.toml[:table])", MODEL_FIELDS),
                ("Hugging Face config.json (keys read; others ignored)", HF_FIELDS)]
    if what in ("hardware", "knobs"):
        from dse.spec.hardware import HARDWARE_FIELDS
        return [("hardware table (catalog/hardware.toml, file.toml[:table]; base = <catalog name> "
                 "starts from that entry)", HARDWARE_FIELDS)]
    if what == "studies":
        from dse.spec.study import STUDY_SCHEMAS
        return [(f'study file, kind = "{k}"', fs) for k, fs in STUDY_SCHEMAS.items()]
    from dse.spec.network_schema import FAULTS_FIELDS, TOPOLOGY_FIELDS
    if what == "topology":
        return [("topology file (studies/topologies/*.toml)", TOPOLOGY_FIELDS)]
    return [("fault file ([[fault]] tables; a study scenario's fault = [...])", FAULTS_FIELDS)]


def field_table(what: str) -> tuple[tuple[str, ...], list[tuple]]:
    """(head, rows) of ``dse list <what> --fields``: one block per file kind."""
    rows: list[tuple] = []
    for title, fields in schemas(what):
        if rows:
            rows.append(("",) * len(FIELD_HEAD))
        rows.append((f"# {title}",) + ("",) * (len(FIELD_HEAD) - 1))
        rows += describe(fields)
    return FIELD_HEAD, rows


def _hardware_field(attr: str) -> Field | None:
    from dse.spec.hardware import HARDWARE_FIELDS
    return next((f for f in HARDWARE_FIELDS if f.attr == attr), None)


def catalog_table(what: str, study_dir: str = "studies") -> tuple[tuple[str, ...], list[tuple]]:
    """(head, rows) of ``dse list models|hardware|knobs|studies``."""
    if what == "models":
        from dse.spec.model import catalog
        return (("model", "params", "description"),
                [(n, f"{m.num_params() / 1e9:.1f}B", m.description) for n, m in catalog().items()])
    if what == "hardware":
        from dse.spec.hardware import catalog
        hbm = _hardware_field("hbm_bytes")
        return (("hardware", f"{hbm.key} ({hbm.unit})", "generation", "description"),
                [(n, f"{float(h.hbm_bytes) / hbm.scale:.0f}", h.generation, h.description)
                 for n, h in catalog().items()])
    if what == "engines":
        return engine_table()
    if what == "knobs":
        from dse.spec.variants import KNOBS, _units_text
        rows = []
        for k, (attr, units) in KNOBS.items():
            f = _hardware_field(attr)
            rows.append((k, f.key if f else attr, f"<k>x or {_units_text(units)}", f.doc if f else ""))
        t = _hardware_field("throttle")
        rows.append(("throttle", t.key, f"a number with `{t.bounds_text()}`", t.doc))
        return ("knob", "hardware-file key", "values (--vary KNOB=v1,v2,...)", "what it is"), rows
    from dse.io import load_toml
    d = Path(study_dir)
    if not d.is_dir():
        raise InputError("--dir", "dir", f"must be a directory of study files (<name>.toml), "
                         f"but got {study_dir!r}")
    rows = []
    for f in sorted(d.glob("*.toml")):
        try:
            t = load_toml(f)
            rows.append((f.stem, str(t.get("kind", "?")), str(t.get("description", ""))))
        except InputError as e:
            rows.append((f.stem, "?", f"unreadable: {e}"))
    return ("study", "kind", "description"), rows


#: the releases an engine text routes to each profile (dse.infer.engines.engine_profile)
ENGINE_RELEASES = {
    "trtllm": "TensorRT-LLM C++ executor (trtllm-bench, pre-1.0 or 'C++' / 'TensorRT backend'); "
              "Triton's TensorRT-LLM backend; NIM naming no engine",
    "trtllm_mlperf": "TensorRT-LLM in NVIDIA's MLPerf harness",
    "trtllm_static": "TensorRT-LLM gptSessionBenchmark, static batches (v0.5-0.6)",
    "trtllm_pytorch_eager": "TensorRT-LLM PyTorch backend before 1.0",
    "trtllm_pytorch": "TensorRT-LLM >= 1.0 (PyTorch backend)",
    "nemo": "NeMo inference on the TensorRT-LLM backend",
    "vllm": "vLLM V0: before 0.8, or VLLM_USE_V1=0, or --num-scheduler-steps",
    "vllm_mlperf": "vLLM V0 in AMD's MLPerf harness",
    "vllm_v1": "vLLM V1, 0.8-0.13 (or --no-async-scheduling)",
    "vllm_v1_async": "vLLM >= 0.14, or --async-scheduling from 0.10, or no release stated",
    "sglang": "SGLang before 0.3.6",
    "sglang_overlap": "SGLang >= 0.3.6 (limits by GPU memory from 0.4.8, and TP from 0.5.3)",
    "tgi": "text-generation-inference before 3.0",
    "tgi_v3": "text-generation-inference >= 3.0, or no release stated",
    "lmdeploy": "LMDeploy TurboMind before 0.12",
    "lmdeploy_async": "LMDeploy TurboMind >= 0.12, or no release stated",
}


def engine_table() -> tuple[tuple[str, ...], list[tuple]]:
    """(head, rows) of ``dse list engines``: every serving engine profile, its host time
    per iteration and per running request, whether that host time overlaps the GPU pass,
    the HTTP front end a served request crosses (``frontend_s``: TTFT and e2e, off for
    offline runs), the host issue time per kernel of a pass run without a graph, its CUDA-graph reach
    (the profile's; launch limits may change it, ``launch_defaults``), batching mode,
    whether fp8 / fp4 activation quantization is a kernel of its own (``quant_kernels``) and
    default KV dtype, read from the profile; and the engine texts routed to it."""
    from dse.infer.continuous import NVIDIA_ONLY
    from dse.infer.engines import PROFILES
    rows = []
    for name, e in sorted(PROFILES.items()):
        graphs = (f"to {e.graph_max_batch} " + ("tokens" if e.graphs_by_tokens else "sequences")
                  if e.cuda_graphs else "none")
        batching = ("static batches" if name.endswith("_static") else
                    "mixed prefill + decode" if e.mixed_batches else "prefill first")
        rows.append((name, f"{e.overhead_per_iter_s * 1e3:.3g}", f"{e.seq_overhead_s * 1e6:.3g}",
                     "yes" if e.host_overlap else "no", f"{e.frontend_s * 1e3:.3g}",
                     f"{e.eager_op_s * 1e6:.3g}", graphs, batching,
                     "own kernel" if e.quant_kernels else "fused",
                     "fp8 with fp8/fp4 weights" if e.fp8_kv_with_fp8 else "model dtype",
                     "NVIDIA" if name in NVIDIA_ONLY else "NVIDIA, AMD",
                     ENGINE_RELEASES[name]))
    return (("engine", "host ms/iter", "host us/request", "host overlapped",
             "front end ms", "eager us/kernel", "CUDA graphs",
             "batching", "fp8/fp4 quant", "default KV", "runs on", "engine texts routed to it (dse predict, --engine)"),
            rows)


def listing(what: str, fields: bool = False, study_dir: str = "studies") -> tuple[tuple, list]:
    """(head, rows) of ``dse list <what> [--fields]``."""
    if what == "engines" and fields:
        raise InputError("dse list", "--fields", "engines are profiles, not a file kind: "
                         "use `dse list engines` without --fields")
    if fields or what in ("topology", "faults"):
        return field_table(what)
    return catalog_table(what, study_dir)


def help_text() -> str:
    """The ``dse list -h`` description: every file kind and its top-level keys, from the
    schemas."""
    from dse.spec.study import STUDY_SCHEMAS
    parts = []
    for what in ("models", "hardware", "topology", "faults"):
        for title, fields in schemas(what):
            parts.append(f"{title.split(' (')[0]}: {', '.join(f.key for f in fields)}")
    kinds = "; ".join(f"{k}: {', '.join(f.key for f in fs[3:])}" for k, fs in STUDY_SCHEMAS.items())
    parts.append(f"study file: name, kind, description, then per kind -- {kinds}")
    head = ("Lists the catalogs and study files, or with --fields every key of a file kind "
            "(type, unit, bounds, default, doc) as it is validated. Keys by file kind:")
    return "\n".join([textwrap.fill(head, 88)] + [textwrap.fill(p, 88, initial_indent="  ",
                                                                 subsequent_indent="    ") for p in parts])


def format_table(head: tuple, rows: list) -> str:
    """Columns padded to their widest cell; the last column is left ragged; a row whose
    first cell starts with ``# `` is a block title, printed alone."""
    body = [r for r in [head, *rows] if not str(r[0]).startswith("# ")]
    widths = [max(len(str(r[i])) for r in body) for i in range(len(head) - 1)]
    return "\n".join(str(r[0]) if str(r[0]).startswith("# ") else
                     ("  ".join(str(c).ljust(w) for c, w in zip(r, widths)) + "  " + str(r[-1])).rstrip()
                     for r in [head, *rows])
