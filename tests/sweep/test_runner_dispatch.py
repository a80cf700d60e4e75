"""dse.sweep.runner: chunked dispatch, and programs dispatched from several threads
(``run_concurrently``) return what one thread returns, in the jobs' order."""

import jax
import jax.numpy as jnp
import numpy as np

from dse.sweep.runner import collect_chunked, dispatch_chunked, run_concurrently


def _program(k):
    """A distinct program per ``k`` (a static argument), so each job compiles its own."""
    return jax.jit(lambda x, k=k: jnp.sin(x * k) + k)


def test_chunks_cover_every_point_once_unpadded():
    x = np.arange(1000, dtype=np.float32)
    f = jax.jit(lambda v: v * 2.0)
    out = collect_chunked(dispatch_chunked(lambda v: f(v), lambda idx: (x[idx],), len(x), max_chunk=128))
    np.testing.assert_array_equal(out, x * 2.0)


def test_concurrent_dispatch_equals_one_thread_in_order():
    x = np.linspace(0.0, 3.0, 700, dtype=np.float32)
    fns = [_program(k) for k in range(1, 6)]
    jobs = [lambda f=f: dispatch_chunked(f, lambda idx: (x[idx],), len(x), max_chunk=256) for f in fns]
    together = [collect_chunked(p) for p in run_concurrently(jobs)]
    alone = [collect_chunked(job()) for job in jobs]
    assert len(together) == len(fns)
    for k, (a, b) in enumerate(zip(together, alone), start=1):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, np.sin(x * k) + k, rtol=1e-6)
    assert run_concurrently([]) == []



def test_jobs_may_run_jobs_and_errors_reach_the_caller():
    """A job that calls run_concurrently itself (the serving study's sweeps) gets its
    results in order; an exception of a job reaches the caller."""
    import pytest

    def outer(k):
        inner = run_concurrently([lambda j=j: 10 * k + j for j in range(3)])
        assert inner == [10 * k, 10 * k + 1, 10 * k + 2]
        return k
    assert run_concurrently([lambda k=k: outer(k) for k in range(4)]) == [0, 1, 2, 3]

    def bad():
        raise ValueError("job failed")
    with pytest.raises(ValueError, match="job failed"):
        run_concurrently([lambda: 1, bad])


def test_tiered_runs_a_cold_program_on_the_host_then_compiles_it():
    """run_tiered: the first HOST_TIER_CALLS small calls of a program run on the host (no
    XLA compile of the program), later ones compiled; both tiers return what the jitted
    program returns (float32, to the last few ulps); a call above MIN_CHUNK points is
    compiled at once."""
    from dse.sweep import runner

    x = np.linspace(0.1, 3.0, 40, dtype=np.float32)
    # two function objects, one program: ``want`` must not compile ``f``
    want = jax.tree_util.tree_map(np.asarray, jax.jit(
        lambda v, w: {"y": jnp.sqrt(v) * w + 1.0, "z": jnp.maximum(v / w, 0.5)})(x, x[::-1]))
    f = jax.jit(lambda v, w: {"y": jnp.sqrt(v) * w + 1.0, "z": jnp.maximum(v / w, 0.5)})
    compiles = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, secs, **kw: compiles.append(event) if event.endswith("backend_compile_duration") else None)
    for call in range(runner.HOST_TIER_CALLS + 2):
        before = len(compiles)
        out = runner.run_tiered(f, lambda idx: (x[idx], x[::-1][idx]), len(x))
        for k in want:
            np.testing.assert_allclose(out[k], want[k], rtol=3e-7)
            assert out[k].shape == (len(x),)
        if call < runner.HOST_TIER_CALLS:
            assert len(compiles) == before, f"call {call} compiled the program"
        elif call == runner.HOST_TIER_CALLS:
            assert len(compiles) > before, "the hot program was not compiled"
    big = np.linspace(0.1, 3.0, runner.MIN_CHUNK + 1, dtype=np.float32)
    g = jax.jit(lambda v: v * 3.0)
    np.testing.assert_array_equal(runner.run_tiered(g, lambda idx: (big[idx],), len(big)), big * 3.0)
    assert runner._tier_calls.get((g, jax.tree_util.tree_structure((big[:1],)))) is None
