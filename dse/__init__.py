"""dse: hardware-aware performance model and design-space explorer for distributed LLM
training and inference (see README.md and docs/architecture.md).

The Python API (:mod:`dse.api`), loaded on first use — ``import dse`` imports neither
JAX nor the cost model and changes no settings::

    import dse
    dse.sweep(model="llama3-70b", hardware="h100-sxm-80gb", gpus=64, global_batch=1024, seq_len=4096)
    dse.estimate(model="llama3-70b", hardware="h100-sxm-80gb", gpus=64, tp=4, pp=4, sp=True)
    dse.compare(model="llama3-70b", hardware=["a100-sxm-80gb", "h100-sxm-80gb"], gpus=[64, 256],
                global_batch=1024, seq_len=4096)
    dse.serve(model="llama3-8b", hardware="h100-sxm-80gb", gpus=1)    # also dse.infer(...)

``dse.sweep`` and ``dse.infer`` are also the subpackages of those names: calling the
package calls the API function (``dse.sweep(...)`` is :func:`dse.api.sweep`), and
``dse.sweep.run`` is still the module.
"""

from __future__ import annotations

import importlib
import sys
import types

__version__ = "0.1.0"

_API = ("sweep", "estimate", "Estimate", "compare", "serve", "infer")
_CALLABLE_PACKAGES = ("sweep", "infer")      # subpackages that are also API functions


class _CallablePackage(types.ModuleType):
    """A subpackage whose call is the :mod:`dse.api` function of the same name."""

    def __call__(self, *args, **kwargs):
        from dse import api
        return getattr(api, self.__name__.rpartition(".")[2])(*args, **kwargs)


class _Package(types.ModuleType):
    """``dse`` itself: marks ``dse.sweep`` / ``dse.infer`` callable as the import system
    attaches them (it sets a subpackage as an attribute of its parent)."""

    def __setattr__(self, name, value):
        if name in _CALLABLE_PACKAGES and type(value) is types.ModuleType:
            value.__class__ = _CallablePackage
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name):
    if name == "api":               # ``dse.api`` without an explicit import of it
        return importlib.import_module(f"{__name__}.api")
    if name in _CALLABLE_PACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _API:
        from dse import api
        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_API))
