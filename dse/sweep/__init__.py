"""Vectorized sweep: grid building, feasibility masks, jit+vmap in chunks, top-k."""
