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
    sources=("NVIDIA/Megatron-LM megatron/core/distributed/distributed_data_parallel.py",
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
    sources=("deepspeedai/DeepSpeed deepspeed/runtime/zero/config.py",
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
    sources=("pytorch/pytorch torch/distributed/fsdp/fully_sharded_data_parallel.py",
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
