"""Operations of a training step outside the repeated transformer layer, shared by the
vectorized step (dse.train.step) and the trace generator (dse.trace.generate):

* LM head (last stage): one GEMM (T, V/tp, h) forward and 2x that backward (Megatron's
  vocab-parallel output layer); cross-entropy memory-bound over the ``T*V/tp`` logits,
  :data:`CE_BYTES_PER_LOGIT` of HBM traffic per logit, counted from Megatron-Core's
  unfused ``compute_language_model_loss`` + ``VocabParallelCrossEntropy`` (the default;
  ``--cross-entropy-loss-fusion`` is opt-in): forward transpose-contiguous (r2 w2),
  ``.float()`` (r2 w4), max (r4), subtract max (r4 w4), exp (r4 w4), sum (r4), divide
  (r4 w4) = 42 B; backward scale by the loss gradient (r4 w4), cast to bf16 (r4 w2),
  transpose back (r2 w2) = 18 B.
* Embedding (first stage): gather, dropout and its backward scatter, ~3 passes of T*h.
* Pipeline p2p: one micro-batch's activations, ``T*h`` elements.  Each of the tp ranks
  sends only its ``1/tp`` slice (Megatron's scatter-gather optimisation, Narayanan et
  al. SC'21 §4.1, on by default, ``--no-scatter-gather-tensors-in-pipeline`` turns it
  off); without sequence parallelism the receiver all-gathers the slices over NVLink,
  with it the slices are already the layout the next stage wants.  DeepSpeed's pipeline
  engine (``runtime/pipe/engine.py``) has no such optimisation: every TP rank sends the
  whole tensor.
* Optimizer step: :data:`dse.cost.elementwise.ADAM_BYTES_PER_PARAM` over this GPU's
  parameter shard, memory-bound (plus the fp8 weight re-quantisation with TE fp8).
* DeepSpeed's per-micro-batch fp32 gradient accumulation pass.
"""

from __future__ import annotations

import jax.numpy as jnp

from dse.cost.collectives import group_collective_s, group_p2p_s
from dse.cost.elementwise import (ADAM_BYTES_PER_PARAM, DS_GRAD_ACCUM_BYTES_PER_PARAM,
                                  memory_bound_time_s)
from dse.cost.gemm import gemm_time_s
from dse.spec.hardware import Hardware
from dse.spec.layout import Layout, Workload
from dse.spec.model import Model
from dse.train.memory import embedding_params_per_gpu
from dse.train.rates import Rates


CE_BYTES_PER_LOGIT = 60.0
FP8_WEIGHT_CAST_BYTES = 4.0


def tokens_per_micro_batch(wl: Workload, lay: Layout):
    """Tokens one GPU processes per micro-batch: ``mbs * seq / cp``."""
    return lay.mbs * wl.seq_len / lay.cp


def lm_head_s(model: Model, wl: Workload, lay: Layout, hw: Hardware, r: Rates):
    """(forward GEMM, cross-entropy forward+backward) seconds for one micro-batch; the
    backward GEMMs cost 2x the forward."""
    T = tokens_per_micro_batch(wl, lay)
    V = model.vocab_size * 1.0
    fwd = gemm_time_s(T, V / lay.tp, model.hidden_size * 1.0, r.peak_16_flops_per_s, hw.eff_gemm,
                      r.hbm_bw_raw_bytes_per_s, r.l2_bw_bytes_per_s, hw.l2_bytes, hw.num_sms,
                      hw.tile_m, hw.tile_n, r.act_bytes, hw.kernel_launch_s, cluster=hw.gemm_cluster)
    ce = memory_bound_time_s(CE_BYTES_PER_LOGIT * T * V / lay.tp, r.hbm_bw_bytes_per_s,
                             hw.kernel_launch_s, 10.0)
    return fwd, ce


def embedding_s(model: Model, wl: Workload, lay: Layout, hw: Hardware, r: Rates):
    T = tokens_per_micro_batch(wl, lay)
    return memory_bound_time_s(3.0 * T * model.hidden_size * r.act_bytes, r.hbm_bw_bytes_per_s,
                               hw.kernel_launch_s, 2.0)


def pipeline_p2p(model: Model, wl: Workload, lay: Layout, hw: Hardware, r: Rates):
    """(bytes, seconds) of one stage-to-stage activation transfer; stages sit
    ``tp*cp*dp`` ranks apart (RankGrid order)."""
    full = tokens_per_micro_batch(wl, lay) * model.hidden_size * r.act_bytes
    if wl.framework == 1:
        return full, group_p2p_s(full, lay.tp * lay.cp * lay.dp * 1.0, hw)
    nbytes = full / lay.tp
    gather = jnp.where((lay.sp == 0) & (lay.tp > 1),
                       group_collective_s("all_gather", full, lay.tp * 1.0, 1.0, hw), 0.0)
    return nbytes, group_p2p_s(nbytes, lay.tp * lay.cp * lay.dp * 1.0, hw) + gather


def optimizer_step_s(model: Model, wl: Workload, lay: Layout, hw: Hardware, r: Rates, params_per_gpu):
    """Adam over the local shard (``P/(dp*cp)`` with ZeRO >= 1), plus, with Transformer
    Engine fp8, the once-per-step re-quantisation of the layers' linear weights (TE casts
    weights on the first micro-batch and reuses them for the rest; the embedding and LM
    head stay bf16): read bf16, write the fp8 copy and its transpose,
    :data:`FP8_WEIGHT_CAST_BYTES` per parameter.  The delayed-scaling amax reduction is one
    small all-reduce per step (latency only, not charged)."""
    shard = jnp.where(lay.zero >= 1, params_per_gpu / (lay.dp * lay.cp), params_per_gpu)
    fp8_params = jnp.where(wl.precision == 2, params_per_gpu - embedding_params_per_gpu(model, lay), 0.0)
    return memory_bound_time_s(ADAM_BYTES_PER_PARAM * shard + FP8_WEIGHT_CAST_BYTES * fp8_params,
                               r.hbm_bw_bytes_per_s, hw.kernel_launch_s, 4.0)


def grad_accumulation_s(wl: Workload, hw: Hardware, r: Rates, params_per_gpu):
    """DeepSpeed's separate fp32 gradient-accumulation pass after every micro-batch
    (:data:`dse.cost.elementwise.DS_GRAD_ACCUM_BYTES_PER_PARAM`); 0 under Megatron, which
    fuses it into the weight-gradient GEMM."""
    if wl.framework != 1:
        return 0.0
    return memory_bound_time_s(DS_GRAD_ACCUM_BYTES_PER_PARAM * params_per_gpu, r.hbm_bw_bytes_per_s,
                               hw.kernel_launch_s, 2.0)
