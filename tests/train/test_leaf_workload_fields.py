"""Workload fields that are leaves (dse.spec.layout: attention, cuda_graphs, moe_dispatcher,
moe_drop_pad) are traced values: one compiled step serves every setting of them, and the
setting still changes the result where the physics says it should."""

import math

import jax

from dse.spec.layout import Layout, Workload
from dse.spec.model import get_model
from dse.train.step import train_step
from tests.helpers import h100


def test_one_compile_serves_every_leaf_setting():
    # a wrapper of its own: jit caches are shared by every jax.jit(train_step) in the process
    step = jax.jit(lambda *args: train_step(*args))
    model, hw = get_model("mixtral-8x7b"), h100()
    lay = Layout(tp=2, pp=1, dp=4, ep=4, mbs=1, zero=1, sp=1)
    t = {}
    for att in (0, 1, 2, 3):
        for graphs in (0, 1):
            for disp in (0, 1):
                for pad in (0, 1):
                    wl = Workload(global_batch=64, seq_len=2048, attention=att, framework=2,
                                  cuda_graphs=graphs, moe_dispatcher=disp, moe_drop_pad=pad)
                    t[att, graphs, disp, pad] = float(step(model, wl, lay, hw).step_time_s)
    assert step._cache_size() == 1
    # fsdp's default kernel on Hopper is FA2-class: flash (1) = fa2 (2), slower than the
    # native kernel (3); unfused (0) slower still
    assert t[1, 0, 0, 0] == t[2, 0, 0, 0] > t[3, 0, 0, 0]
    assert t[0, 0, 0, 0] > t[1, 0, 0, 0]
    # no host-launch floor under a full-iteration graph; padding to capacity removes the
    # busiest-rank imbalance
    assert t[1, 1, 0, 0] <= t[1, 0, 0, 0]
    assert t[1, 0, 0, 1] <= t[1, 0, 0, 0]
    assert all(math.isfinite(v) and v > 0 for v in t.values())
