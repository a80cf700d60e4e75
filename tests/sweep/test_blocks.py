"""Block kernels of the sweep: on-device reductions against brute force, fields constant
over a sweep left unmapped, and blocks sharded over several CPU host devices."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pandas as pd
import pytest

from dse.jaxconfig import xla_flags_with
from dse.spec.layout import Workload
from dse.sweep.blocks import block_inputs, constant_fields, nested_step
from dse.sweep.grid import enumerate_layouts
from dse.sweep.run import hardware_columns
from dse.sweep.stream import HIST_EDGES_S, _front, hist_bins, reduce_points
from tests.helpers import a100, h100, llama70b


def _block(shared: bool, seed: int = 0, lb: int = 512, hb: int = 8):
    """Step times and memory with many ties (small integers), some points over capacity."""
    rng = np.random.default_rng(seed)
    t = rng.integers(1, 40, (lb, hb)).astype(np.float32)
    mem = rng.integers(1, 30, (lb, 1 if shared else hb)).astype(np.float32)
    mem = np.broadcast_to(mem, (lb, hb)).copy()
    cap = np.full(hb, 25.0, np.float32)
    valid = np.ones((lb, hb), bool)
    valid[-7:] = False                                  # a padded tail
    return t, mem, cap, valid


@pytest.mark.parametrize("shared", [True, False])
def test_block_reductions_equal_brute_force(shared):
    lb, hb, n_l, k = 512, 8, 2000, 9
    t, mem, cap, valid = _block(shared)
    l_idx = np.arange(300, 300 + lb, dtype=np.int32)
    h_idx = np.arange(3, 3 + hb, dtype=np.int32)
    top, (best_t, best_p), hist, (fp, fmask, fcount), fits = jax.jit(
        reduce_points, static_argnames="k")(t, mem, cap, l_idx, h_idx, valid, n_l, k=k)
    ok = valid & (mem <= cap[None, :])
    assert np.array_equal(np.asarray(fits), ok)
    p = h_idx[None, :] * n_l + l_idx[:, None]
    df = pd.DataFrame({"hardware": np.broadcast_to(h_idx, (lb, hb))[ok], "mem_gib": mem[ok],
                       "step_time_s": t[ok], "point": p[ok]})
    ref = df.sort_values(["step_time_s", "point"]).head(k)
    assert np.asarray(top[1]).tolist() == ref["point"].tolist()
    for j in range(hb):
        g = df[df["hardware"] == h_idx[j]]
        assert float(best_t[j]) == g["step_time_s"].min()
        assert int(best_p[j]) == g[g["step_time_s"] == g["step_time_s"].min()]["point"].min()
        # bins (edges[b], edges[b + 1]], as np.searchsorted(edges, t) - 1 (integer times sit on edges)
        b = np.clip(np.searchsorted(HIST_EDGES_S.astype(np.float32), g["step_time_s"]) - 1, 0, len(HIST_EDGES_S) - 2)
        want = np.bincount(b, minlength=len(HIST_EDGES_S) - 1)
        assert np.array_equal(np.asarray(hist[j]), want)
    # the host's exact front of the block's candidates is the exact front of the block
    cand = set(np.asarray(fp)[np.asarray(fmask)].tolist())
    assert int(fcount) == len(cand)
    exact = _front(df)
    assert set(exact["point"]) <= cand
    assert _front(df[df["point"].isin(cand)])["point"].tolist() == exact["point"].tolist()


def test_hist_bins_match_searchsorted_at_and_between_edges():
    e = HIST_EDGES_S.astype(np.float32)
    t = np.concatenate([e, np.nextafter(e, np.inf), np.nextafter(e, 0),
                        np.float32(10) ** np.random.default_rng(0).uniform(-4, 7, 5000).astype(np.float32)])
    want = np.clip(np.searchsorted(e, t) - 1, 0, len(e) - 2)
    assert np.array_equal(np.asarray(jax.jit(hist_bins)(t)), want)


def test_fields_constant_over_the_sweep_enter_unmapped_and_change_nothing():
    model, wl = llama70b(), Workload(global_batch=256, seq_len=4096)
    cols = enumerate_layouts(model, 64, 256, 4096)
    base = h100()
    hws = [base.replace(hbm_bw_bytes_per_s=base.hbm_bw_bytes_per_s * f, throttle=th)
           for f in (1.0, 1.5) for th in (0.0, 0.2)]
    hw_cols = hardware_columns(hws)
    hc, lc = constant_fields(hw_cols, "hbm_bytes"), constant_fields(cols, "tp")
    assert {"hbm_bw_bytes_per_s", "throttle"}.isdisjoint(hc) and "num_sms" in hc and "ep" in lc
    l_idx, h_idx = np.arange(100, 612), np.arange(4)
    lay, hw, *_ = block_inputs(cols, hw_cols, l_idx, h_idx, 512, 4, lc, hc)
    assert np.ndim(hw.num_sms) == 0 and np.shape(hw.throttle) == (4,)
    got = jax.jit(nested_step)(model, wl, lay, hw)
    lay, hw, *_ = block_inputs(cols, hw_cols, l_idx, h_idx, 512, 4)
    ref = jax.jit(nested_step)(model, wl, lay, hw)
    for f in ("step_time_s", "mem_bytes", "mfu", "dp_comm_s"):
        np.testing.assert_allclose(np.asarray(getattr(got, f)), np.asarray(getattr(ref, f)), rtol=2e-6)


def _sharded_result() -> dict:
    """The streamed sweep's results on however many devices this process has."""
    from dse.spec.layout import Workload
    from dse.sweep.grid import enumerate_layouts
    from dse.sweep.stream import stream_sweep
    from tests.helpers import a100, h100, llama70b
    model = llama70b()
    wl = Workload(global_batch=256, seq_len=4096)
    cols = enumerate_layouts(model, 64, 256, 4096)
    hws = [a100(), h100(), h100().replace(hbm_bytes=h100().hbm_bytes / 2, name="h100-40g")]
    st = stream_sweep(model, wl, hws, cols, k=7)
    return dict(devices=jax.device_count(), top=st.top["point"].tolist(), best=st.best["point"].tolist(),
                front=sorted(st.pareto["point"].tolist()), hist=st.hist.tolist(),
                t=st.top["step_time_s"].tolist())


# three host devices need a fresh process (the device count is fixed at JAX's start)
_SHARDED = """
import json
from dse.jaxconfig import configure; configure()
from tests.sweep.test_blocks import _sharded_result
print(json.dumps(_sharded_result()))
"""


def test_blocks_sharded_over_host_devices_equal_one_device():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def run(n):
        env = dict(os.environ, XLA_FLAGS=xla_flags_with(f"--xla_force_host_platform_device_count={n}"),
                   JAX_PLATFORMS="cpu",
                   PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
        out = subprocess.run([sys.executable, "-c", _SHARDED], capture_output=True, text=True, env=env, cwd=root)
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout.strip().splitlines()[-1])
    # one device: this process (its compiled sweep is shared with the other sweep tests)
    one, three = _sharded_result(), run(3)
    assert (one["devices"], three["devices"]) == (1, 3)
    for key in ("top", "best", "front", "hist"):
        assert one[key] == three[key], key
    np.testing.assert_allclose(one["t"], three["t"], rtol=1e-6)
