"""Hardware spec: one accelerator and the network it sits in.

Human units live only in the TOML catalog (TFLOP/s, GiB, TB/s, GB/s, us); everything here
is SI.  Every numeric field is a pytree leaf so a sweep can vmap over hardware variants
and Optuna can search them; ``name`` and ``generation`` are labels.

Thermal throttle (docs/architecture.md): ``effective = nominal x (1 - throttle)``, applied to HBM
bandwidth always and to the SM clock (hence tensor peak and L2 bandwidth) when
``throttle_clock`` is 1.  See :func:`effective`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import jax.numpy as jnp

from dse.errors import InputError, require
from dse.io import catalog_key, load_toml  # noqa: F401  (load_toml re-exported: older imports)
from dse.spec.efficiency import GENERATIONS, fp4_efficiency
from dse.spec.power import REFERENCE, SAME_SM_TOL, power_clock, same_sm
from dse.spec.pytree import pytree_dataclass
from dse.spec.schema import Field, validate_table

CATALOG = Path(__file__).parent / "catalog" / "hardware.toml"
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")      # training; serving adds fp4

GIB = 2**30
MIB = 2**20
KIB = 2**10


@pytree_dataclass(label=("name", "generation", "description"))
class Hardware:
    peak_fp32_flops_per_s: float
    peak_tf32_flops_per_s: float
    peak_bf16_flops_per_s: float
    peak_fp16_flops_per_s: float
    peak_fp8_flops_per_s: float
    num_sms: float
    clock_hz: float
    smem_per_sm_bytes: float
    l2_bytes: float
    l2_bw_bytes_per_s: float
    hbm_bytes: float
    hbm_bw_bytes_per_s: float
    nvlink_domain_gpus: float
    nvlink_bw_bytes_per_s: float
    nvlink_latency_s: float
    nic_bw_bytes_per_s: float
    nic_latency_s: float
    tdp_w: float
    peak_fp4_flops_per_s: float = 0.0     # dense NVFP4 / MXFP4 tensor peak (0: none)
    throttle: float = 0.0
    throttle_clock: float = 0.0
    power_clock: float = 1.0              # sustained clock under the power limit (dse.spec.power)
    # global per-generation efficiencies (dse.spec.efficiency), carried as leaves so a
    # batch may mix generations
    eff_gemm: float = 0.85
    eff_gemm_fp8: float = 0.7
    eff_gemm_fp4: float = 0.7     # NVFP4 / MXFP4 serving GEMMs, fraction of the fp4 peak
    eff_attn: float = 0.6
    eff_attn_bwd: float = 0.85
    eff_attn_fa2: float = 1.0     # FA2-class kernel speed / native kernel's (a ratio)
    eff_hbm: float = 0.9
    eff_nvlink: float = 0.8
    eff_nic: float = 0.9
    kernel_launch_s: float = 4e-6
    tile_m: float = 128.0
    tile_n: float = 128.0
    gemm_cluster: float = 1.0
    fp8_transpose: float = 1.0    # 1: TE keeps transposed fp8 copies (TN-only fp8 GEMMs)
    host_cpu_slowdown: float = 1.0  # host (Python) time / an x86 DGX host's (dse.spec.host_cpu)
    dram_latency_s: float = 375e-9  # HBM load-to-use latency (dse.spec.efficiency)
    sfu_ex2_per_sm_clk: float = 0.0  # softmax exponentials per SM per clock (0: not modelled)
    name: str = ""
    generation: str = ""
    description: str = ""

    def replace(self, **kw) -> "Hardware":
        return dataclasses.replace(self, **kw)


def _pos(key, attr, scale, unit, doc, kind="number", hi=None):
    return Field(key, attr, scale, unit, kind=kind, lo=0.0, lo_open=True, hi=hi, required=True, doc=doc)


# sanity ceilings on counts and power, far above any GPU (a B200 has 148 SMs and 1000 W,
# an NVL576 rack 576 GPUs per NVLink domain): they stop a typo (9223372036854775807 SMs,
# 1e30 W) from running as a design point; the domain's cap is the sweep's int32-safe 2^20
MAX_SMS, MAX_DOMAIN_GPUS, MAX_POWER_W = 100_000, 1 << 20, 100_000.0


def _nonneg(key, attr, scale, unit, doc):
    return Field(key, attr, scale, unit, lo=0.0, default=0.0, doc=doc)


# measured efficiencies a calibrated file may set for its own machine (``dse calibrate``),
# in (0, 1]; absent keys take the generation's constants (dse.spec.efficiency)
EFF_KEYS = ("eff_gemm", "eff_gemm_fp8", "eff_gemm_fp4", "eff_attn", "eff_attn_bwd", "eff_attn_fa2", "eff_hbm",
            "eff_nvlink", "eff_nic")

EFF_DOCS = {
    "eff_attn": "tensor-core part of the fused attention's fraction of peak, the softmax "
                "exponentials charged apart at sfu_ex2_per_sm_clk (an end-to-end figure e at head "
                "dim d converts as 1 / (1 / e - tensor FLOP per exponential / 4d), "
                "dse.spec.efficiency.without_exp; default: the generation's)",
    "eff_gemm_fp4": "4-bit (NVFP4 / MXFP4) GEMMs' fraction of the fp4 peak (default: the "
                    "generation's, lowered for a SKU whose fp4 datapath is wider than its "
                    "generation's reference on the same SM, dse.spec.efficiency.fp4_efficiency: "
                    "B300 / GB300 0.410 against B200's 0.458)",
}

# The hardware file schema (human units; docs/architecture.md "Bad input").
HARDWARE_FIELDS: tuple[Field, ...] = (
    Field("generation", kind="string", required=True, choices=tuple(sorted(GENERATIONS)),
          doc="efficiency constants' generation"),
    Field("description", kind="string", default="", doc="free text"),
    Field("notes", kind="string", default="", doc="free text"),
    Field("sources", kind="table", default=None, doc="datasheet citations per field"),
    Field("base", kind="string", default=None, doc="catalog entry this file starts from"),
    _pos("peak_tflops_bf16", "peak_bf16_flops_per_s", 1e12, "TFLOP/s", "dense bf16 tensor peak"),
    _pos("peak_tflops_fp16", "peak_fp16_flops_per_s", 1e12, "TFLOP/s", "dense fp16 tensor peak"),
    _nonneg("peak_tflops_fp32", "peak_fp32_flops_per_s", 1e12, "TFLOP/s", "fp32 (CUDA core) peak"),
    _nonneg("peak_tflops_tf32", "peak_tf32_flops_per_s", 1e12, "TFLOP/s", "dense tf32 tensor peak"),
    _nonneg("peak_tflops_fp8", "peak_fp8_flops_per_s", 1e12, "TFLOP/s", "dense fp8 tensor peak (0: none)"),
    _nonneg("peak_tflops_fp4", "peak_fp4_flops_per_s", 1e12, "TFLOP/s",
            "dense fp4 (NVFP4 / MXFP4) tensor peak, not the sparse figure (0: none)"),
    _pos("num_sms", "num_sms", 1.0, "SMs", "streaming multiprocessors (an integer)", kind="integer",
         hi=MAX_SMS),
    _pos("boost_clock_ghz", "clock_hz", 1e9, "GHz", "clock the tensor peak is quoted at"),
    _pos("smem_per_sm_kib", "smem_per_sm_bytes", KIB, "KiB", "shared memory per SM"),
    _pos("l2_mib", "l2_bytes", MIB, "MiB", "L2 cache capacity"),
    _pos("l2_bw_tb_s", "l2_bw_bytes_per_s", 1e12, "TB/s", "sustained L2 read bandwidth"),
    _pos("hbm_gib", "hbm_bytes", GIB, "GiB", "HBM capacity CUDA sees"),
    _pos("hbm_bw_tb_s", "hbm_bw_bytes_per_s", 1e12, "TB/s", "HBM bandwidth"),
    _pos("nvlink_domain", "nvlink_domain_gpus", 1.0, "GPUs", "GPUs per NVLink domain (an integer)",
         kind="integer", hi=MAX_DOMAIN_GPUS),
    _pos("nvlink_gb_s", "nvlink_bw_bytes_per_s", 1e9, "GB/s", "NVLink per GPU per direction"),
    _nonneg("nvlink_latency_us", "nvlink_latency_s", 1e-6, "us", "per-hop NVLink latency"),
    _pos("nic_gb_s", "nic_bw_bytes_per_s", 1e9, "GB/s", "scale-out NIC per GPU per direction"),
    _nonneg("nic_latency_us", "nic_latency_s", 1e-6, "us", "per-hop network latency"),
    _nonneg("pcie_gb_s", "", 1e9, "GB/s", "PCIe per direction (documentation only)"),
    _pos("tdp_w", "tdp_w", 1.0, "W", "board power", hi=MAX_POWER_W),
    Field("gpu_power_w", "", 1.0, "W", lo=0.0, lo_open=True, hi=MAX_POWER_W, default=None,
          doc="power the GPU itself sustains under load, where a module's TDP also feeds a CPU "
              "(default: tdp_w); sets the power-limited clock (dse.spec.power)"),
    Field("host_cpu_slowdown", "host_cpu_slowdown", 1.0, "ratio", lo=0.0, lo_open=True, hi=100.0,
          default=1.0,
          doc="host CPU time of the framework's Python work relative to an x86 DGX host "
              "(Xeon 8480C = 1); Grace-hosted systems ~2.5-2.75 (dse.spec.host_cpu)"),
    Field("dram_latency_ns", "dram_latency_s", 1e-9, "ns", lo=0.0, hi=1e5, default=None,
          doc="HBM load-to-use latency, the ramp each CUDA-graph-replayed kernel pays "
              "(default: the generation's measured value, dse.spec.efficiency)"),
    Field("sfu_ex2_per_sm_clk", "sfu_ex2_per_sm_clk", 1.0, "per SM per clock", lo=0.0, hi=1024.0,
          default=None,
          doc="MUFU.EX2 exponentials per SM per clock, the softmax's special-function rate "
              "(default: the generation's, dse.spec.efficiency; 0: not modelled)"),
    Field("throttle", "throttle", 1.0, "fraction", lo=0.0, hi=1.0, hi_open=True, default=0.0,
          doc="thermal derate: effective = nominal x (1 - throttle); 1 would leave no bandwidth"),
    Field("throttle_clock", "throttle_clock", kind="bool", default=False,
          doc="the throttle also derates the clocks"),
    *(Field(k, k, 1.0, "fraction", lo=0.0, lo_open=True, hi=1.0, default=None,
            doc=EFF_DOCS.get(k, "measured efficiency (default: the generation's)")) for k in EFF_KEYS),
)
KNOWN_KEYS = {f.key for f in HARDWARE_FIELDS}


def check_throttle(where: str, field: str, throttle: float) -> float:
    """``0 <= throttle < 1`` (throttle = 1 leaves no bandwidth at all)."""
    require(isinstance(throttle, (int, float)) and not isinstance(throttle, bool) and math.isfinite(throttle)
            and 0.0 <= throttle < 1.0, where, field,
            f"`0 <= throttle < 1` must hold (1 leaves no bandwidth), but got (throttle={throttle!r})")
    return float(throttle)


def hardware_from_dict(d: dict, where: str, name: str) -> Hardware:
    """Validate one TOML table (human units, :data:`HARDWARE_FIELDS`, every problem at
    once) and build a :class:`Hardware` (SI).  A table with ``base = "<catalog name>"``
    starts from that catalog table; its other keys override it."""
    require(isinstance(d, dict), where, name, f"must be a table, but got {type(d).__name__}")
    if "base" in d:
        d = with_base(d, where, name)
    v = validate_table(d, HARDWARE_FIELDS, where, name)
    gen = v["generation"]
    kw: dict = {f.attr: v[f.key] * f.scale for f in HARDWARE_FIELDS
                if f.attr and f.kind in ("number", "integer") and v[f.key] is not None}
    kw["throttle_clock"] = 1.0 if v["throttle_clock"] else 0.0
    per_clk = flop_per_sm_clk(kw)
    kw["power_clock"] = sustained_clock(gen, v["gpu_power_w"] or v["tdp_w"], v["num_sms"],
                                        kw["clock_hz"], where, name, per_clk)
    e = GENERATIONS[gen]
    fp4_ratio = fp4_datapath_ratio(REFERENCE.get(str(gen)), per_clk)
    defaults = dict(eff_gemm=e.gemm, eff_gemm_fp8=e.gemm_fp8,
                    eff_gemm_fp4=fp4_efficiency(e.gemm_fp8, e.gemm_fp4, fp4_ratio), eff_attn=e.attn,
                    eff_attn_bwd=e.attn_bwd, eff_attn_fa2=e.attn_fa2, eff_hbm=e.hbm,
                    eff_nvlink=e.nvlink, eff_nic=e.nic)
    defaults["dram_latency_s"] = e.dram_latency_s
    defaults["sfu_ex2_per_sm_clk"] = e.sfu_ex2_per_sm_clk
    for k, val in defaults.items():
        kw.setdefault(k, val)
    kw.update(kernel_launch_s=e.kernel_launch_s, tile_m=float(e.tile_m),
              tile_n=float(e.tile_n), gemm_cluster=float(e.cluster),
              fp8_transpose=float(e.fp8_transpose))
    return Hardware(name=name, generation=gen, description=str(v["description"] or name), **kw)


def fp4_datapath_ratio(ref, flop_per_sm_clk_sku) -> float:
    """A SKU's dense fp4 FLOP per SM per clock over its generation's power reference's
    (:data:`dse.spec.power.REFERENCE`): 1 within the datasheet rounding
    :data:`dse.spec.power.SAME_SM_TOL` allows (B200, GB200), 1.5 for Blackwell Ultra; 0 where
    the generation has no fp4 reference (no per-SKU fp4 efficiency,
    :func:`dse.spec.efficiency.fp4_efficiency`)."""
    if ref is None or ref.flop_per_sm_clk[2] <= 0:
        return 0.0
    ratio = float(flop_per_sm_clk_sku[2]) / ref.flop_per_sm_clk[2]
    return 1.0 if abs(ratio - 1.0) <= SAME_SM_TOL else ratio


def flop_per_sm_clk(hw) -> tuple[float, float, float]:
    """Datasheet dense bf16 / fp8 / fp4 FLOP per SM per clock of a SKU -- a
    :class:`Hardware` or the SI ``kw`` of :func:`hardware_from_dict` -- i.e. which tensor
    datapath it has (:func:`dse.spec.power.same_sm`)."""
    get = hw.get if isinstance(hw, dict) else (lambda k, d=None: getattr(hw, k, d))
    per = float(get("num_sms")) * float(get("clock_hz"))
    return tuple(float(get(k, 0.0) or 0.0) / per
                 for k in ("peak_bf16_flops_per_s", "peak_fp8_flops_per_s", "peak_fp4_flops_per_s"))


def sustained_clock(generation: str, power_w: float, num_sms: float, clock_hz: float,
                    where: str, name: str, flop_per_sm_clk=None) -> float:
    """:func:`dse.spec.power.power_clock`, with a one-line error where the power does not
    exceed the generation's static power (on the reference's tensor datapath;
    ``flop_per_sm_clk`` None: assumed the reference's)."""
    ref = REFERENCE.get(str(generation))
    if ref is not None and same_sm(ref, flop_per_sm_clk):
        require(float(power_w) > ref.static_w, where, f"{name}.gpu_power_w",
                f"`power > {ref.static_w:g} W` (the {generation} static power, dse.spec.power) "
                f"must hold, but got {power_w!r}")
    return float(power_clock(generation, float(power_w), float(num_sms), float(clock_hz),
                             flop_per_sm_clk))


