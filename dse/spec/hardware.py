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
from pathlib import Path

import jax.numpy as jnp

from dse.errors import InputError, require
from dse.io import load_toml  # noqa: F401  (re-exported: older imports of spec.hardware.load_toml)
from dse.spec.efficiency import GENERATIONS
from dse.spec.pytree import pytree_dataclass

CATALOG = Path(__file__).parent / "catalog" / "hardware.toml"
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")

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
    throttle: float = 0.0
    throttle_clock: float = 0.0
    # global per-generation efficiencies (dse.spec.efficiency), carried as leaves so a
    # batch may mix generations
    eff_gemm: float = 0.85
    eff_gemm_fp8: float = 0.7
    eff_attn: float = 0.6
    eff_attn_bwd: float = 0.85
    eff_hbm: float = 0.9
    eff_nvlink: float = 0.8
    eff_nic: float = 0.9
    kernel_launch_s: float = 4e-6
    tile_m: float = 128.0
    tile_n: float = 128.0
    gemm_cluster: float = 1.0
    name: str = ""
    generation: str = ""
    description: str = ""

    def replace(self, **kw) -> "Hardware":
        return dataclasses.replace(self, **kw)


# (toml key, Hardware field, scale to SI, lower bound exclusive?)  -- positive fields
_POSITIVE = [
    ("num_sms", "num_sms", 1.0),
    ("boost_clock_ghz", "clock_hz", 1e9),
    ("smem_per_sm_kib", "smem_per_sm_bytes", KIB),
    ("l2_mib", "l2_bytes", MIB),
    ("l2_bw_tb_s", "l2_bw_bytes_per_s", 1e12),
    ("hbm_gib", "hbm_bytes", GIB),
    ("hbm_bw_tb_s", "hbm_bw_bytes_per_s", 1e12),
    ("nvlink_domain", "nvlink_domain_gpus", 1.0),
    ("nvlink_gb_s", "nvlink_bw_bytes_per_s", 1e9),
    ("nic_gb_s", "nic_bw_bytes_per_s", 1e9),
    ("tdp_w", "tdp_w", 1.0),
    ("peak_tflops_bf16", "peak_bf16_flops_per_s", 1e12),
    ("peak_tflops_fp16", "peak_fp16_flops_per_s", 1e12),
]
_NONNEG = [
    ("peak_tflops_fp32", "peak_fp32_flops_per_s", 1e12),
    ("peak_tflops_tf32", "peak_tf32_flops_per_s", 1e12),
    ("peak_tflops_fp8", "peak_fp8_flops_per_s", 1e12),
    ("nvlink_latency_us", "nvlink_latency_s", 1e-6),
    ("nic_latency_us", "nic_latency_s", 1e-6),
]
_LABELS = {"description", "generation", "notes", "sources", "pcie_gb_s", "throttle",
           "throttle_clock", "base"}
# measured efficiencies a calibrated file may set for its own machine (``dse calibrate``),
# in (0, 1]; absent keys take the generation's constants (dse.spec.efficiency)
EFF_KEYS = ("eff_gemm", "eff_gemm_fp8", "eff_attn", "eff_attn_bwd", "eff_hbm", "eff_nvlink",
            "eff_nic")
KNOWN_KEYS = {k for k, _, _ in _POSITIVE + _NONNEG} | _LABELS | set(EFF_KEYS)


