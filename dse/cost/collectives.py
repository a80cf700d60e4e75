"""Collective communication time, alpha-beta model with nccl-tests conventions.

For a buffer of ``size_bytes`` (the full, un-sharded buffer as nccl-tests reports it) on
``n`` ranks over links of bandwidth ``bw`` (bytes/s per direction) and per-step latency
``alpha`` (Thakur, Rabenseifner & Gropp 2005; Patarasuk & Yuan 2009; NCCL
``doc/PERFORMANCE.md`` for the bus-bandwidth factors):

* ring all-reduce       ``2(n-1)/n * S/bw + 2(n-1)*alpha``      (busbw factor 2(n-1)/n)
* reduce-scatter,
  all-gather            ``(n-1)/n * S/bw + (n-1)*alpha``        (busbw factor (n-1)/n;
                        across nodes a flat ring: n - 1 steps, :func:`flat_ring_extra_latency_s`)
* tree all-reduce       ``2 * S/bw + 2*log2(n)*alpha`` (NCCL double binary tree:
                        bandwidth-optimal to a factor n/(n-1), latency log n)
* all-to-all            ``(n-1)/n * S/bw + (n-1)*alpha``
* point-to-point        ``S/bw + alpha``

NCCL picks ring or tree by size; we take the faster (``min``).  With ``protocols=True``
the group collectives (:func:`group_collective_terms`) add NCCL's per-protocol latencies and bandwidths (LL,
LL128, Simple; ``src/graph/tuning.cc``) and take the fastest protocol, as NCCL's tuner
does: a 2 MiB all-reduce on 8 NVLink GPUs costs ~57 us (LL128: 14 us base + 14 steps of
1.9 us + the bytes at 0.92 of the bus bandwidth), not the ~24 us of LL latency at full
bandwidth.

Placement: Megatron orders ranks tp-cp-dp-pp (``RankGrid``), so a group whose members
are ``stride`` ranks apart has ``local = clip(D/stride, 1, n)`` members inside one NVLink
domain of D GPUs.  Groups that span domains run NCCL's hierarchical algorithm: the
intra-domain phase over NVLink and the inter-domain phase with every local GPU driving
its own NIC on a 1/local share (rail-optimized fabrics, NVIDIA DGX SuperPOD reference
architecture).  Latency per inter-node step is the NIC latency.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax.scipy.special import gammaln


def ring_allreduce_s(size_bytes, n, bw, alpha):
    return jnp.where(n > 1, 2.0 * (n - 1) / n * size_bytes / bw + 2.0 * (n - 1) * alpha, 0.0)


def tree_allreduce_s(size_bytes, n, bw, alpha):
    return jnp.where(n > 1, 2.0 * size_bytes / bw + 2.0 * jnp.log2(jnp.maximum(n, 1.0)) * alpha, 0.0)


def allreduce_s(size_bytes, n, bw, alpha):
    """NCCL-style choice of ring or tree, whichever is faster."""
    return jnp.minimum(ring_allreduce_s(size_bytes, n, bw, alpha),
                       tree_allreduce_s(size_bytes, n, bw, alpha))


def scatter_gather_s(size_bytes, n, bw, alpha):
    """Reduce-scatter or all-gather of a ``size_bytes`` buffer (also all-to-all)."""
    return jnp.where(n > 1, (n - 1) / n * size_bytes / bw + (n - 1) * alpha, 0.0)


def p2p_s(size_bytes, bw, alpha):
    return size_bytes / bw + alpha


def _split(n, stride, domain):
    """(members per NVLink domain, number of domains the group spans)."""
    local = jnp.clip(jnp.floor(domain / stride), 1.0, n)
    return local, n / local


def flat_ring_extra_latency_s(local, inter, a_nv):
    """Latency a flat ring over ``n = local * inter`` ranks pays beyond the hierarchical
    decomposition's ``(local-1) a_nv + (inter-1) a_nic``: NCCL's own latency model
    (``src/graph/tuning.cc``: ``nsteps = nRanks - 1``, ``nInterSteps = nNodes - 1`` for
    ring all-gather / reduce-scatter, ``lat = (nsteps - nInterSteps) * intraLat +
    nInterSteps * interLat``) charges ``n - inter`` NVLink steps, i.e.
    ``(inter - 1)(local - 1)`` more than one node's ring.  Zero inside one NVLink domain;
    at 512 ranks on 64 nodes it is 441 steps, ~0.26 ms per collective at 0.6 us: the term
    that makes per-module ZeRO-3 / FSDP collectives latency-bound at scale."""
    return jnp.where(inter > 1, (inter - 1.0) * (local - 1.0) * a_nv, 0.0)


# NCCL's per-protocol cost model (NVIDIA/nccl ``src/graph/tuning.cc``,
# ``ncclTunerConstantsDefaults`` and ``ncclTopoTuneModel``), protocols in the order
# (LL, LL128, Simple).  NCCL predicts ``time = baseLat + steps * hwLat + S / busBw`` for
# every (algorithm, protocol) and launches the fastest; these are its constants:
#   baseLatencies (us)      ring 6.6 / 14.0 / 8.4,  tree 6.8 / 14.0 / 8.4
#   hwLatencies NVLINK (us) ring 0.6 / 1.9 / 3.4,   tree 0.6 / 1.25 / 4.0
#   hwLatencies NET (us)    ring 2.7 / 4.0 / 14.0,  tree 5.0 / 8.5 / 14.0
#   bandwidth               ring LL ``min(llMaxBw, 0.5 busBw)``, ring LL128 ``0.92 busBw``;
#                           tree all-reduce ``0.92 busBw``, then LL ``/3.8``, LL128
#                           ``x 7/9`` (one node) or ``x 120/128`` (across nodes)
#   net overhead            inter-node rings pay ``max(hwLat, netOverhead)`` per NVLink
#                           step, netOverhead 1 us (x3 for Simple)
# The hardware's ``nvlink_latency_s`` / ``nic_latency_s`` are the LL ring hop latencies
# (0.6 / 2.7 us in NCCL); LL128 and Simple hops scale with them by NCCL's ratios, so a
# calibrated latency (``dse calibrate``) moves all three.  The base latencies are NCCL's
# software constants (launch and kernel set-up), not scaled.  ``llMaxBw`` is a per-GPU-
# generation cap (Ampere 87.7 GB/s, Hopper 141, Blackwell 282 on one node) that sits at
# 0.37-0.38 of the ring's NVLink bus bandwidth on Ampere (87.7 of 240) and Hopper (141 of
# 370); LL over NVLink therefore runs at :data:`NVLINK_LL_BW_FRACTION` of Simple.  The
# ``bw`` the model carries (``nominal x eff``) is the Simple protocol's bus bandwidth.
NCCL_BASE_LAT_S = {"ring": (6.6e-6, 14.0e-6, 8.4e-6), "tree": (6.8e-6, 14.0e-6, 8.4e-6)}
NCCL_NVLINK_HOP_RATIO = {"ring": (1.0, 1.9 / 0.6, 3.4 / 0.6), "tree": (1.0, 1.25 / 0.6, 4.0 / 0.6)}
NCCL_NET_HOP_RATIO = {"ring": (1.0, 4.0 / 2.7, 14.0 / 2.7), "tree": (5.0 / 2.7, 8.5 / 2.7, 14.0 / 2.7)}
NCCL_NET_OVERHEAD_S = (1.0e-6, 1.0e-6, 3.0e-6)
NVLINK_LL_BW_FRACTION = 0.37
NVLINK_PROTO_BW = (NVLINK_LL_BW_FRACTION, 0.92, 1.0)
NIC_PROTO_BW = (0.5, 0.92, 1.0)
TREE_PROTO_BW_ONE_NODE = (0.92 / 3.8, 0.92 * 7.0 / 9.0, 0.92)
TREE_PROTO_BW_NET = (0.92 / 3.8, 0.92 * 120.0 / 128.0, 0.92)
PROTOCOLS = ("LL", "LL128", "Simple")


def _protocol_terms(kind: str, size_bytes, local, inter, nv_bw, nic_bw, a_nv, a_nic, p: int):
    """``(t_nvlink, t_nic)`` of collective ``kind`` under NCCL protocol ``p`` (index into
    :data:`PROTOCOLS`), base latency included in the NVLink term (module docstring and
    :func:`group_collective_terms` for the decomposition)."""
    across = inter > 1
    bw_nv = nv_bw * NVLINK_PROTO_BW[p]
    bw_nic = nic_bw * NIC_PROTO_BW[p]
    hop_nv = a_nv * NCCL_NVLINK_HOP_RATIO["ring"][p]
    # inter-node rings pay the network post overhead on every step
    hop_nv = jnp.where(across, jnp.maximum(hop_nv, NCCL_NET_OVERHEAD_S[p]), hop_nv)
    hop_nic = a_nic * NCCL_NET_HOP_RATIO["ring"][p]
    base = NCCL_BASE_LAT_S["ring"][p]
    if kind == "all_reduce":
        t_nv = 2.0 * scatter_gather_s(size_bytes, local, bw_nv, hop_nv)
        ring = ring_allreduce_s(size_bytes / local, inter, bw_nic, hop_nic)
        # NCCL's tree: a chain inside each node, a double binary tree across nodes
        tree_lat = NCCL_BASE_LAT_S["tree"][p] + 2.0 * (
            (local - 1.0) * a_nv * NCCL_NVLINK_HOP_RATIO["tree"][p]
            + jnp.log2(jnp.maximum(inter, 1.0)) * a_nic * NCCL_NET_HOP_RATIO["tree"][p])
        tree = 2.0 * size_bytes / (jnp.where(across, nic_bw * local * TREE_PROTO_BW_NET[p],
                                             nv_bw * TREE_PROTO_BW_ONE_NODE[p])) + tree_lat
        t_ring = base + t_nv + ring
        # NCCL picks the faster algorithm; the tree's time is reported as the NIC term
        # across nodes (its bottleneck), as the NVLink term inside one
        use_tree = tree < t_ring
        t_nv = jnp.where(use_tree, jnp.where(across, 0.0, tree), base + t_nv)
        t_nic = jnp.where(use_tree, jnp.where(across, tree, 0.0), ring)
        return (jnp.where(local * inter > 1, t_nv, 0.0), t_nic)
    if kind in ("reduce_scatter", "all_gather"):
        # NCCL runs these as one flat ring over all n ranks (no tree): n - 1 steps, of
        # which inter - 1 cross the network and n - inter stay on NVLink
        # (:func:`flat_ring_extra_latency_s`); the bandwidth terms are the hierarchical
        # ones (a flat ring with one channel per NIC moves the same bytes per link)
        t_nv = (scatter_gather_s(size_bytes, local, bw_nv, hop_nv)
                + flat_ring_extra_latency_s(local, inter, hop_nv))
        t_nic = scatter_gather_s(size_bytes / local, inter, bw_nic, hop_nic)
        return jnp.where(local * inter > 1, base + t_nv, 0.0), t_nic
    raise ValueError(f"unknown collective {kind!r}")


def _alpha_beta_terms(kind: str, size_bytes, local, inter, nv_bw, nic_bw, a_nv, a_nic):
    """``(t_nvlink, t_nic)`` of the plain alpha-beta model: LL hop latencies at the full
    (Simple) bandwidth, no base latency (:func:`group_collective_terms`)."""
    if kind == "all_reduce":
        return (scatter_gather_s(size_bytes, local, nv_bw, a_nv) * 2.0,
                allreduce_s(size_bytes / local, inter, nic_bw, a_nic))
    if kind in ("reduce_scatter", "all_gather"):
        return (scatter_gather_s(size_bytes, local, nv_bw, a_nv) + flat_ring_extra_latency_s(local, inter, a_nv),
                scatter_gather_s(size_bytes / local, inter, nic_bw, a_nic))
    raise ValueError(f"unknown collective {kind!r}")


DEDUP_PRODUCT_TERMS = 32   # top-k choices :func:`node_dedup_cross_bytes` multiplies out exactly


def node_dedup_cross_bytes(size_bytes, inter, topk, experts):
    """Bytes one rank sends across nodes in a DeepEP / HybridEP dispatch (or receives in
    the combine) whose all-to-all buffer of ``size_bytes`` holds ``topk`` copies of each
    of its tokens, the ``experts`` experts spread evenly over the ``inter`` nodes of the
    EP group: each token crosses to a remote node once, whatever number of that node's
    experts it was routed to, and is forwarded over NVLink inside it -- DeepEP's
    internode kernels send one RDMA token per destination node carrying the bitmask of
    its NVLink ranks (deepseek-ai/DeepEP ``csrc/kernels/internode.cu`` ``SourceMeta``:
    ``src_rdma_rank``, ``is_token_in_nvl_rank_bits``; ``get_dispatch_layout`` ->
    ``num_tokens_per_rdma_rank``, as Megatron-Core's flex dispatcher calls it,
    ``megatron/core/transformer/moe/fused_a2a.py``); the combine reduces a token's
    partial outputs inside the node before sending them back once.  With routing
    uniform over the experts (the force-balanced benchmarks), a remote node holding
    ``E/inter`` experts receives a token unless all ``k`` choices miss it:

      ``q = C(E - E/inter, k) / C(E, k)``,  cross = ``size / k * (inter - 1) * (1 - q)``

    against plain NCCL all-to-all's ``size * (inter - 1) / inter`` (every copy sent)."""
    k = jnp.maximum(topk, 1.0)
    e = jnp.maximum(experts, k)
    rest = e - e / jnp.maximum(inter, 1.0)
    # q as the product prod_{i<k} (rest - i) / (E - i) (exact in float32) up to
    # DEDUP_PRODUCT_TERMS choices, via log-gamma beyond
    i = jnp.arange(DEDUP_PRODUCT_TERMS, dtype=jnp.float32)
    col = lambda x: jnp.expand_dims(jnp.asarray(x, jnp.float32), -1)   # broadcast over i
    terms = jnp.where(i < col(k), jnp.clip((col(rest) - i) / jnp.maximum(col(e) - i, 1.0), 0.0, 1.0), 1.0)
    q_prod = jnp.prod(terms, axis=-1)
    log_q = (gammaln(rest + 1.0) - gammaln(jnp.maximum(rest - k + 1.0, 1.0))
             - gammaln(e + 1.0) + gammaln(e - k + 1.0))
    q_gamma = jnp.where(rest >= k, jnp.exp(log_q), 0.0)
    q = jnp.where(k <= DEDUP_PRODUCT_TERMS, q_prod, q_gamma)
    return size_bytes / k * jnp.maximum(inter - 1.0, 0.0) * (1.0 - q)


