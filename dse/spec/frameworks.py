"""Framework profiles as data: what each training framework does that the cost model
depends on, one frozen record per ``Workload.framework`` code, every value with the
framework source file (or documentation page) it comes from.

The cost code reads a profile through :func:`profile` (a static lookup: the framework
code is a static field of :class:`dse.spec.layout.Workload`, so each profile compiles
its own cost function).  Values are plain Python numbers, never traced.

Sources (read for this module; paths inside each repository):

* Megatron-LM (NVIDIA/Megatron-LM): ``megatron/core/distributed/distributed_data_parallel.py``
  (``bucket_size = max(40000000, 1000000 * dp_group.size())`` when ``--ddp-bucket-size`` is
  unset: "make buckets larger [at large dp] to ensure that chunks used in NCCL ring-reduce
  implementations are large enough to remain bandwidth-bound rather than latency-bound");
  ``--accumulate-allreduce-grads-in-fp32`` (set with bf16) for fp32 main gradients;
  Megatron-FSDP (``--use-megatron-fsdp --data-parallel-sharding-strategy
  optim_grads_params``, ``docs/discussions/megatron-fsdp-user-guide``: one FSDP unit per
  ``TransformerLayer``, gradients reduced in fp32 unless ``--grad-reduce-in-bf16``);
  ``megatron/core/pipeline_parallel/schedules.py`` (``no_sync_func`` for all but the last
  micro-batch: gradients are reduced once per step, with and without PP).
  By release: Megatron-LM before Megatron-Core (2021-22) had no distributed optimizer
  and reduced gradients after the backward without overlap; ``overlap_grad_reduce`` /
  ``overlap_param_gather`` and the bucket default above are Megatron-Core's (core_r0.4+);
  Megatron-FSDP is core_r0.14+.  The cost model follows Megatron-Core; the calibration
  rows of older releases are within its error (docs/accuracy.md).
* DeepSpeed (deepspeedai/DeepSpeed): ``deepspeed/runtime/zero/config.py``
  (``reduce_bucket_size`` 5e8 elements, ``allgather_bucket_size`` 5e8,
  ``stage3_prefetch_bucket_size`` 5e7, ``stage3_max_live_parameters`` 1e9,
  ``stage3_param_persistence_threshold`` 1e5); ``deepspeed/runtime/zero/stage3.py`` and
  ``partitioned_param_coordinator.py`` (ZeRO-3 fetches the parameters of each submodule
  that owns them -- every ``Linear`` -- when it is about to run, and prefetches the
  modules of the recorded trace up to ``prefetch_bucket_size`` elements ahead; gradients
  are reduce-scattered from a ``reduce_bucket_size`` bucket as it fills, every
  micro-batch); ``deepspeed/runtime/engine.py`` ``communication_data_type`` (the model's
  16-bit dtype for bf16/fp16 unless configured); ``runtime/pipe/engine.py`` (ZeRO-2/3 is
  not supported with the pipeline engine).
* PyTorch FSDP1 (pytorch/pytorch ``torch/distributed/fsdp/fully_sharded_data_parallel.py``,
  ``_runtime_utils.py``, ``_limiter_utils.py``): ``limit_all_gathers=True`` by default, the
  rate limiter holds at most 2 all-gathers in flight (``_FreeEventQueue``,
  ``_max_num_inflight_all_gathers = 2``, "empirically chosen"), i.e. one unit prefetched
  beside the one computing; ``backward_prefetch`` BACKWARD_PRE (PyTorch) / BACKWARD_POST
  (Composer's default), ``forward_prefetch=False`` (the next unit's all-gather is issued by
  the CPU running ahead, on the unshard stream); the root unit is not resharded after
  forward; the all-gather writes straight into the unit's FlatParameter (no copy-out).
  llm-foundry runs through MosaicML Composer (mosaicml/composer
  ``composer/utils/parallelism.py`` ``FSDPConfig``: ``backward_prefetch='BACKWARD_POST'``,
  ``forward_prefetch=False``, ``limit_all_gathers=True``, ``mixed_precision='DEFAULT'`` =
  bf16 parameters, fp32 gradient reduction), one FSDP unit per MPT block (``auto_wrap``).
* PyTorch FSDP2 / torchtitan (pytorch/pytorch ``torch/distributed/fsdp/_fully_shard/``
  ``_fsdp_param_group.py``, ``_fsdp_state.py``, ``_fsdp_collectives.py``; pytorch/torchtitan
  ``torchtitan/models/llama*/parallelize*.py`` ``apply_fsdp``): ``fully_shard`` on every
  ``TransformerBlock`` and on the root (embedding, final norm, output); implicit forward
  prefetch of one unit and ``_backward_prefetch`` of the previous unit in post-forward
  order (one ahead); the last block is not resharded after forward ("FSDP would
  prefetch it immediately"); with PP ``reshard_after_forward=False`` ("to avoid
  per-microbatch all-gathers, which can be expensive and non-overlapped") and the
  pipeline schedule syncs gradients on the last micro-batch only; the all-gather output
  is copied out into the parameters (``foreach_all_gather_copy_out``, a read and a write
  of the unit's 16-bit bytes on the compute stream); ``mixed_precision_param`` bf16,
  ``mixed_precision_reduce`` float32 (torchtitan's job-config defaults).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FrameworkProfile:
    name: str
    # host (CPU) seconds per kernel launched by eager PyTorch framework code
    # (dse.train.layer: 40 us, chosen once for every framework against vtrain.csv)
    host_op_s: float
    # Megatron DDP bucket (elements): max(min, per_rank * dp); None where not bucketed so
    ddp_bucket_min_elems: float
    ddp_bucket_per_rank_elems: float
    # ZeRO-3 / FSDP ----------------------------------------------------------------
    z3_units_per_layer: float        # FSDP units (gathered together) per transformer layer
    z3_prefetch_depth: int           # units gathered ahead of the one computing (0 = none)
    z3_grad_reduce_bytes: float      # bytes per gradient element in the reduce-scatter
    z3_reduce_bucket_elems: float    # gradient elements per reduce-scatter (0 = per unit)
    # with pp > 1: re-gather parameters every micro-batch (False: gather once per step,
    # keep them unsharded, and reduce-scatter gradients once, on the last micro-batch)
    z3_regather_with_pp: bool
    z3_grad_sync_every_microbatch: bool  # reduce-scatter every micro-batch (else once per step)
    z3_root_regather_in_bwd: bool    # root (embedding/head) unit re-gathered at backward start
    z3_copy_out_bytes_per_param: float  # compute-stream copy of each gathered 16-bit unit
    # sharded model states per parameter (weights + grads + optimizer) under ZeRO-3;
    # None = dse.train.memory's Megatron / DeepSpeed accounting
    z3_state_bytes_per_param: float | None
    # parameter tensors of a layer whose gradient is accumulated by a kernel of its own
    # after each micro-batch's backward (dse.graph.train.grad_accumulate_ops): "all"
    # (PyTorch autograd's AccumulateGrad ``grad += new``), "unfused" (only those outside
    # Megatron's ``gradient_accumulation_fusion``: norms and biases) or "none"
    grad_accum_tensors: str = "none"
    # whether the first micro-batch after ``zero_grad(set_to_none=True)`` accumulates too
    # (False: AccumulateGrad stores the first gradient without a kernel)
    grad_accum_first_microbatch: bool = True
    # fp8 (Transformer Engine) runs: whether the linears' weights are fp8 primary weights
    # (Megatron-Core ``--fp8-param-gather``: parameters created as TE Float8Tensors, no
    # 16-bit copy; the distributed optimizer's fp32 shard is the master) instead of 16-bit
    # weights plus TE's cached fp8 workspace; and the bytes per element of the main
    # gradient buffer in fp8 runs (dse.train.memory, dse.graph.train.dp_ops)
    fp8_primary_weights: bool = False
    fp8_main_grad_bytes: float = 4.0
    # fused attention kernel class the framework runs (dse.cost.attention_kernel): "native"
    # = the GPU generation's own kernel (cuDNN fused SDPA / FA3 class on Hopper and
    # Blackwell, FA2 on Ampere; efficiency ``eff_attn``), "fa2" = a FlashAttention-2-class
    # mma.sync kernel (``eff_attn`` x ``eff_attn_fa2``)
    attention_kernel: str = "native"
    sources: tuple = ()


MEGATRON = FrameworkProfile(
    name="megatron", host_op_s=40e-6,
    ddp_bucket_min_elems=4e7, ddp_bucket_per_rank_elems=1e6,
    # Megatron-FSDP: one unit per TransformerLayer, double buffer = one ahead
    z3_units_per_layer=1.0, z3_prefetch_depth=1, z3_grad_reduce_bytes=4.0,
    z3_reduce_bucket_elems=0.0, z3_regather_with_pp=True,
    z3_grad_sync_every_microbatch=False, z3_root_regather_in_bwd=False,
    z3_copy_out_bytes_per_param=0.0,
    z3_state_bytes_per_param=None,
    # megatron/core/distributed (param hook): ``param.main_grad.add_(param.grad)`` unless
    # the wgrad GEMM already accumulated into main_grad (``grad_added_to_main_grad``)
    grad_accum_tensors="unfused", grad_accum_first_microbatch=True,
    # fp8: every published fp8 recipe of the family passes fp8_param_gather=True (NeMo
    # nemo/collections/llm/recipes/precision/mixed_precision.py ``bf16_with_fp8_mixed``
    # and the current-scaling / MXFP8 variants; Megatron-Bridge
    # src/megatron/bridge/training/mixed_precision.py
    # ``bf16_with_fp8_current_scaling_mixed``), and their performance scripts set
    # grad_reduce_in_fp32=False (NeMo scripts/performance/helpers.py
    # ``set_precision_configs``; Megatron-Bridge perf_recipes/_common.py
    # ``_benchmark_common`` / ``_perf_precision``): bf16 main gradients
    fp8_primary_weights=True, fp8_main_grad_bytes=2.0,
    # attention: Megatron-Core's ``TEDotProductAttention`` (transformer_engine
    # DotProductAttention); TE's ``get_attention_backend`` (transformer_engine/pytorch/
    # attention/dot_product_attention/utils.py) disables FlashAttention "to give
    # FusedAttention preference on Hopper+", i.e. cuDNN fused attention on sm90 / sm100
    attention_kernel="native",
    sources=("NVIDIA/Megatron-LM megatron/core/distributed/distributed_data_parallel.py",
             "NVIDIA/TransformerEngine transformer_engine/pytorch/attention/dot_product_attention/utils.py",
             "NVIDIA/NeMo nemo/collections/llm/recipes/precision/mixed_precision.py",
             "NVIDIA/NeMo scripts/performance/helpers.py",
             "NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/training/mixed_precision.py",
             "NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/perf_recipes/_common.py",
             "NVIDIA/Megatron-LM docs/discussions/megatron-fsdp-user-guide",
             "NVIDIA/Megatron-LM megatron/core/pipeline_parallel/schedules.py"))

DEEPSPEED = FrameworkProfile(
    name="deepspeed", host_op_s=40e-6,
    ddp_bucket_min_elems=5e8, ddp_bucket_per_rank_elems=0.0,   # reduce_bucket_size
    # ZeRO-3 fetches per submodule owning parameters: the 4 linears of a Megatron-DeepSpeed
    # GPT layer (QKV, dense, h->4h, 4h->h); norms and biases fall under the 1e5 persistence
    # threshold and stay resident.  Prefetch runs the trace ahead by 5e7 elements, at
    # least the next module.
    z3_units_per_layer=4.0, z3_prefetch_depth=1, z3_grad_reduce_bytes=2.0,
    z3_reduce_bucket_elems=5e8, z3_regather_with_pp=True,
    z3_grad_sync_every_microbatch=True, z3_root_regather_in_bwd=True,
    z3_copy_out_bytes_per_param=0.0,
    z3_state_bytes_per_param=None,
    # the DeepSpeed engine calls ``loss.backward()`` on the plain module: every parameter
    # tensor's gradient goes through autograd's AccumulateGrad (torch/csrc/autograd/
    # functions/accumulate_grad.h: ``variable_grad += new_grad`` once ``.grad`` exists):
    # DeepSpeed's optimizers (runtime/fp16, runtime/zero/stage_1_and_2.py) read
    # ``param.grad`` -- there is no Megatron ``main_grad`` for a fused wgrad GEMM to
    # accumulate into -- and ``zero_grad`` sets ``.grad`` to None after each step
    grad_accum_tensors="all", grad_accum_first_microbatch=False,
    # attention: Megatron-DeepSpeed ``--use-flash-attn-v1 / -v2 / -triton``
    # (megatron/arguments.py) run flash-attn 1.x / 2.x or its Triton kernel
    # (megatron/model/transformer.py ``FlashSelfAttention`` / ``FlashSelfAttentionTriton``):
    # mma.sync kernels on every architecture
    attention_kernel="fa2",
    sources=("deepspeedai/DeepSpeed deepspeed/runtime/zero/config.py",
             "deepspeedai/Megatron-DeepSpeed megatron/model/transformer.py, megatron/arguments.py",
             "deepspeedai/DeepSpeed deepspeed/runtime/zero/stage3.py",
             "deepspeedai/DeepSpeed deepspeed/runtime/zero/partitioned_param_coordinator.py",
             "deepspeedai/DeepSpeed deepspeed/runtime/engine.py"))

FSDP1 = FrameworkProfile(
    name="fsdp", host_op_s=40e-6,
    ddp_bucket_min_elems=25e6 / 4, ddp_bucket_per_rank_elems=0.0,   # DDP bucket_cap_mb=25
    z3_units_per_layer=1.0, z3_prefetch_depth=1, z3_grad_reduce_bytes=4.0,
    z3_reduce_bucket_elems=0.0, z3_regather_with_pp=True,
    z3_grad_sync_every_microbatch=True, z3_root_regather_in_bwd=False,
    z3_copy_out_bytes_per_param=0.0,
    # fp32 sharded FlatParameter 4 + fp32 sharded grad 4 + Adam m, v 8; the bf16 copy
    # exists only for gathered units
    z3_state_bytes_per_param=16.0,
    # attention: llm-foundry MPT's ``attn_config.attn_impl`` (llmfoundry/models/layers/
    # attention.py): ``flash`` = flash-attn 2.x ``flash_attn_varlen_func`` (the
    # benchmarking script's default today, scripts/train/benchmarking/
    # submit_benchmarks.py ``--attn_impl flash``, ``pip install .[gpu-flash2]``);
    # the Oct 2023 H100 benchmark tables (commit b2a43a1) ran ``--attn_impl triton``
    # (``flash_attn_triton.py`` on the ``triton-pre-mlir`` sm90 fork, setup.py).  Both
    # are mma.sync kernels without wgmma / TMA: FA2 class
    attention_kernel="fa2",
    sources=("pytorch/pytorch torch/distributed/fsdp/fully_sharded_data_parallel.py",
             "mosaicml/llm-foundry llmfoundry/models/layers/attention.py",
             "mosaicml/llm-foundry scripts/train/benchmarking/submit_benchmarks.py",
             "pytorch/pytorch torch/distributed/fsdp/_limiter_utils.py",
             "pytorch/pytorch torch/distributed/fsdp/_runtime_utils.py",
             "mosaicml/composer composer/utils/parallelism.py"))

FSDP2 = FrameworkProfile(
    name="fsdp2", host_op_s=40e-6,
    ddp_bucket_min_elems=25e6 / 4, ddp_bucket_per_rank_elems=0.0,
    z3_units_per_layer=1.0, z3_prefetch_depth=1, z3_grad_reduce_bytes=4.0,
    z3_reduce_bucket_elems=0.0, z3_regather_with_pp=False,
    z3_grad_sync_every_microbatch=True, z3_root_regather_in_bwd=True,
    z3_copy_out_bytes_per_param=4.0,
    z3_state_bytes_per_param=16.0,
    # attention: torchtitan calls ``F.scaled_dot_product_attention``; PyTorch's SDPA
    # priority order (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp
    # ``priority_order``) puts the flash backend (vendored FlashAttention-2) first and
    # cuDNN last since cuDNN SDPA was made opt-in after 2.5 (pytorch/pytorch#138522);
    # ``check_prefer_cudnn_attention`` prefers cuDNN on sm90 / sm100 only with a bundled
    # cuDNN > 9.15 (torch >= 2.11): FA2 class for the releases torchtitan's published
    # runs used (a run on a newer torch states ``attention = cudnn``)
    attention_kernel="fa2",
    sources=("pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py",
             "pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py",
             "pytorch/torchtitan torchtitan/models/llama3/infra/parallelize.py (apply_fsdp)"))

# by Workload.framework code (dse.spec.layout.FRAMEWORK)
PROFILES = {0: MEGATRON, 1: DEEPSPEED, 2: FSDP1, 3: FSDP2}


def profile(code: int) -> FrameworkProfile:
    """The profile of framework ``code`` (megatron's for an unknown code)."""
    return PROFILES.get(int(code), MEGATRON)


# --- MoE (helper s37b) ------------------------------------------------------------------
# Megatron-Core's 1F1B expert-parallel all-to-all overlap (``overlap_moe_expert_parallel_comm``
# + ``delay_wgrad_compute``, megatron/core/pipeline_parallel/combined_1f1b.py and
# megatron/core/models/common/model_chunk_schedule_plan.py
# ``TransformerLayerSchedulePlan.run``): the forward of one micro-batch and the backward of
# another run layer by layer together, each one's dispatch/combine on a communication
# stream beside the other's attention / expert compute (:mod:`dse.train.moe_overlap`).
# Off by default in Megatron-Core (``model_parallel_config.py``:
# ``overlap_moe_expert_parallel_comm: bool = False``) and in Megatron-Bridge's performance
# recipes (``scripts/performance/utils/utils.py`` ``WorkloadBaseConfig.moe_a2a_overlap =
# False``; set per recipe in ``scripts/performance/configs/*/..._workload_base_configs.py``,
# where ``utils/overrides.py`` ``_set_moe_a2a_overlap_overrides`` turns on both flags).
# DeepSpeed and PyTorch FSDP have no such schedule.  By framework code; a study may flip
# it (``dse.spec.frameworks.MOE_A2A_OVERLAP[0] = True``) to compare both settings.
MOE_A2A_OVERLAP = {0: False, 1: False, 2: False, 3: False}


def moe_a2a_overlap(code: int) -> bool:
    """Whether framework ``code`` runs the 1F1B EP all-to-all overlap (where the schedule
    allows it, :func:`dse.train.moe_overlap.overlap_allowed`)."""
    return bool(MOE_A2A_OVERLAP.get(int(code), False))
