"""JAX configuration, set by the entry points (the ``dse`` CLI, the test suite), never by
``import dse``: a library import must not change a user's JAX settings.

* x64 stays off: step times are sums of many small terms over millions of points, and
  float32 keeps their relative error below 1e-6 (far under the model's uncertainty) on
  the fast path of every backend; integers enter the cost code as float32
  (:mod:`dse.spec.numerics`), so no product overflows.
* Compiled sweep kernels are cached on disk (``DSE_JAX_CACHE``, default
  ``~/.cache/dse/jax``; set it to "" to disable), so a second command skips the
  several-second XLA compile.
"""

from __future__ import annotations

import os


def configure() -> None:
    import jax
    jax.config.update("jax_enable_x64", False)
    cache = os.environ.get("DSE_JAX_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "dse", "jax"))
    if cache:
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def xla_flags_with(*flags: str) -> str:
    """``XLA_FLAGS`` as the environment has it, with ``flags`` appended (space-separated):
    for a process about to start JAX, or a child process, that needs more XLA options
    without dropping the ones already set."""
    return " ".join([os.environ.get("XLA_FLAGS", ""), *flags]).strip()