def group_collective_terms(kind: str, size_bytes, n, stride, hw, protocols: bool = False,
                           dedup_topk=0.0, dedup_experts=0.0):
    """``(t_nvlink, t_nic)``: the intra-domain and inter-domain phases of collective
    ``kind`` ("all_reduce", "reduce_scatter", "all_gather", "all_to_all") on a group of
    ``n`` ranks ``stride`` apart (hierarchical decomposition of NCCL across nodes):
      all-reduce  = RS(local, NVLink) + AR(S/local over `inter` domains, NIC) + AG(local)
                    (ring), or NCCL's tree (chain in the node, double binary tree across)
      RS / AG     = RS/AG(local, NVLink) on S, then RS/AG(inter, NIC) on S/local
      all-to-all  = the (inter-1)/inter share of the data crosses the NIC, the rest
                    NVLink; the two phases overlap (:func:`group_collective_s` takes the max).
                    With ``dedup_experts > 0`` (a DeepEP / HybridEP dispatch or combine of
                    ``dedup_topk`` copies per token over that many experts) the NIC carries
                    :func:`node_dedup_cross_bytes` and NVLink the whole buffer (the local
                    copies and the forwarding of the received tokens inside each node).
    All-reduce, reduce-scatter and all-gather run under the NCCL protocol (LL, LL128,
    Simple) whose total time is least, each with its own base latency, per-hop latency
    and bandwidth (NCCL ``src/graph/tuning.cc``, the constants above): small collectives
    pay LL's low latency but only ~0.37 of the NVLink bandwidth, mid-size ones LL128's
    14 us base, large ones Simple's full bandwidth.  The base latency is in the NVLink term.

    ``protocols`` (static) switches that NCCL model on; off (the default) every collective
    pays the LL hop latency at the Simple bandwidth with no base latency -- the optimistic
    alpha-beta bound, which is what serving engines' own one-shot / two-shot all-reduce
    kernels (vLLM ``custom_all_reduce``, TensorRT-LLM's AllReduce plugin) approach and what
    every caller gets today.  Training frameworks call NCCL; docs/accuracy.md gives the
    effect of turning it on for the training graph.
    """
    nv_bw = hw.nvlink_bw_bytes_per_s * hw.eff_nvlink
    nic_bw = hw.nic_bw_bytes_per_s * hw.eff_nic
    local, inter = _split(n, stride, hw.nvlink_domain_gpus)
    a_nv, a_nic = hw.nvlink_latency_s, hw.nic_latency_s
    if kind == "all_to_all":
        cross = size_bytes * (inter - 1.0) / jnp.maximum(inter, 1.0)
        dedup = dedup_experts > 0
        nv_bytes = jnp.where(dedup, size_bytes, size_bytes - cross)
        cross = jnp.where(dedup, jnp.minimum(node_dedup_cross_bytes(size_bytes, inter, dedup_topk, dedup_experts),
                                             cross), cross)
        t_nic = jnp.where(inter > 1, cross / nic_bw + (inter - 1.0) * a_nic, 0.0)
        t_nv = scatter_gather_s(nv_bytes, local, nv_bw, a_nv)
        return t_nv, t_nic
    if not protocols:
        return _alpha_beta_terms(kind, size_bytes, local, inter, nv_bw, nic_bw, a_nv, a_nic)
    best = None
    for p in range(len(PROTOCOLS)):
        t_nv, t_nic = _protocol_terms(kind, size_bytes, local, inter, nv_bw, nic_bw, a_nv, a_nic, p)
        if best is None:
            best = (t_nv, t_nic)
        else:
            take = t_nv + t_nic < best[0] + best[1]
            best = (jnp.where(take, t_nv, best[0]), jnp.where(take, t_nic, best[1]))
    return best