def with_base(d: dict, where: str, name: str) -> dict:
    """The catalog table ``d["base"]`` names, updated with ``d``'s other keys."""
    base = d["base"]
    raw = _raw_catalog()
    key = catalog_key(base, raw) if isinstance(base, str) else None
    require(key is not None, where, f"{name}.base",
            f"must be a catalog name ({', '.join(sorted(raw))}), but got {base!r}")
    return {**raw[key], **{k: v for k, v in d.items() if k != "base"}}



_RAW: dict | None = None


def _raw_catalog() -> dict:
    global _RAW
    if _RAW is None:
        _RAW = load_toml(CATALOG)
    return _RAW


def load_catalog(path: Path = CATALOG) -> dict[str, Hardware]:
    data = load_toml(path)
    return {n: hardware_from_dict(t, str(path), n) for n, t in data.items()}


_CACHE: dict[str, Hardware] | None = None


def catalog() -> dict[str, Hardware]:
    global _CACHE
    if _CACHE is None:
        _CACHE = load_catalog()
    return _CACHE


#: vendor spellings of a catalog entry that name one SKU only (after :func:`_spelling`:
#: lower case, spaces / underscores as hyphens, a vendor / system prefix dropped).  "A100"
#: alone is not here: it is a 40 GB or an 80 GB part.
HARDWARE_ALIASES = {
    **dict.fromkeys(("h100", "h100-sxm", "h100-sxm5", "h100-sxm5-80gb", "h100-80gb-hbm3",
                     "h100-sxm-80g"), "h100-sxm-80gb"),
    **dict.fromkeys(("h100-nvl", "h100-nvl-94g"), "h100-nvl-94gb"),
    **dict.fromkeys(("h200-nvl", "h200-nvl-141g"), "h200-nvl-141gb"),
    **dict.fromkeys(("l40s-48gb", "l40s-48g", "l40s-pcie", "l40s-pcie-48gb"), "l40s"),
    **dict.fromkeys(("l4-24gb", "l4-24g", "l4-pcie"), "l4"),
    **dict.fromkeys(("h100-pcie", "h100-pcie-80g"), "h100-pcie-80gb"),
    **dict.fromkeys(("h200", "h200-sxm", "h200-sxm5", "h200-141gb", "h200-sxm5-141gb",
                     "h200-sxm-141g"), "h200-sxm-141gb"),
    **dict.fromkeys(("a100-sxm4-80gb", "a100-80gb-sxm", "a100-sxm-80g", "a100-sxm4-80g"),
                    "a100-sxm-80gb"),
    **dict.fromkeys(("a100-sxm4-40gb", "a100-40gb-sxm", "a100-sxm-40g"), "a100-sxm-40gb"),
    **dict.fromkeys(("h800", "h800-sxm", "h800-sxm5", "h800-sxm5-80gb", "h800-80gb-hbm3",
                     "h800-sxm-80g"), "h800-sxm-80gb"),
    **dict.fromkeys(("a800-sxm4-80gb", "a800-80gb-sxm", "a800-sxm-80g", "a800-sxm4-80g"),
                    "a800-sxm-80gb"),
    **dict.fromkeys(("gb200-nvl72", "gb200-nvl", "gb200-nvl4"), "gb200"),
    **dict.fromkeys(("gb300-nvl72", "gb300-nvl"), "gb300"),
    **dict.fromkeys(("rtx-pro-6000-blackwell", "rtx-pro-6000-blackwell-server-edition",
                     "rtx-pro-6000-server", "rtx-pro-6000-blackwell-server"), "rtx-pro-6000"),
    **dict.fromkeys(("h20-96gb", "h20-hbm3", "h20-96g"), "h20"),
    "gh200-480gb": "gh200", "mi300x-192gb": "mi300x", "mi325x-256gb": "mi325x",
    "mi355x-288gb": "mi355x",
}
_VENDOR_PREFIX = re.compile(r"^(?:(?:nvidia|amd|instinct|dgx|hgx)-)+")


