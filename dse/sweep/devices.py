"""Every JAX device: the blocks of a sweep sharded over a one-axis device mesh.

A sweep sees ``D = jax.device_count()`` devices -- GPUs, or several CPU host devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=N`` before JAX starts; each runs
its own computation on its own thread).  :func:`sharded_blocks` runs ``D`` blocks at
once, one per device, with ``jax.shard_map`` over the mesh axis ``"d"``
(:func:`device_mesh`): the layout axis of the super-block (``D x LB`` layouts) and its
validity mask are split over the devices, the hardware block, the model and the
workload are replicated, and every device evaluates *and reduces* its own block, so no
data crosses devices; each output gains a leading device axis of length ``D``, which
the host splits back into blocks (:func:`dse.sweep.blocks.iterate_blocks`).  The same
code runs on one CPU (a mesh of one device), on several host devices, and on GPUs.
"""

from __future__ import annotations

import functools
from functools import partial

import jax
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

AXIS = "d"


@functools.lru_cache(maxsize=None)
def device_mesh() -> Mesh:
    """A one-axis mesh (``"d"``) over every device JAX sees."""
    return Mesh(np.array(jax.devices()), (AXIS,))


def _spec(x):
    return P(AXIS) if np.ndim(x) else P()


@partial(jax.jit, static_argnames=("block_fn", "static", "mesh"))
def sharded_blocks(block_fn, static, mesh, model, wl, lay, hw, l_idx, h_idx, valid, n_l):
    """``block_fn(model, wl, lay, hw, l_idx, h_idx, valid, n_l, **dict(static))`` on each
    device's block (module docstring): ``lay``'s mapped leaves, ``l_idx`` and ``valid``
    hold ``D`` blocks along their first axis (0-d leaves of ``lay`` are shared); outputs
    carry a leading axis of one entry per device."""
    def per_device(model, wl, lay, hw, l_idx, h_idx, valid, n_l):
        out = block_fn(model, wl, lay, hw, l_idx, h_idx, valid, n_l, **dict(static))
        return jax.tree_util.tree_map(lambda x: x[None], out)
    rep = P()
    specs = (rep, rep, jax.tree_util.tree_map(_spec, lay), rep, P(AXIS), rep, P(AXIS), rep)
    f = jax.shard_map(per_device, mesh=mesh, in_specs=specs, out_specs=P(AXIS), check_vma=False)
    return f(model, wl, lay, hw, l_idx, h_idx, valid, n_l)