def group_collective_s(kind: str, size_bytes, n, stride, hw, protocols: bool = False):
    """Time of collective ``kind`` on a group of ``n`` ranks ``stride`` apart, on hardware
    ``hw``: the sum of the NVLink and NIC phases of :func:`group_collective_terms` (they run
    one after the other), their max for all-to-all (they overlap)."""
    t_nv, t_nic = group_collective_terms(kind, size_bytes, n, stride, hw, protocols)
    if kind == "all_to_all":
        return jnp.maximum(t_nic, t_nv)
    return t_nv + t_nic


def group_p2p_s(size_bytes, stride, hw):
    """Point-to-point between ranks ``stride`` apart: NVLink if both sit in one domain."""
    inside = stride < hw.nvlink_domain_gpus
    bw = jnp.where(inside, hw.nvlink_bw_bytes_per_s * hw.eff_nvlink, hw.nic_bw_bytes_per_s * hw.eff_nic)
    alpha = jnp.where(inside, hw.nvlink_latency_s, hw.nic_latency_s)
    return p2p_s(size_bytes, bw, alpha)


# NCCL runs one CUDA thread block (one SM) per channel: "reducing the number of channels
# also reduces the number of CUDA blocks used for communication" (NCCL user guide,
# Environment Variables, NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS); large collectives on
# A100/H100 use 16 channels (nccl-tests).  While a collective overlaps computation those
# SMs are taken from the compute kernels.
NCCL_OVERLAP_SMS = 16.0
# Modelling bound, not a measurement: on a GPU with fewer than 2 x 16 SMs the compute
# beside a collective keeps at least half of them (dse.sim.engine caps the slowdown alike).
MAX_COMM_SM_FRACTION = 0.5


