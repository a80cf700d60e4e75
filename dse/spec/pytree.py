"""Frozen dataclasses registered as JAX pytrees.

Specs are frozen dataclasses registered as pytrees, structural knobs static, continuous
knobs leaves (docs/architecture.md, "Rooms").  Fields listed in ``static`` travel as pytree aux data (they
must be hashable and equal across a batch); ``label`` fields (names, sources) are dropped
from the pytree entirely so that two specs that differ only by name share one compiled
function.
"""

from __future__ import annotations

import dataclasses

import jax


def pytree_dataclass(cls=None, *, static: tuple[str, ...] = (), label: tuple[str, ...] = ()):
    """Make ``cls`` a frozen dataclass and register it with JAX.

    Leaves are every field not in ``static`` or ``label``; label fields come back as their
    defaults after unflattening (they are metadata for people, not for the cost code).
    """

    def wrap(c):
        c = dataclasses.dataclass(frozen=True)(c)
        names = [f.name for f in dataclasses.fields(c)]
        leaves = tuple(n for n in names if n not in static and n not in label)
        defaults = {f.name: f.default for f in dataclasses.fields(c) if f.name in label}

        def flatten(obj):
            return tuple(getattr(obj, n) for n in leaves), tuple(getattr(obj, n) for n in static)

        def unflatten(aux, children):
            kw = dict(zip(leaves, children))
            kw.update(zip(static, aux))
            kw.update(defaults)
            obj = object.__new__(c)
            for k, v in kw.items():
                object.__setattr__(obj, k, v)
            return obj

        jax.tree_util.register_pytree_node(c, flatten, unflatten)
        c._leaf_fields = leaves
        return c

    return wrap if cls is None else wrap(cls)
