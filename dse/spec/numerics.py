"""The numerics boundary: every spec leaf enters the cost code as float32.

Layout degrees, batch, sequence length and model sizes are integers in the specs, but a
product such as ``global_batch * seq_len`` (16384 x 131072 = 2^31) overflows int32, the
integer type JAX uses without x64.  The cost functions therefore convert every integer
leaf to float32 at entry (:func:`as_float`): float32 holds integers up to 2^24 exactly
and products up to 3.4e38 with a relative error of 6e-8, far under the model's own
uncertainty.  Comparisons with the enumeration constants (``precision ==
PRECISION_FP8``) stay exact for these small integers.  Static fields (aux data) are
untouched.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _leaf(x):
    x = jnp.asarray(x)
    return x.astype(jnp.float32) if jnp.issubdtype(x.dtype, jnp.integer) or x.dtype == jnp.bool_ else x


def as_float(*trees):
    """``trees`` with every integer (or boolean) leaf cast to float32."""
    out = tuple(jax.tree_util.tree_map(_leaf, t) for t in trees)
    return out[0] if len(out) == 1 else out