def comm_sm_fraction(num_sms):
    """``f = min(NCCL_OVERLAP_SMS / num_sms, 1/2)``: the share of the SMs one collective's
    NCCL thread blocks hold while it transfers (one block per channel, above).  The one
    definition, for the cost model (:func:`overlapped_cost_s`, :func:`tp_overlap_cost_s`,
    :mod:`dse.train.zero3`) and the trace generator's ``meta["comm_sm_fraction"]``; a
    Python float in, a Python float out (the trace writes its ``repr``)."""
    f = NCCL_OVERLAP_SMS / num_sms
    if isinstance(f, float):
        return min(f, MAX_COMM_SM_FRACTION)
    return jnp.minimum(f, MAX_COMM_SM_FRACTION)


def overlapped_cost_s(comm_s, window_s, kernels_s, f, exposed_s=None):
    """Critical-path cost of a collective of ``comm_s`` seconds issued on its own stream
    at the start of a compute-stream window of ``window_s`` seconds, ``kernels_s`` of
    them compute kernels (first) and the rest the compute stream's own collectives, with
    ``f`` (:func:`comm_sm_fraction`) the SM share the collective holds while it transfers:

      ``max(exposed, f min(comm, kernels / (1 - f)))``,  ``exposed = max(comm - window, 0)``

    The kernels run at ``1 - f`` while the collective transfers, the collective at link
    speed, so the pass ends at ``max(comm, window + f min(comm, kernels / (1 - f)))``: the
    slowed kernels show only when they outlast the collective, and a collective slower
    than its window costs exactly its exposed part (not ``exposed + f x hidden``: the
    compute slowed under a slower collective is off the critical path).  The mechanism
    :mod:`dse.sim.engine` replays (compute at ``1 - min(k f, 1/2)`` while ``k`` collectives
    transfer); Rashidi et al., ISCA'21 "ACE", measure the interference.  ``exposed_s``:
    the caller's exposed part where the collective is issued in pieces (chunk-wise under
    the interleaved schedule, :func:`interleaved_overlap_cost_s`; ZeRO-2's per-micro-batch
    reduce-scatters); it reduces to the form above for ``max(comm - window, 0)``."""
    exposed = jnp.maximum(comm_s - window_s, 0.0) if exposed_s is None else exposed_s
    return jnp.maximum(exposed, f * jnp.minimum(comm_s, kernels_s / (1.0 - f)))


