"""Hardware variants: a catalog entry plus overrides, declared as data in a study file.

    [[variants]]
    name = "C: 3D HBM 4x BW"
    base = "a100-pcie-80gb"     # a catalog name, or the name of an earlier variant
    hbm_bw = "4x"               # "<k>x" multiplies the base value; "7.8TB/s" sets it
    l2 = "2.5x"                 # or "100MiB"
    hbm_capacity = "160GiB"     # or "2x"
    throttle = 0.27             # in [0, 1]
    throttle_clock = false      # true: the throttle also derates clock-derived rates

Knobs and the :class:`~dse.spec.hardware.Hardware` fields they set (SI inside):

==============  =========================  ======================================
knob            field(s)                   absolute units accepted
==============  =========================  ======================================
hbm_bw          hbm_bw_bytes_per_s         TB/s, GB/s, MB/s
hbm_capacity    hbm_bytes                  TiB, GiB, MiB, KiB, TB, GB, MB, KB
l2              l2_bytes                   (same as hbm_capacity)
l2_bw           l2_bw_bytes_per_s          TB/s, GB/s, MB/s
smem_per_sm     smem_per_sm_bytes          (same as hbm_capacity)
nvlink_bw       nvlink_bw_bytes_per_s      TB/s, GB/s, MB/s  (per GPU per direction)
nic_bw          nic_bw_bytes_per_s         TB/s, GB/s, MB/s  (per GPU per direction)
nvlink_domain   nvlink_domain_gpus         a bare integer
num_sms         num_sms (+ every peak)     a bare integer
clock           clock_hz (+ every peak,    GHz, MHz
                L2 bandwidth)
sfu             sfu_ex2_per_sm_clk         a bare integer (softmax exponentials
                                           per SM per clock: Blackwell 16,
                                           Blackwell Ultra 32)
throttle        throttle                   a number in [0, 1]
throttle_clock  throttle_clock             true / false
description     description                a string
==============  =========================  ======================================

Every numeric knob also takes ``"<k>x"`` (k > 0), which multiplies the base's value.

Scaling rules (GEMM peak = SMs x FLOP/clk/SM x clock, NVIDIA Ampere and Hopper
whitepapers, "peak by precision x SMs x clock" in docs/architecture.md):

* ``clock``: ``peak_p' = peak_p x clock'/clock`` for every precision p (tensor and FP32),
  and ``l2_bw' = l2_bw x clock'/clock`` (the L2 moves a fixed number of bytes per clock:
  A100 5120 B/clk, Ampere whitepaper).  This is the same set of rates the clock throttle
  derates (:func:`dse.spec.hardware.effective`).  The softmax's exponential rate follows
  the clock and the SM count by construction (``sfu x num_sms x clock``,
  :func:`dse.cost.rates.exp_rate`); ``sfu`` sets the per-SM-per-clock figure.
* ``num_sms``: ``peak_p' = peak_p x num_sms'/num_sms`` (per-SM throughput held fixed);
  L2 size and bandwidth are unchanged (they are knobs of their own).
* ``throttle``: ``effective = nominal x (1 - throttle)`` on HBM bandwidth, and on the
  clock-derived rates when ``throttle_clock`` is true (docs/architecture.md, "Thermal throttle").

Bad input raises :class:`dse.errors.InputError` naming the file, the variant and the key.
"""

from __future__ import annotations

import math
import re

from dse.errors import InputError, require
from dse.spec.hardware import GIB, KIB, MIB, Hardware, catalog, check_throttle
from dse.spec.schema import Field, Problems, check_table

BANDWIDTH = {"TB/s": 1e12, "GB/s": 1e9, "MB/s": 1e6}
CAPACITY = {"TiB": 2.0**40, "GiB": GIB, "MiB": MIB, "KiB": KIB,
            "TB": 1e12, "GB": 1e9, "MB": 1e6, "KB": 1e3}
FREQUENCY = {"GHz": 1e9, "MHz": 1e6}
COUNT: dict[str, float] = {}      # bare numbers only

# knob -> (Hardware field, unit table)
KNOBS = {
    "hbm_bw": ("hbm_bw_bytes_per_s", BANDWIDTH),
    "hbm_capacity": ("hbm_bytes", CAPACITY),
    "l2": ("l2_bytes", CAPACITY),
    "l2_bw": ("l2_bw_bytes_per_s", BANDWIDTH),
    "smem_per_sm": ("smem_per_sm_bytes", CAPACITY),
    "nvlink_bw": ("nvlink_bw_bytes_per_s", BANDWIDTH),
    "nic_bw": ("nic_bw_bytes_per_s", BANDWIDTH),
    "nvlink_domain": ("nvlink_domain_gpus", COUNT),
    "num_sms": ("num_sms", COUNT),
    "clock": ("clock_hz", FREQUENCY),
    "sfu": ("sfu_ex2_per_sm_clk", COUNT),
}


