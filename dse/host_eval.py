"""Run a JAX program of one design point on the host, without an XLA compile.

Why: every command that costs *one* design point -- ``dse estimate`` and its per-operator
table, :func:`dse.api.estimate`, ``dse sensitivity``'s gradient and finite differences, the
trace generator's ~50 durations (:func:`dse.trace.generate._costs`) -- runs a program of
~5,000-8,000 scalar operations (the step's operator graph and its reductions).  XLA's CPU
compiler spends 0.3-0.6 ms per operation on such a program (4-30 s measured on the 2-core
dev machine, by model), then runs it in microseconds; one design point never pays that
back.  A module of its own, below every tier that uses it (it imports only JAX and NumPy).
Here the program is the same -- :func:`jax.make_jaxpr` traces the unchanged cost code
into the jaxpr ``jax.jit`` would compile -- but its equations are run in order on 0-d
NumPy values (~10 ms), nothing compiled.

Exactness: the equations NumPy runs here are those whose result IEEE 754 defines to the
bit -- ``add``, ``sub``, ``mul``, ``div`` and ``sqrt`` of floats (correctly rounded, in
the equation's dtype), float ``rem`` (C ``fmod``, exact), ``max``, ``min``, ``floor``,
``ceil``, ``neg``, ``abs``, comparisons, ``select_n``, logical operations, conversions to float or bool, in-range
float-to-int truncation, bool-to-int (exact), ``pow`` of base 2 with an integral
exponent in the normal range (the exact power of two, which XLA returns for every such
exponent: a test checks them all), and the data-movement primitives (broadcast,
reshape, squeeze, slice, split, stack, concatenate).  Every other equation (``log``, ``exp``,
any other ``pow``, integer arithmetic, control flow ...) is executed by XLA
itself, eagerly: ``primitive.bind`` on concrete arrays, one operation-sized program per
primitive and signature (NumPy's ``log`` differs from XLA's in the last bit for ~4 % of
float32 inputs); an elementwise one on an array runs element by element through the
scalar program, one compile per primitive (XLA's compiles take ~40 ms each).  On a
scalar program the result is therefore bit for bit XLA's op-by-op evaluation.  On
vectors it is the IEEE value of every element, that is what XLA gives on the per-op
program: the trace's program costs ops of one kind in one vector call
(:func:`dse.graph.ops.map_ops`), and XLA rewrites a vector divided by a broadcast scalar
as a multiply by the reciprocal, which NumPy does not.  ``jax.jit`` of the whole
program can differ in the last bit where XLA fuses a transcendental function into a
vector loop or rewrites an expression; ``tests/test_host_eval.py`` checks both
(op by op bit for bit, jit to the last bit), and the README trace is byte-identical to
the one of the per-op program.

Units: whatever the program computes.
"""

from __future__ import annotations

from collections import OrderedDict

import jax
import numpy as np

try:     # jax.extend.core is the public name, but importing jax.extend costs ~40 ms (Pallas)
    from jax._src.core import DropVar, Literal
except ImportError:  # pragma: no cover
    from jax.extend.core import DropVar, Literal

_FLOAT_OPS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "max": np.maximum, "min": np.minimum, "sqrt": np.sqrt, "floor": np.floor,
    "ceil": np.ceil, "neg": np.negative, "abs": np.abs,
}
_ANY_OPS = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
}
_BOOL_OPS = {"and": np.logical_and, "or": np.logical_or, "not": np.logical_not,
             "xor": np.logical_xor}
_CALLS = ("jit", "pjit")
# elementwise primitives XLA runs (module docstring): an array equation runs as the scalar
# program once per element (broadcast), so one compile per primitive serves every shape
_ELEMENTWISE = {"log", "log1p", "exp", "exp2", "expm1", "pow", "tanh", "logistic", "sin",
                "cos", "tan", "atan2", "integer_pow", "cbrt", "rsqrt", "erf", "rem"}


