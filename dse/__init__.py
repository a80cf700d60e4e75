"""dse: hardware-aware performance model and design-space explorer for distributed LLM
training and inference (see README.md and DESIGN.md)."""

import jax

# Step times are sums of many small terms over millions of points; float32 keeps the
# relative error below 1e-6, which is far under the model's own uncertainty, and is the
# fast path on every backend.  Integer layout fields stay exact as int32.
jax.config.update("jax_enable_x64", False)

# Compiled sweep kernels are cached on disk, so a second `dse` command (or study) skips
# the several-second XLA compile; set DSE_JAX_CACHE="" to disable.
import os as _os

_cache = _os.environ.get("DSE_JAX_CACHE", _os.path.join(_os.path.expanduser("~"), ".cache", "dse", "jax"))
if _cache:
    jax.config.update("jax_compilation_cache_dir", _cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)

__version__ = "0.1.0"