def _units_text(units: dict) -> str:
    return ", ".join(units) if units else "a bare number"


def _knob_rule(units: dict) -> str:
    """The wording :func:`parse_value` uses, as a schema rule template."""
    return ("must be '<k>x' (a multiplier of the base value) or "
            + (f"a value with a unit ({_units_text(units)})" if units else "a bare number > 0")
            + ", but got {v!r}")


#: the schema of one ``[[variants]]`` entry (dse.spec.schema; the study schemas of
#: dse.spec.study embed it): labels, the throttle, and every knob of :data:`KNOBS`, whose
#: value (``"<k>x"`` or a quantity with a unit) :func:`parse_value` reads
VARIANT_FIELDS: tuple[Field, ...] = (
    Field("name", kind="string", required=True, doc="the variant's name (unique)",
          rule="must be a non-empty string, but got {v!r}"),
    Field("base", kind="string", required=True, doc="a catalog name or an earlier variant",
          rule="must be a string (a catalog name or an earlier variant), but got {v!r}"),
    Field("description", kind="string", doc="one line for the report (default: base + overrides)",
          rule="must be a string, but got {v!r}"),
    Field("throttle", lo=0.0, hi=1.0, doc="thermal throttle: effective = nominal x (1 - throttle)",
          rule="must be a number in [0, 1], but got {v!r}"),
    Field("throttle_clock", kind="bool", default=False, doc="the throttle also derates clock-derived rates",
          rule="must be true or false, but got {v!r}"),
    *(Field(k, kind="string", unit=_units_text(units), rule=_knob_rule(units),
            doc=f"sets {fld}; '<k>x' multiplies the base value") if units else
      Field(k, kind="quantity", lo=0.0, lo_open=True, rule=_knob_rule(units),
            doc=f"sets {fld}; a bare number, or '<k>x' multiplies the base value")
      for k, (fld, units) in KNOBS.items()),
)
ALLOWED = {f.key for f in VARIANT_FIELDS}
PEAKS = ("peak_fp32_flops_per_s", "peak_tf32_flops_per_s", "peak_bf16_flops_per_s",
         "peak_fp16_flops_per_s", "peak_fp8_flops_per_s", "peak_fp4_flops_per_s")

_NUM = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
_MULT = re.compile(rf"^\s*({_NUM})\s*x\s*$")
_QTY = re.compile(rf"^\s*({_NUM})\s*([A-Za-z/]+)\s*$")


#: a variant is a design point near a real GPU: every knob stays within this factor of the
#: base value, which also keeps every product of the cost code inside float32
#: (:mod:`dse.spec.numerics`); "1e30x" or "1e-30x" is a typo, not a design
VARIANT_RANGE = 1e3


def parse_value(value, units: dict[str, float], base_si: float, where: str, field: str) -> float:
    """One knob value -> SI.  ``"<k>x"`` gives ``k x base_si``; ``"<v><unit>"`` gives
    ``v x scale(unit)``; a bare number is accepted only for unitless knobs (``units``
    empty).  The result must be finite, > 0 and within :data:`VARIANT_RANGE` of ``base_si``."""
    rule = (f"must be '<k>x' (a multiplier of the base value) or "
            f"{'a value with a unit (' + _units_text(units) + ')' if units else 'a bare number'}")
    if isinstance(value, bool):
        raise InputError(where, field, f"{rule}, but got {value!r}")
    if isinstance(value, (int, float)):
        require(not units, where, field, f"{rule}; a bare number has no unit, but got {value!r}")
        si = float(value)
    elif isinstance(value, str):
        m = _MULT.match(value)
        q = _QTY.match(value)
        if m:
            si = float(m.group(1)) * base_si
        elif q and q.group(2) in units:
            si = float(q.group(1)) * units[q.group(2)]
        elif q:
            raise InputError(where, field, f"{rule}; unit {q.group(2)!r} is not one of "
                                           f"[{_units_text(units)}], got {value!r}")
        elif not units and re.fullmatch(rf"\s*{_NUM}\s*", value):
            si = float(value)
        else:
            raise InputError(where, field, f"{rule}, but got {value!r}")
    else:
        raise InputError(where, field, f"{rule}, but got {value!r}")
    require(math.isfinite(si) and si > 0, where, field,
            f"`value > 0` must hold for the resulting value, but got ({field}={value!r} -> {si:g})")
    lo, hi = (base_si / VARIANT_RANGE, base_si * VARIANT_RANGE) if base_si > 0 else (0.0, 1e30)
    require(lo <= si <= hi, where, field,
            f"`{lo:g} <= value <= {hi:g}` must hold (within {VARIANT_RANGE:g}x of the base "
            f"{base_si:g}), but got ({field}={value!r} -> {si:g})")
    return si