def _numpy_rule(eqn):
    """The NumPy function that computes ``eqn`` bit-exactly, or ``None`` (module doc)."""
    name, params = eqn.primitive.name, eqn.params
    in_dtypes = [np.dtype(v.aval.dtype) for v in eqn.invars]
    if name == "split":       # data movement, several results (Plan: ``multi``)
        cuts = np.cumsum(params["sizes"])[:-1]
        return lambda x, a=params["axis"]: np.split(x, cuts, axis=a)
    if len(eqn.outvars) != 1:
        return None
    out = eqn.outvars[0].aval
    out_dtype = np.dtype(out.dtype)
    floats = all(d.kind == "f" for d in in_dtypes)
    if name in _FLOAT_OPS and floats:
        return _FLOAT_OPS[name]
    if name == "rem" and floats and out_dtype.kind == "f":
        return np.fmod       # C fmod, lax.rem's float semantics: the remainder is exact
    if name == "pow" and floats and out_dtype.kind == "f":
        return _pow_rule(eqn, out_dtype)
    if name in _ANY_OPS and (floats or all(d.kind in "biu" for d in in_dtypes)):
        return _ANY_OPS[name]
    if name in _BOOL_OPS and all(d == np.bool_ for d in in_dtypes):
        return _BOOL_OPS[name]
    if name == "select_n" and len(eqn.invars) == 3 and in_dtypes[0] == np.bool_:
        if out.shape == ():
            return lambda p, a, b: b if p else a
        return lambda p, a, b: np.where(p, b, a)
    if name == "convert_element_type":
        src, t = in_dtypes[0], out_dtype.type
        if out_dtype == np.bool_:
            return lambda x: np.not_equal(x, 0)
        if out_dtype.kind == "f" and src.kind in "fbiu":
            # to float: rounded to nearest even (IEEE); bool and int exactly when small
            return lambda x: t(x) if np.ndim(x) == 0 else x.astype(t)
        if out_dtype.kind in "iu" and src == np.bool_:
            return lambda x: t(x) if np.ndim(x) == 0 else x.astype(t)
        if out_dtype.kind in "iu" and src.kind == "f":
            # toward zero; a NaN or out-of-range value goes to XLA (its saturation rule)
            lo, hi = np.iinfo(out_dtype).min, np.iinfo(out_dtype).max
            xla = _xla_rule(eqn)[0]
            return lambda x: (np.trunc(x).astype(t)[()] if np.all((x >= lo) & (x <= hi))
                              else xla(x))
        return None
    # data movement: exact by construction
    if name == "broadcast_in_dim":
        shape, dims = params["shape"], params["broadcast_dimensions"]
        keep = [shape[d] if d in dims else 1 for d in range(len(shape))]
        return lambda x: np.broadcast_to(np.reshape(x, keep), shape)
    if name == "squeeze":
        return lambda x, d=tuple(params["dimensions"]): np.squeeze(x, axis=d)[()]
    if name == "reshape" and params.get("dimensions") is None:
        return lambda x, s=tuple(params["new_sizes"]): np.reshape(x, s)[()]
    if name == "slice":
        idx = tuple(slice(a, b, c) for a, b, c in zip(
            params["start_indices"], params["limit_indices"],
            params["strides"] or (1,) * len(params["start_indices"])))
        return lambda x: x[idx]
    if name == "stack":
        return lambda *xs, a=params["axis"]: np.stack(xs, axis=a)
    if name == "concatenate":
        return lambda *xs, a=params["dimension"]: np.concatenate(xs, axis=a)
    return None


def _pow_rule(eqn, dtype):
    """``pow``: ``2 ** k`` for an integral ``k`` whose power is a normal float is the exact
    ``2^k`` (``np.ldexp``), the value XLA's ``pow`` returns for every such ``k``
    (``tests/test_host_eval.py`` checks them all); any other input runs in XLA
    (module docstring), compiled only then."""
    xla = []
    info = np.finfo(dtype)
    lo, hi = info.minexp, info.maxexp - 1

    def run(x, y):
        x, y = np.asarray(x), np.asarray(y)
        if np.all(x == 2.0) and np.all((y == np.floor(y)) & (y >= lo) & (y <= hi)):
            ones = np.ones(np.broadcast_shapes(x.shape, y.shape), dtype)
            return np.ldexp(ones, y.astype(np.int32))[()]
        if not xla:
            xla.append(_xla_rule(eqn)[0])
        return xla[0](x, y)
    return run


def _xla_rule(eqn):
    """``eqn`` run by XLA on concrete arrays, results back as NumPy values; an elementwise
    primitive (:data:`_ELEMENTWISE`) on arrays runs element by element (XLA's vector and
    scalar kernels agree bit for bit on the tests' inputs, and one scalar program is
    compiled instead of one per shape)."""
    prim, params, multi = eqn.primitive, dict(eqn.params), eqn.primitive.multiple_results

    def run(*xs):
        out = prim.bind(*xs, **params)
        return [np.asarray(o)[()] for o in out] if multi else np.asarray(out)[()]

    out_aval = eqn.outvars[0].aval
    if multi or prim.name not in _ELEMENTWISE or out_aval.shape == ():
        return run, multi
    dtype = np.dtype(out_aval.dtype)

    def per_element(*xs):
        xs = np.broadcast_arrays(*[np.asarray(x) for x in xs])
        out = np.empty(xs[0].shape, dtype)
        for i in np.ndindex(out.shape):
            out[i] = run(*[x[i] for x in xs])
        return out
    return per_element, False


