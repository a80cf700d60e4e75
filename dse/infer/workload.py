"""The inference workload of one design point: a pytree whose every field is a leaf.

``batch`` sequences served together (one decode step advances each by one token),
``prompt_len`` input tokens per sequence (the prefill), ``gen_len`` output tokens per
sequence (the decode steps), ``precision`` as in :mod:`dse.spec.layout` (0 fp32, 1
bf16/fp16, 2 fp8 linears with 16-bit attention and KV cache).
"""

from __future__ import annotations

from dse.spec.pytree import pytree_dataclass


@pytree_dataclass
class InferenceWorkload:
    batch: int
    prompt_len: int
    gen_len: int
    precision: int = 1

    @property
    def max_context_len(self):
        """Tokens held in the KV cache at the end of generation: ``prompt + gen``."""
        return self.prompt_len + self.gen_len

    @property
    def mean_decode_context_len(self):
        """Mean KV length a decode step reads: step i (0-based) attends over
        ``prompt + i + 1`` tokens, averaged over ``gen_len`` steps:
        ``prompt + (gen + 1) / 2``."""
        return self.prompt_len + (self.gen_len + 1) / 2.0