def interleaved_overlap_cost_s(comm_s, window_s, f, pp, vpp):
    """Critical-path cost of a gradient reduction (parameter gather) issued chunk by chunk
    under the interleaved schedule, with the SM sharing of :func:`overlapped_cost_s`.
    Each of the ``vpp`` model chunks reduces ``C/vpp`` as soon as its own backward is done,
    and chunk ``c``'s reduction overlaps the ``c*pp`` chunk passes still to run
    (Megatron-Core ``overlap_grad_reduce`` buckets per chunk; Narayanan et al. SC'21
    §2.2.2 for the pass order).  The chunks' collectives run beside the kernels of
    ``W' = (1 + (vpp-1) pp) / vpp * W`` still to run after the first is issued, and each
    chunk is issued only when its (slowed) backward is done, so the slowdown the earlier
    chunks' collectives caused delays the last chunk's collective:

      ``max(C - W',  (C - W)/vpp + f min(C (vpp-1)/vpp, (W' - W/vpp)/(1 - f)),
           f min(C, W' / (1 - f)))``

    (the collectives' link time once they run back to back; the last chunk's own excess
    after its delayed issue; the slowed kernels), which is :func:`overlapped_cost_s` for
    ``vpp = 1``."""
    w_eff = (1.0 + (vpp - 1.0) * pp) / vpp * window_s
    before = f * jnp.minimum(comm_s * (vpp - 1.0) / vpp, (w_eff - window_s / vpp) / (1.0 - f))
    last = (comm_s - window_s) / vpp + before
    return jnp.maximum(jnp.maximum(comm_s - w_eff, last),
                       f * jnp.minimum(comm_s, w_eff / (1.0 - f)))


