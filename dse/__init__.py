"""dse: hardware-aware performance model and design-space explorer for distributed LLM
training and inference (see README.md and DESIGN.md)."""

import jax

# Step times are sums of many small terms over millions of points; float32 keeps the
# relative error below 1e-6, which is far under the model's own uncertainty, and is the
# fast path on every backend.  Integer layout fields stay exact as int32.
jax.config.update("jax_enable_x64", False)

__version__ = "0.1.0"
