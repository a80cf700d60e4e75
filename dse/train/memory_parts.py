"""The per-GPU memory breakdown every output carries, and the safety margin layouts are
chosen with.

Parts (bytes per GPU of the heaviest pipeline stage, :func:`dse.train.memory.memory_per_gpu`):
weights, gradients (DeepSpeed's reduce bucket included), optimizer states, activations,
and ``reserve`` -- everything the allocator holds beyond the allocated tensors (the
fixed CUDA-context / cuBLAS / NCCL workspace ``RESERVE_BYTES`` plus ``FRAGMENTATION`` of
the allocation).  The parts sum to the total the feasibility mask compares with HBM.

Safety margin (:data:`MEM_MARGIN`, ``--mem-margin``): a *chosen* layout must fit in
``(1 - margin) x HBM``.  Without it the fastest layout is nearly always the one that
fills memory to the last few hundred MiB (the llama70b winners sit 0.06-0.1 GiB under 80
GB), which no practitioner runs: the caching allocator's fragmentation varies run to run
(PyTorch "CUDA memory management": ``memory_reserved`` exceeds ``memory_allocated`` by
a varying 5-10 %, our fixed 5 % is its typical value, not its worst), NCCL grows its
buffers with the communicator count, and a run that fits at step 1 can fail at step 1000.
3 % of an 80 GB GPU is 2.2 GiB, about one fragmentation spread.  A layout the user gives
(``dse estimate``, a fully specified row of ``dse predict``) is what they ran: it is
judged against the full HBM, and ``dse estimate`` warns when it is inside the margin.

A *measured* run's blank settings (``dse predict`` / ``dse validate``: a published row
that leaves ``recompute`` or ``micro_batch_size`` blank) are a question about what that
run did, not a layout to recommend, so they are chosen against the full HBM
(:data:`PREDICT_MEM_MARGIN` = 0; ``--mem-margin`` still applies a planning margin).  The
published benchmark recipes do run at the limit: Megatron-Bridge's Llama 3.1 405B FP8 recipe
on 256 GB200 (``perf_recipes/llama/gb200/llama31.py``
``llama31_405b_pretrain_256gpu_gb200_fp8cs_config``: TP4 PP16 VPP4, ``recompute_granularity``
unset, ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``) runs without recompute where
this model puts it at 182.7 of 185 GiB, inside the 3 % margin, so with the margin the six
such NeMo rows were predicted with block recompute, 11-21 % slow.
"""

from __future__ import annotations

from typing import NamedTuple

from dse.spec.hardware import GIB
from dse.spec.numerics import as_float
from dse.train.memory import memory_per_gpu
from dse.cost.rates import rates

MEM_MARGIN = 0.03
PREDICT_MEM_MARGIN = 0.0   # a measured row's blank settings (module docstring)
# sweep / predict column suffixes, in the order of the breakdown
PARTS = ("weights", "grads", "optimizer", "activations", "reserve")
MEM_COLUMNS = tuple(f"mem_{p}_gib" for p in PARTS)


class MemoryParts(NamedTuple):
    weights_bytes: object
    grads_bytes: object
    optimizer_bytes: object
    activations_bytes: object
    reserve_bytes: object     # allocator reserve + fragmentation (total - allocated)
    total_bytes: object


def memory_parts(model, wl, lay, hw) -> MemoryParts:
    """The breakdown of one design point (vmappable; same numerics boundary as the step)."""
    model, wl, lay = as_float(model, wl, lay)
    m = memory_per_gpu(model, wl, lay, rates(hw, wl.precision).act_bytes, hw.hbm_bytes, hw.fp8_transpose)
    allocated = m.weights_bytes + m.grads_bytes + m.optimizer_bytes + m.activations_bytes
    return MemoryParts(m.weights_bytes, m.grads_bytes, m.optimizer_bytes, m.activations_bytes,
                       m.total_bytes - allocated, m.total_bytes)


def step_and_memory(model, wl, lay, hw):
    """``(StepResult, MemoryParts)`` of one design point, one program (``dse estimate``
    and :func:`dse.api.estimate` run it on the host, :mod:`dse.host_eval`)."""
    from dse.train.step import train_step
    return train_step(model, wl, lay, hw), memory_parts(model, wl, lay, hw)


def gib_columns(parts) -> dict:
    """``{mem_weights_gib: ..., ...}`` of a :class:`MemoryParts` (arrays or scalars)."""
    return {c: getattr(parts, f"{p}_bytes") / GIB for c, p in zip(MEM_COLUMNS, PARTS)}


def check_margin(margin, where: str = "--mem-margin") -> float:
    from dse.errors import require
    try:
        v = float(margin)
    except (TypeError, ValueError):
        v = float("nan")
    require(0.0 <= v < 0.5, where, "mem_margin",
            f"must be a fraction of HBM in [0, 0.5), e.g. 0.03, but got {margin!r}")
    return v


def usable_bytes(hbm_bytes, margin: float):
    """HBM a chosen layout may fill: ``(1 - margin) x HBM``."""
    return hbm_bytes * (1.0 - margin)