def _spelling(name: str) -> str:
    """``name`` in the catalog's spelling: lower case, spaces and underscores as hyphens,
    a vendor or system prefix (NVIDIA, AMD, Instinct, DGX, HGX) dropped."""
    return _VENDOR_PREFIX.sub("", "-".join(str(name).strip().lower().replace("_", " ").split()))


def get_hardware(name: str, where: str = "--hardware") -> Hardware:
    """A catalog name (any letter case: ``H100-SXM-80GB`` is ``h100-sxm-80gb``; a vendor
    spelling of one SKU, ``NVIDIA H100 SXM`` or ``GB200 NVL72``, via
    :data:`HARDWARE_ALIASES`), or a path to a TOML file holding one or more hardware tables
    (``path.toml`` takes the first table, ``path.toml:name`` the named one)."""
    cat = catalog()
    key = catalog_key(name, cat)
    if key is None and not str(name).endswith(".toml") and ".toml:" not in str(name):
        spelt = _spelling(name)
        key = spelt if spelt in cat else HARDWARE_ALIASES.get(spelt)
    if key is not None:
        return cat[key]
    path, _, table = name.partition(":")
    if path.endswith(".toml"):
        data = load_toml(Path(path))
        require(bool(data), path, "table", "must define at least one hardware table")
        table = table or next(iter(data))
        require(table in data, path, table, f"must be one of {sorted(data)}")
        require(isinstance(data[table], dict), path, table,
                f"must be a table ([{table}]), but got {type(data[table]).__name__}")
        return hardware_from_dict(data[table], path, table)
    raise InputError(where, "hardware",
                     f"must be a catalog name ({', '.join(sorted(cat))}) or a .toml path, "
                     f"but got {name!r}")