def _number(where: str, key: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(where, key, f"must be a number, but got {v!r}")
    return float(v)


def check_throttle(where: str, field: str, throttle: float) -> float:
    require(0.0 <= throttle <= 1.0, where, field,
            f"`0 <= throttle <= 1` must hold, but got (throttle={throttle})")
    return throttle


def hardware_from_dict(d: dict, where: str, name: str) -> Hardware:
    """Validate one TOML table (human units) and build a :class:`Hardware` (SI).  A table
    with ``base = "<catalog name>"`` starts from that catalog table; its other keys
    override it."""
    if "base" in d:
        d = with_base(d, where, name)
    unknown = sorted(set(d) - KNOWN_KEYS)
    require(not unknown, where, f"{name}.{unknown[0] if unknown else ''}",
            f"unknown key; allowed keys are {sorted(KNOWN_KEYS)}")
    gen = d.get("generation")
    require(gen in GENERATIONS, where, f"{name}.generation",
            f"must be one of {sorted(GENERATIONS)}, but got {gen!r}")
    kw: dict = {}
    for key, field, scale in _POSITIVE:
        require(key in d, where, f"{name}.{key}", "is required")
        v = _number(where, f"{name}.{key}", d[key])
        require(v > 0, where, f"{name}.{key}", f"`{key} > 0` must hold, but got ({key}={v})")
        kw[field] = v * scale
    for key, field, scale in _NONNEG:
        v = _number(where, f"{name}.{key}", d.get(key, 0.0))
        require(v >= 0, where, f"{name}.{key}", f"`{key} >= 0` must hold, but got ({key}={v})")
        kw[field] = v * scale
    kw["throttle"] = check_throttle(where, f"{name}.throttle",
                                    _number(where, f"{name}.throttle", d.get("throttle", 0.0)))
    kw["throttle_clock"] = 1.0 if d.get("throttle_clock", False) else 0.0
    e = GENERATIONS[gen]
    kw.update(eff_gemm=e.gemm, eff_gemm_fp8=e.gemm_fp8, eff_attn=e.attn,
              eff_attn_bwd=e.attn_bwd, eff_hbm=e.hbm, eff_nvlink=e.nvlink, eff_nic=e.nic,
              kernel_launch_s=e.kernel_launch_s, tile_m=float(e.tile_m),
              tile_n=float(e.tile_n), gemm_cluster=float(e.cluster))
    for key in EFF_KEYS:
        if key in d:
            v = _number(where, f"{name}.{key}", d[key])
            require(0 < v <= 1, where, f"{name}.{key}", f"`0 < {key} <= 1` must hold, but got ({key}={v})")
            kw[key] = v
    return Hardware(name=name, generation=gen, description=str(d.get("description", name)),
                    **kw)


def with_base(d: dict, where: str, name: str) -> dict:
    """The catalog table ``d["base"]`` names, updated with ``d``'s other keys."""
    base = d["base"]
    raw = load_toml(CATALOG)
    require(isinstance(base, str) and base in raw, where, f"{name}.base",
            f"must be a catalog name ({', '.join(sorted(raw))}), but got {base!r}")
    return {**raw[base], **{k: v for k, v in d.items() if k != "base"}}


def load_catalog(path: Path = CATALOG) -> dict[str, Hardware]:
    data = load_toml(path)
    return {n: hardware_from_dict(t, str(path), n) for n, t in data.items()}


_CACHE: dict[str, Hardware] | None = None


def catalog() -> dict[str, Hardware]:
    global _CACHE
    if _CACHE is None:
        _CACHE = load_catalog()
    return _CACHE


def get_hardware(name: str, where: str = "--hardware") -> Hardware:
    """A catalog name, or a path to a TOML file holding one or more hardware tables
    (``path.toml`` takes the first table, ``path.toml:name`` the named one)."""
    cat = catalog()
    if name in cat:
        return cat[name]
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
    clock-derived rates (tensor peak, L2 bandwidth) only when ``throttle_clock`` is 1.

    Returns (peak_flops_per_s, hbm_bw_bytes_per_s, l2_bw_bytes_per_s).
    """
    derate = 1.0 - hw.throttle
    clock_derate = 1.0 - hw.throttle * hw.throttle_clock
    return (precision_peak_flops_per_s * clock_derate,
            hw.hbm_bw_bytes_per_s * derate,
            hw.l2_bw_bytes_per_s * clock_derate)


def stack(hws: list[Hardware]) -> Hardware:
    """Batch several hardware specs into one pytree of 1-D arrays (leading axis = spec)."""
    import jax
    return jax.tree_util.tree_map(lambda *xs: jnp.asarray(xs, dtype=jnp.float32), *hws)


def check_precision(hw: Hardware, precision: int, where: str) -> None:
    """Precision 2 (fp8) needs fp8 tensor cores (``peak_tflops_fp8 > 0``)."""
    if precision == 2:
        require(float(hw.peak_fp8_flops_per_s) > 0, where, "precision",
                f"fp8 needs fp8 tensor cores, but {hw.name} has peak_tflops_fp8 = 0")