def apply_overrides(base: Hardware, over: dict, where: str, field_prefix: str) -> Hardware:
    """``base`` with the knobs of ``over`` applied (see the module docstring); labels
    (name, base, description) are the caller's."""
    kw: dict = {}
    for knob, (fld, units) in KNOBS.items():
        if knob in over:
            kw[fld] = parse_value(over[knob], units, float(getattr(base, fld)), where,
                                  f"{field_prefix}.{knob}")
            if units is COUNT:       # SMs, GPUs per NVLink domain: whole numbers
                require(float(kw[fld]).is_integer(), where, f"{field_prefix}.{knob}",
                        f"must give a whole number (a count), but got {over[knob]!r} -> {kw[fld]:g}")
    # clock and SM count scale the peaks (peak = SMs x FLOP/clk/SM x clock)
    scale = 1.0
    if "clock_hz" in kw:
        c = kw["clock_hz"] / float(base.clock_hz)
        scale *= c
        if "l2_bw_bytes_per_s" not in kw:
            kw["l2_bw_bytes_per_s"] = float(base.l2_bw_bytes_per_s) * c
    if "num_sms" in kw:
        scale *= kw["num_sms"] / float(base.num_sms)
    if scale != 1.0:
        for p in PEAKS:
            kw[p] = float(getattr(base, p)) * scale
    if "throttle" in over:
        t = over["throttle"]
        if isinstance(t, bool) or not isinstance(t, (int, float)):
            raise InputError(where, f"{field_prefix}.throttle",
                             f"must be a number in [0, 1], but got {t!r}")
        kw["throttle"] = check_throttle(where, f"{field_prefix}.throttle", float(t))
    if "throttle_clock" in over:
        tc = over["throttle_clock"]
        require(isinstance(tc, bool), where, f"{field_prefix}.throttle_clock",
                f"must be true or false, but got {tc!r}")
        kw["throttle_clock"] = 1.0 if tc else 0.0
    return base.replace(**kw)


def describe(over: dict) -> str:
    """A short human summary of the overrides, e.g. ``hbm_bw 4x, throttle 0.27``."""
    parts = [f"{k} {over[k]}" for k in KNOBS if k in over]
    if "throttle" in over:
        parts.append(f"throttle {over['throttle']}"
                     + (" (clocks too)" if over.get("throttle_clock") else " (HBM bandwidth)"))
    return ", ".join(parts) or "no change"


def parse_variants(items, where: str, key: str = "variants") -> list[Hardware]:
    """Validate the study file's ``[[variants]]`` array and build one
    :class:`Hardware` per entry, ``name`` set to the variant's name.

    ``base`` is a catalog name or the name of an earlier variant (so "D = C with a
    throttle" can be written as ``base = "C ..."`` plus ``throttle``); multipliers apply
    to that base's values."""
    require(isinstance(items, list) and len(items) > 0 and all(isinstance(v, dict) for v in items),
            where, key, "must be a non-empty array of tables ([[variants]])")
    cat = catalog()
    built: dict[str, Hardware] = {}
    for i, v in enumerate(items):
        name = v.get("name")
        require(isinstance(name, str) and name.strip() != "", where, f"{key}[{i}].name",
                f"must be a non-empty string, but got {name!r}")
        fp = f"{key}[{name!r}]"
        problems = Problems(where)          # unknown keys ("did you mean"), labels' types
        check_table(v, VARIANT_FIELDS, problems, fp)
        problems.raise_if_any()
        require(name not in built, where, f"{fp}.name", "must be unique among the variants")
        b = v.get("base")
        require(isinstance(b, str), where, f"{fp}.base",
                f"must be a string (a catalog name or an earlier variant), but got {b!r}")
        if b in built:
            base = built[b]
        elif b in cat:
            base = cat[b]
        else:
            raise InputError(where, f"{fp}.base",
                             f"must be a catalog name ({', '.join(sorted(cat))}) or the name of an "
                             f"earlier variant ({', '.join(map(repr, built)) or 'none yet'}), but got {b!r}")
        desc = v.get("description")
        require(desc is None or isinstance(desc, str), where, f"{fp}.description",
                f"must be a string, but got {desc!r}")
        hw = apply_overrides(base, v, where, fp)
        built[name] = hw.replace(name=name, description=desc or f"{b}: {describe(v)}")
    return list(built.values())
