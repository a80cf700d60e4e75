"""The serving sweep's expert-parallel and attention-DP axes (dse.infer.expert_parallel,
dse.infer.sweep) and its one-call vectorized grid."""

import math

import numpy as np
import pytest

from dse.errors import InputError
from dse.graph.ops import KVRead, time_s
from dse.cost.rates import rates
from dse.infer.engines import PROFILES
from dse.infer.expert_parallel import serving_layouts
from dse.infer.forward import forward_ops
from dse.infer.serving import Deployment, concurrency
from dse.infer.sweep import sweep_inference
from dse.spec.hardware import get_hardware
from dse.spec.model import get_model

H100 = get_hardware("h100-sxm-80gb")
H200 = get_hardware("h200-sxm-141gb")
MIX = get_model("mistralai/Mixtral-8x7B-v0.1")
R1 = get_model("deepseek-r1")
L8 = get_model("meta-llama/Llama-3.1-8B")


@pytest.fixture(scope="module")
def mix():
    return sweep_inference(MIX, [H100, H200], 8, 256, 1000, 500, 2, batching="continuous",
                           engine="sglang", ep="auto", attn_dp="auto")


def test_layouts_follow_the_rules():
    lay = serving_layouts(MIX, 8, "auto", "auto")
    rows = set(zip(*(lay[f].tolist() for f in ("tp", "pp", "ep", "attn_dp"))))
    assert (8, 1, 8, 1) in rows and (1, 1, 8, 8) in rows and (2, 1, 8, 4) in rows
    assert (1, 1, 1, 8) in rows and (2, 1, 2, 4) in rows   # attention DP, experts TP-split
    for tp, pp, ep, dp in rows:
        assert tp * dp * pp == 8 and MIX.num_experts % ep == 0
        assert ((tp * dp) % ep == 0) if dp > 1 else (tp % ep == 0)
    dense = serving_layouts(L8, 8, "auto", "auto")
    assert set(dense["ep"]) == {1} and set(dense["attn_dp"]) == {1}
    with pytest.raises(InputError, match="dense"):
        serving_layouts(L8, 8, [2])
    with pytest.raises(InputError, match="num_experts % ep"):
        serving_layouts(MIX, 8, [3])          # 8 experts


def test_static_batching_takes_ep_and_attention_dp():
    """Static batching sweeps EP and attention DP too: its ep = attn_dp = 1 rows are the
    sweep without them, and every row is the scalar inference_step of its layout (the
    replica's batch spread over the attn_dp ranks)."""
    from dse.infer.step import inference_step
    from dse.infer.workload import InferenceWorkload
    full = sweep_inference(MIX, [H100], 8, 64, 512, 128, 2, ep="auto", attn_dp="auto")
    base = sweep_inference(MIX, [H100], 8, 64, 512, 128, 2)
    one = full[(full.ep == 1) & (full.attn_dp == 1)]
    key = ["tp", "pp", "batch"]
    a, b = base.sort_values(key).reset_index(drop=True), one.sort_values(key).reset_index(drop=True)
    for c in ("tpot_s", "ttft_s", "tokens_per_s", "mem_gib"):
        np.testing.assert_allclose(b[c].to_numpy(), a[c].to_numpy(), rtol=1e-6, equal_nan=True)
    ep_rows = full[full.feasible & ((full.ep > 1) | (full.attn_dp > 1))]
    assert set(ep_rows.ep) >= {2, 8} and set(ep_rows.attn_dp) >= {2, 8}
    for _, r in ep_rows.iloc[::7].iterrows():
        wl = InferenceWorkload(batch=r.batch / r.attn_dp, prompt_len=512, gen_len=128, precision=2)
        s = inference_step(MIX, wl, H100, int(r.tp), int(r.pp), int(r.ep), int(r.attn_dp))
        assert r.tpot_s == pytest.approx(float(s.decode_s_per_token), rel=1e-4)
        assert r.tokens_per_s == pytest.approx(float(s.tokens_per_s) * r.attn_dp, rel=1e-4)
    few = full[full.batch < full.attn_dp]
    assert len(few) and (~few.feasible).all()


def test_ep1_rows_are_the_sweep_without_ep(mix):
    base = sweep_inference(MIX, [H100, H200], 8, 256, 1000, 500, 2, batching="continuous", engine="sglang")
    one = mix[(mix.ep == 1) & (mix.attn_dp == 1)]
    key = ["hardware", "tp", "pp", "batch"]
    a = base.sort_values(key).reset_index(drop=True)
    b = one.sort_values(key).reset_index(drop=True)
    assert len(a) == len(b) > 0
    for c in a.columns:
        if a[c].dtype.kind == "f":
            np.testing.assert_allclose(b[c].to_numpy(), a[c].to_numpy(), rtol=1e-6, equal_nan=True)
        else:
            assert (a[c].to_numpy() == b[c].to_numpy()).all(), c