def effective(hw: Hardware, precision_peak_flops_per_s):
    """Throttled rates: ``x_eff = x x (1 - throttle)`` for HBM bandwidth always; for the
    clock-derived rates (tensor peak, L2 bandwidth) only when ``throttle_clock`` is 1, and
    those also times ``power_clock``, the sustained clock under the SKU's power limit
    relative to its generation's reference SKU (:mod:`dse.spec.power`; exactly 1 on a
    reference-power SKU).

    Returns (peak_flops_per_s, hbm_bw_bytes_per_s, l2_bw_bytes_per_s).
    """
    derate = 1.0 - hw.throttle
    clock_derate = (1.0 - hw.throttle * hw.throttle_clock) * hw.power_clock
    return (precision_peak_flops_per_s * clock_derate,
            hw.hbm_bw_bytes_per_s * derate,
            hw.l2_bw_bytes_per_s * clock_derate)


def stack(hws: list[Hardware]) -> Hardware:
    """Batch several hardware specs into one pytree of 1-D arrays (leading axis = spec)."""
    import jax
    return jax.tree_util.tree_map(lambda *xs: jnp.asarray(xs, dtype=jnp.float32), *hws)


#: precision code -> (its name, the tensor cores it needs, the catalog peak that says the GPU
#: has them): fp8 (2), NVFP4 / MXFP4 (3 / 4; training runs NVFP4) and MXFP8 training (5: the
#: block-scaled MMA generation, sm100 / CDNA 4, which comes with the fp4 datapath)
TENSOR_CORES = {2: ("fp8", "fp8 tensor cores", "peak_tflops_fp8"),
                3: ("fp4", "fp4 tensor cores", "peak_tflops_fp4"),
                4: ("fp4", "fp4 tensor cores", "peak_tflops_fp4"),
                5: ("mxfp8", "block-scaled (MX) tensor cores", "peak_tflops_fp4")}
_PEAK_ATTR = {"peak_tflops_fp8": "peak_fp8_flops_per_s", "peak_tflops_fp4": "peak_fp4_flops_per_s"}


def missing_tensor_cores(hw: Hardware, precision: int) -> str:
    """The tensor cores precision code ``precision`` needs and ``hw`` lacks
    (:data:`TENSOR_CORES`), or '' where it has them (or needs none)."""
    need = TENSOR_CORES.get(int(precision))
    return need[1] if need and float(getattr(hw, _PEAK_ATTR[need[2]])) <= 0 else ""


def check_precision(hw: Hardware, precision: int, where: str) -> None:
    """A one-line error where ``hw`` lacks the tensor cores ``precision`` needs
    (:func:`missing_tensor_cores`)."""
    lack = missing_tensor_cores(hw, precision)
    if lack:
        name, _, key = TENSOR_CORES[int(precision)]
        note = ", which come with fp4 ones (Blackwell, CDNA 4)" if int(precision) == 5 else ""
        raise InputError(where, "precision", f"{name} needs {lack}{note}, but {hw.name} has {key} = 0")
