"""The catalog model a published table's model label names.

Performance tables spell one architecture many ways: NVIDIA's NeMo / Megatron-Bridge
performance summary writes ``DeepSeekV3``, ``Llama3.1-405B``, ``GPT3-175B``,
``Qwen3-30B-A3B``; papers write ``Llama 3.1 70B`` or ``GPT-3 175B``; serving tables give
the Hugging Face repo id.  :func:`catalog_name_of` accepts what
:func:`dse.spec.model.get_model` accepts (a catalog name, a listed ``hf_ids`` repo id, a
re-quantized or mirrored one) and, failing those, the label with every character but
letters and digits removed, compared the same way against the catalog's names,
``aliases`` and ``hf_ids`` repo names (``Llama 3.1 70B`` -> ``llama3170b`` = alias
``llama3.1-70b``), also with a parenthesised remark or a trailing parameter count
dropped (``DeepSeekV3 (w/o MTP)``, ``DeepSeek-V3 671B``).  A label two catalog entries share, or none has, names no model: the
caller then keeps what the row's own columns say."""

from __future__ import annotations

import re

from dse.io import catalog_key
from dse.spec.model import catalog, hf_id_index, requantized_base

_NOT_ALNUM = re.compile(r"[^a-z0-9]")


def squeeze(label: str) -> str:
    """``label`` lower-cased with every character but letters and digits removed."""
    return _NOT_ALNUM.sub("", label.lower())


_SQUEEZED: dict[str, set[str]] | None = None


def _squeezed_index() -> dict[str, set[str]]:
    """Squeezed catalog name, alias and hf repo name -> the catalog names it denotes."""
    global _SQUEEZED
    if _SQUEEZED is None:
        idx: dict[str, set[str]] = {}
        for name in catalog():
            idx.setdefault(squeeze(name), set()).add(name)
        for ident, name in hf_id_index().items():
            idx.setdefault(squeeze(ident.rsplit("/", 1)[-1]), set()).add(name)
        _SQUEEZED = idx
    return _SQUEEZED


def catalog_name_of(label) -> str | None:
    """The catalog name ``label`` denotes (module docstring), or None."""
    if not isinstance(label, str) or not label.strip():
        return None
    text = label.strip()
    key = catalog_key(text, catalog())
    if key is not None:
        return key
    low = text.lower()
    if low in hf_id_index():
        return hf_id_index()[low]
    base = requantized_base(text)
    if base is not None:
        return base
    for form in _forms(text):
        hits = _squeezed_index().get(squeeze(form.rsplit("/", 1)[-1]), set())
        if hits:
            return next(iter(hits)) if len(hits) == 1 else None
    return None


_PARENS = re.compile(r"\s*\([^)]*\)")
_TRAILING_SIZE = re.compile(r"[\s_-]+\d+(?:\.\d+)?\s*[bBtT](?:\s+(?:total|active|params|parameters))?$")


def _forms(label: str) -> list[str]:
    """``label``, then without parenthesised remarks (``DeepSeekV3 (w/o MTP)``), then also
    without a trailing parameter count (``DeepSeek-V3 671B``)."""
    bare = _PARENS.sub("", label).strip()
    return [label, bare, _TRAILING_SIZE.sub("", bare).strip()]