def test_ep_rows_are_the_scalar_serving_model(mix):
    """The vectorized EP / attention-DP points against dse.infer.serving.concurrency with
    the same Deployment (ep, dp), below the KV slots (where the two models agree)."""
    ok = mix[mix.feasible & ((mix.ep > 1) | (mix.attn_dp > 1)) & (mix.batch <= mix.slots)
             & (mix.batch >= 8)]
    assert set(ok.attn_dp) >= {1, 2, 8} and set(ok.ep) >= {2, 8}
    hws = {"h100-sxm-80gb": H100, "h200-sxm-141gb": H200}
    for _, r in ok.iloc[::5].iterrows():
        dep = Deployment(MIX, hws[r.hardware], PROFILES["sglang"], int(r.tp), int(r.pp), 2, 2.0,
                         int(r.ep), int(r.attn_dp))
        s = concurrency(dep, float(r.batch), 1000.0, 500.0, 1)
        assert r.tpot_s == pytest.approx(s.tpot_s, rel=1e-4), (r.tp, r.ep, r.attn_dp, r.batch)
        assert r.tokens_per_s == pytest.approx(s.tokens_per_s, rel=1e-4)
        assert r.ttft_s == pytest.approx(s.ttft_s, rel=1e-4)


def test_memory_per_gpu_falls_as_the_ep_group_grows():
    """DeepSeek-R1 with attention DP over tp = 1 ranks, ep = GPUs of the replica: the
    expert weights per GPU are E f / ep, so the weights per GPU fall with ep; at a fixed
    replica EP inside the TP group keeps E f / tp."""
    w, experts = [], []
    for g in (8, 16, 32):
        d = sweep_inference(R1, [H200], g, 64, 1024, 256, 2, batching="continuous", ep=[g], attn_dp=[g])
        w.append(d.weights_gib.iloc[0])
        experts.append(d.experts_per_gpu.iloc[0])
    assert w[0] > w[1] > w[2] and experts == [32.0, 16.0, 8.0]
    # the expert share of the weights halves with every doubling of ep
    assert (w[0] - w[1]) == pytest.approx(2 * (w[1] - w[2]), rel=0.02)
    d = sweep_inference(R1, [H200], 8, 64, 1024, 256, 2, batching="continuous", ep=[1, 2, 4, 8], attn_dp=[1])
    tp8 = d[d.tp == 8]
    assert tp8.weights_gib.nunique() == 1 and set(tp8.ep) == {1, 2, 4, 8}


@pytest.mark.parametrize("ep", [2, 4, 8, 16, 32])
def test_dp_exchange_time_at_least_bytes_over_link_bandwidth(ep):
    """Attention DP's all-gather / reduce-scatter (dse.infer.moe_serving.dp_gather_bytes):
    each GPU receives (sends) (ep - 1)/ep of the full buffer, across NVLink at most at
    its nominal bandwidth, and beyond one NVLink domain the cross-domain share crosses
    the NIC."""
    T = 512.0
    att = KVRead(T, R1.num_attention_heads / 1.0, 1.0, 1000.0, 576.0)
    g = forward_ops(R1, T, T, att, 1.0, 1.0, 2, 2.0, float(ep), float(ep))
    ops = {op.name: op for op in g.layer}
    ag, rs = ops["moe all-gather (attention DP)"], ops["moe reduce-scatter (attention DP)"]
    assert float(ag.size_bytes) == T * ep * (R1.hidden_size * 1.0 + 8.0 * R1.top_k)
    assert float(rs.size_bytes) == T * ep * R1.hidden_size * 2.0
    for op in (ag, rs):
        size = float(op.size_bytes)
        t = float(time_s(op, H200, rates(H200, 2))) / float(op.calls)
        assert t >= (ep - 1) / ep * size / float(H200.nvlink_bw_bytes_per_s) * (1 - 1e-6)
        domain = float(H200.nvlink_domain_gpus)
        if ep > domain:
            inter = ep / domain
            assert t >= size / domain * (inter - 1) / inter / float(H200.nic_bw_bytes_per_s) * (1 - 1e-6)


def test_attention_dp_points_need_a_request_per_rank():
    d = sweep_inference(MIX, [H200], 8, 4, 256, 32, 2, batching="continuous", ep=[8], attn_dp=[8])
    few = d[d.batch < 8]
    assert len(few) and not few.feasible.any() and few.status.str.contains("attention-DP").all()
    assert few.tokens_per_s.isna().all()


def test_explicit_batches_axis():
    d = sweep_inference(L8, [H100], 1, 4, 256, 32, 1, batching="continuous", batches=[3, 1, 5, 3])
    assert sorted(set(d.batch)) == [1, 3, 5]
    with pytest.raises(InputError, match="batches"):
        sweep_inference(L8, [H100], 1, 4, 256, 32, 1, batches=[0])


def test_cli_infer_sweeps_ep(tmp_path, capsys):
    from dse.cli import main
    out = tmp_path / "r1.csv"
    assert main(["infer", "--model", "deepseek-r1", "--hardware", "h200-sxm-141gb", "--gpus", "8",
                 "--precision", "fp8", "--batch", "64", "--prompt", "1024", "--gen", "256",
                 "-o", str(out)]) == 0
    import pandas as pd
    d = pd.read_csv(out)
    assert set(d.ep) == {1, 2, 4, 8} and set(d.attn_dp) == {1, 2, 4, 8}
    assert "attn_dp" in capsys.readouterr().out
    assert main(["infer", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "2",
                 "--ep", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "dense" in err
    assert not math.isnan(d[d.feasible].tokens_per_s.max())