class Plan:
    """A closed jaxpr flattened into a straight list of steps (calls inlined): step
    ``(fn, in_slots, out_slot, multi)`` reads value slots, applies ``fn``, writes its
    result(s).  Literals and constants are slots filled once; an equation of constants
    only is run once, here (by the rule it would run by)."""

    def __init__(self, closed):
        self.values: list = []
        self.steps: list = []
        self.xla_primitives: set[str] = set()
        env: dict = {}
        self.in_slots = [self._new(env, v) for v in closed.jaxpr.invars]
        self.in_dtypes = [np.dtype(v.aval.dtype) for v in closed.jaxpr.invars]
        self._inline(closed.jaxpr, closed.consts, env)
        self.out_slots = [self._read(env, v) for v in closed.jaxpr.outvars]

    def _new(self, env, var) -> int:
        env[var] = len(self.values)
        self.values.append(None)
        return env[var]

    def _read(self, env, v) -> int:
        if isinstance(v, Literal):
            self.values.append(np.asarray(v.val, dtype=v.aval.dtype)[()])
            return len(self.values) - 1
        return env[v]

    def _inline(self, jaxpr, consts, env) -> None:
        for var, c in zip(jaxpr.constvars, consts):
            self._new(env, var)
            self.values[env[var]] = np.asarray(c)[()]
        for eqn in jaxpr.eqns:
            ins = [self._read(env, v) for v in eqn.invars]
            if eqn.primitive.name in _CALLS:
                sub = eqn.params["jaxpr"]
                inner: dict = {}
                for var, slot in zip(sub.jaxpr.invars, ins):
                    inner[var] = slot
                self._inline(sub.jaxpr, sub.consts, inner)
                for var, v in zip(eqn.outvars, sub.jaxpr.outvars):
                    slot = self._read(inner, v)
                    if isinstance(var, DropVar):
                        continue
                    env[var] = slot
                continue
            fn, multi = _numpy_rule(eqn), eqn.primitive.multiple_results
            if fn is None:
                fn, multi = _xla_rule(eqn)
                self.xla_primitives.add(eqn.primitive.name)
            outs = [self._new(env, v) for v in eqn.outvars]
            if all(self.values[i] is not None for i in ins):     # constants only: fold
                with np.errstate(all="ignore"):
                    res = fn(*[self.values[i] for i in ins])
                for slot, x in zip(outs, res if multi else [res]):
                    self.values[slot] = x
                continue
            self.steps.append((fn, ins, outs if multi else outs[0], multi))

    def __call__(self, leaves) -> list:
        vals = list(self.values)
        for slot, x, dt in zip(self.in_slots, leaves, self.in_dtypes):
            vals[slot] = np.asarray(x, dtype=dt)[()]
        with np.errstate(all="ignore"):
            for fn, ins, out, multi in self.steps:
                if multi:
                    for slot, r in zip(out, fn(*[vals[i] for i in ins])):
                        vals[slot] = r
                else:
                    vals[out] = fn(*[vals[i] for i in ins])
        return [vals[i] for i in self.out_slots]


#: the plans kept, least recently used dropped first: a long-lived process (the Python API,
#: `dse sensitivity`'s fresh closures per call) must not grow without bound; a plan is a few
#: thousand equations, and one command uses a handful
PLAN_CACHE_SIZE = 64
_PLANS: OrderedDict = OrderedDict()


def host_call(fn, *args):
    """``fn(*args)`` (a pytree of 0-d NumPy values) by the plan of its jaxpr (module
    docstring); the plan is kept per (``fn``, argument structure and types), so later
    design points of the same shape only run it; at most :data:`PLAN_CACHE_SIZE` plans are
    kept, the least recently used dropped first."""
    leaves, treedef = jax.tree_util.tree_flatten(args)
    avals = tuple((np.shape(x), np.dtype(x.dtype if hasattr(x, "dtype") else np.result_type(x)).str,
                   isinstance(x, (int, float, bool))) for x in leaves)
    key = (fn, treedef, avals)
    hit = _PLANS.get(key)
    if hit is None:
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
        hit = _PLANS[key] = (Plan(closed), jax.tree_util.tree_structure(out_shape))
        while len(_PLANS) > PLAN_CACHE_SIZE:
            _PLANS.popitem(last=False)
    else:
        _PLANS.move_to_end(key)
    plan, out_tree = hit
    return jax.tree_util.tree_unflatten(out_tree, plan(leaves))


def host_design_point(fn, model, wl, lay, hw):
    """``fn(model, wl, lay, hw)`` of one design point by :func:`host_call`, the hardware's
    Python floats entering as float32 scalars: the value every cost formula computes with
    either way (x64 is off), without a weak-to-strong conversion equation wherever a
    hardware rate meets a (float32) model or layout number -- the program the sweep runs on
    its float32 hardware arrays."""
    hw32 = jax.tree_util.tree_map(lambda x: np.float32(x) if isinstance(x, float) else x, hw)
    return host_call(fn, model, wl, lay, hw32)