# Transformer Engine userbuffers (``--tp-comm-overlap``), default methods per GEMM
# (transformer_engine/pytorch/module/base.py ``initialize_ub``): the forward all-gathers
# (QKV, FC1) and the backward ones feeding the row-parallel dgrads run "ring_exchange"
# (tp steps, copy engines, 1 SM); the forward reduce-scatters (proj, FC2) run "pipeline"
# (the GEMM split in 4, 16 SMs); the backward input all-gathers and dgrad reduce-scatters of
# the column-parallel linears run "bulk" beside an independent GEMM (16 SMs).
TP_OVERLAP_SPLITS = 4.0


def tp_overlap_cost_s(tp_comm_s, gemm_window_s, tp, num_sms):
    """Critical-path cost of one layer's TP collectives (forward + backward, 8 of equal
    size ``c = tp_comm/8``) under TE's userbuffers overlap.

    Pieces that cannot overlap run serially: a ring exchange cannot hide its first of
    ``tp`` steps (4 ring exchanges per layer), a pipelined reduce-scatter its last of
    ``splits`` chunks (2 per layer): ``u = 4c/tp + 2c/splits``.  The rest runs beside the
    (unchunked) GEMM window and costs what :func:`overlapped_cost_s` charges an overlapped
    collective -- its excess over the window, or the slowdown of the GEMMs on the SMs it
    holds, whichever is larger -- where only the half of the traffic that runs on SMs (the
    pipelined and bulk overlaps, 16 SMs; the ring exchanges use copy engines) takes SMs:

      ``min(tp_comm, u + max(max(tp_comm - window, 0), f min((tp_comm - u)/2, window/(1-f))))``

    (``f``: :func:`comm_sm_fraction`).  It replaces the earlier ``exposed + f x hidden``
    charge, which added the slowdown on top of the excess even when the collectives, not
    the slowed GEMMs, set the pace.  Wang et al., ASPLOS'23 ("Overlap communication with
    dependent computation via decomposition") for the decomposition."""
    c = tp_comm_s / 8.0
    serial = 4.0 * c / tp + 2.0 * c / TP_OVERLAP_SPLITS
    f = comm_sm_fraction(num_sms)
    excess = jnp.maximum(tp_comm_s - gemm_window_s, 0.0)
    slowdown = f * jnp.minimum(0.5 * jnp.maximum(tp_comm_s - serial, 0.0), gemm_window_s / (1.0 - f))
    return jnp.minimum(tp_comm_s, serial + jnp.maximum(excess, slowdown))
