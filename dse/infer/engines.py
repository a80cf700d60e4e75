"""Serving-engine profiles: the few per-iteration constants an engine adds to the GPU
work of the operator graph, global per engine (never per row or per source).

Each iteration of a serving engine is the forward pass of :mod:`dse.infer.forward` plus

* **kernel gaps**: every kernel costs ``kernel_launch_s`` on the GPU timeline.  Engines
  that replay decode iterations as CUDA graphs pay only the GPU-side dependent-launch
  gap, ``GRAPH_LAUNCH_S`` = 1.5 us per kernel (NVIDIA "Getting Started with CUDA Graphs"
  blog, 2019: graph launches cut the per-kernel overhead from ~3-4 us to ~1-2 us; Hazy
  Research, "Look Ma, No Bubbles!", 2025, measures 1.3 us for a dummy kernel replayed in
  a graph on H100), plus the ramp of a kernel that reads memory: its first loads return
  one HBM latency after it starts (``dram_latency_s``, 370-440 ns measured,
  :mod:`dse.spec.efficiency`) -- :func:`graph_kernel_s`; without graphs each kernel costs
  the hardware generation's ``kernel_launch_s`` (4 us, launch and tail together,
  :mod:`dse.spec.efficiency`).
* **host time per iteration** that is not overlapped with the GPU: scheduling, input
  preparation, sampling and detokenisation hand-off (``step_overhead_s``); engines with
  multi-step scheduling pay it once per ``scheduler_steps`` iterations.
* **eager issue floor** (``eager_op_s``): engines whose model code is Python (vLLM,
  SGLang) run every pass that is not a CUDA-graph replay -- prefill passes, mixed
  iterations, decode batches above the captured size -- as PyTorch eager calls, the CPU
  issuing each kernel, so such a pass takes ``max(GPU time, eager_op_s x kernels)``
  (:func:`dse.infer.forward.host_bound_s`; kernels counted on the operator graph,
  :func:`dse.infer.forward.stage_kernels`: 12 per dense layer).  ``EAGER_OP_S`` = 40 us per
  kernel is the training model's host issue time per kernel
  (``FrameworkProfile.host_op_s``, :mod:`dse.train.layer`: ~2.4 eager torch calls per
  kernel at 15-20 us each), carried over, not refitted: the serving layer makes as many
  calls per kernel it launches (vLLM / SGLang ``LlamaDecoderLayer``: module calls,
  views and splits, ``torch.empty`` for every custom-op output, the flashinfer wrapper's
  Python checks, the KV store's two ``index_put`` and the custom all-reduce's copy into
  its registered buffer -- kernels the graph does not count).  It binds where the GPU
  work per kernel is small: Llama-3.1-70B at TP4 on H100, a ~230-token prompt is ~280 us
  of GPU work per layer against 480 us of issue time, while Llama-3.1-8B on one A100 stays
  GPU-bound (~700 us per layer).  Scan 0 / 20 / 30 / 40 / 50 / 60 us over the inference
  calibration rows: row-mean 12.1 / 12.1 / 11.9 / 11.6 / 11.5 / 11.7 %, sglang_vllm_v060
  17.8 / 17.8 / 16.0 / 13.1 / 12.1 / 14.0 % (no other source moves).  TensorRT-LLM and
  NeMo enqueue a compiled engine from C++ (0).
* **weight stream of the linears** (``linear_bw_eff``): the share of the achieved
  (STREAM-like, ``eff_hbm``) bandwidth that a decode-shaped linear's weight read reaches,
  multiplying the HBM term of every linear (:func:`dse.infer.forward.stage_time`; 1 for
  the C++ runtimes).  vLLM and SGLang run their linears as ``torch.nn.functional.linear``,
  i.e. cuBLAS / cuBLASLt with the library's heuristic algorithm for the shape
  (``at::cuda::blas::gemm``: the first ``cublasLtMatmulAlgoGetHeuristic`` result, no
  per-shape timing), and libraries of that kind tile the token dimension of a flat
  (M << 64) GEMM for large problems: FlashDecoding++ (Hong et al. 2023, arXiv:2311.01282,
  section 4 "Flat GEMM optimization with double buffering") measures flat-GEMM kernels
  tiled for small M up to ~1.5x faster than cuBLAS / CUTLASS on A100 decode shapes, so
  the library kernel's weight stream runs well below STREAM there.  TensorRT-LLM instead
  times every GEMM tactic per token bucket when it builds the engine (the gemm plugin's
  profiler, ``cpp/tensorrt_llm/plugins/common/gemmPluginProfiler.cpp``) and keeps 1.
  ``TORCH_LINEAR_BW_EFF`` = 0.85, FITTED, one value for both PyTorch engines: the SGLang /
  vLLM serving rows' decode steps (median ITL, TPOT) sit 1-5 ms above the model's at
  eff 1 on 8B / A100 and 70B / TP4 H100 alike, while their prefill-stall share and TTFT
  are right.  Scan 1.0 / 0.9 / 0.85 / 0.8 over the inference calibration rows: row-mean
  10.9 / 10.5 / 10.4 / 10.3 %, TPOT 19.4 / 16.4 / 14.9 / 13.4 %, sglang_vllm_v060 13.1 /
  10.0 / 8.6 / 8.3 % (no other source moves); 0.85 is the value nearest 1 past which the
  row-mean stops improving.  ``vllm_mlperf`` carries the same value (vLLM's linears);
  its MI300X rows run compute-bound at their tuned batch, where it moves them < 0.1 %.
* **request polling** (``recv_interval``): SGLang's ``--scheduler-recv-interval N`` (default
  1) makes the scheduler look for new requests only every N decode passes
  (``SchedulerRecvSkipper``, ``python/sglang/srt/managers/scheduler_recv_skipper.py``: each
  decode pass adds 1 to a counter, a prefill or mixed pass 1000, and requests are received
  when it reaches N), so a request arriving during decode waits ``N / 2`` decode iterations on
  average before its prefill can be scheduled; read from a row's launch command.  vLLM's
  multi-step scheduling (``scheduler_steps``) and TensorRT-LLM's attention-DP balancing and
  batch waiting (:mod:`dse.infer.launch_flags`) have the same effect, and all enter TTFT as
  half of :attr:`EngineProfile.poll_iterations` iterations.
* **quantization kernels** (``quant_kernels``): engines whose model code is PyTorch (vLLM,
  SGLang, TGI, TensorRT-LLM's PyTorch backend) quantize each fp8 / fp4 linear's input in a
  kernel of its own (``scaled_fp8_quant``, ``per_token_group_quant_fp8``,
  ``fp8_quantize_1x128``, ``fp4_quantize``), launched and, in eager passes, issued like
  any other (vLLM V1's torch.compile pass that fuses RMSNorm / SiluMul with the quantization
  is off by default: ``PassConfig.enable_fusion = not VLLM_USE_V1``, ``vllm/config.py``,
  checked through the 0.9-0.10 releases); compiled TensorRT engines and TurboMind fuse it
  into the producing kernel, and so do AMD's MLPerf vLLM builds (``vllm_mlperf``: AMD's vLLM fork carries fused
  residual + RMSNorm + FP8 and SwiGLU + FP8 kernels, Hugging Face / AMD blog "Creating
  custom kernels for the AMD MI300", hf-rocm-kernels).
  Counted on the operator graph (:func:`dse.infer.forward.memory_pass_kernels`, sources
  there); not a fitted constant.
* **KV pool**: the fraction of GPU memory the engine gives to weights + KV cache
  (``mem_fraction``), the paged block size, and whether admission reserves a request's
  *final* KV footprint (static batches) or only what it holds now (in-flight engines
  admit on current blocks and preempt / evict when the pool runs out, so the average
  footprint counts).
* **batch limits**: ``max_batch`` (running sequences) and ``max_num_tokens`` (tokens of
  one iteration: decode tokens + prefill chunk).

Profiles (constants and where they come from):

``trtllm`` -- TensorRT-LLM C++ executor with in-flight batching (v0.8-0.13; trtllm-bench,
    Triton, NeMo inference, NVIDIA's MLPerf harness).  No CUDA graphs (the C++ runtime's
    ``cuda_graph_mode`` is off by default, ``ExtendedRuntimePerfKnobConfig``), so
    4 us/kernel; the TensorRT engine fuses norms, rotary and the KV append into the
    attention plugin (fewer kernels, counted by the graph as memory passes).  Host time
    0.5 ms per iteration (the executor's C++ scheduler; the executor overlaps request
    bookkeeping with the GPU, only the batch assembly is serial).  KV: paged, 64-token
    blocks (``tokens_per_block`` default 64, docs/source/advanced/gpt-attention.md),
    ``kv_cache_free_gpu_mem_fraction`` 0.9 of the memory left after weights
    (``KvCacheConfig`` default).  Admission reserves a request's final footprint,
    input + output tokens: ``trtllm-bench throughput`` runs the executor with
    ``scheduler_policy = IFBSchedulingPolicy.NO_EVICT`` (``tensorrt_llm/bench/run/run.py``
    of v0.12/0.13; the v0.13 perf-overview's sample output prints "Scheduling Policy:
    Guaranteed No Evict"), which is also the executor's default capacity policy.
    ``max_batch`` 2048 and ``max_num_tokens`` 8192: trtllm-bench's engine build settings
    for throughput runs (docs/source/performance/perf-overview.md, "max_batch_size /
    max_num_tokens" tuned per ISL/OSL; 2048 / 8192 the defaults of
    ``tensorrt_llm/bench/build``); context chunking off (v0.13 default), so a prompt
    enters in one iteration, whole (``whole_prompts``): the C++ ``MicroBatchScheduler``
    (``cpp/tensorrt_llm/batch_manager/microBatchScheduler.cpp``) takes the generation
    requests first, then every waiting context request that fits ``max_num_tokens``, and
    without a context-chunking config never splits one (:func:`dse.infer.serving.
    prefill_share`).  Under a steady load a share ``q`` of the passes carries a whole
    prompt and the pass a new prompt rides (its TTFT) carries all of it.  Before this
    revision the mean load ``q S`` sat in every pass, so that pass held only the prompt's
    share: `dse infer --ops` showed a 2048-token Llama-3-70B prompt's TTFT (89 ms, TP2 PP2
    H100, 64 in flight) below the prompt's own prefill (260 ms).  Measured change: serving
    calibration row mean 10.58 -> 10.37 % (TensorRT-LLM v0.13 perf overview 10.15 ->
    9.85 %, MLPerf v4.1 12.32 -> 11.55 %, throughput 9.2 -> 8.9 %); no out-of-sample row
    moves (none runs this profile in a steady state).  ``trtllm_mlperf`` and
    ``trtllm_pytorch_eager`` run the same scheduler and have it too.
    KV precision: an fp8 (or NVFP4) engine gets an fp8 KV cache unless told otherwise
    (``fp8_kv_with_fp8``): trtllm-bench forces it ("If the quantization is NVFP4 or
    FP8, force the KV cache dtype to FP8", ``tensorrt_llm/bench/build/build.py``; the
    v0.13 perf-overview: "If you specify FP8 quantization, the KV cache will
    automatically be set to FP8 as well"), and NVIDIA's MLPerf v4.1 Llama-2-70B
    engines need it to hold their published batches: 806 requests of ~580 tokens on
    one H200 are 76 GB in fp8 and 153 GB in 16 bit, beside 70 GB of fp8 weights
    (``closed/NVIDIA/configs/llama2-70b``).  vLLM and SGLang keep the model dtype
    (``--kv-cache-dtype auto``) unless told.
``trtllm_pytorch_eager`` -- TensorRT-LLM's PyTorch backend before release 1.0
    (``trtllm-serve --backend pytorch`` of 0.17-0.19; engine text naming "PyTorch backend"
    with a version below 1.0): the model is Python (``tensorrt_llm/_torch/models``), run
    by the Python ``PyExecutor``, and its ``PyTorchConfig`` defaults of that era
    (``tensorrt_llm/_torch/pyexecutor/config.py``) were ``use_cuda_graph = False`` and
    ``enable_overlap_scheduler = False``: every pass, decode included, is eager PyTorch,
    the CPU issuing each kernel, so it takes ``max(GPU time, eager_op_s x kernels)`` with
    the vLLM / SGLang ``EAGER_OP_S`` (same cost: Python module calls per kernel) and the
    4 us kernel gaps of no graphs.  Later releases turned both on by default
    (``use_cuda_graph = True``, ``disable_overlap_scheduler = False``); those rows keep
    the ``trtllm`` profile here.  The rest is the C++ executor's
    (``trtllm``): paged 64-token blocks, ``free_gpu_memory_fraction`` 0.9 after weights,
    guaranteed-no-evict admission, in-flight batching without context chunking; the KV
    dtype is the checkpoint's (``kv_cache_dtype = "auto"``), so no fp8 default.
``trtllm_pytorch`` -- TensorRT-LLM 1.0 and later (engine text "PyTorch backend" without a
    pre-1.0 version, or a version >= 1.0 not naming the C++ / TensorRT backend): since 1.0
    ``trtllm-bench`` runs the PyTorch backend by default, the Python ``PyExecutor``
    (``tensorrt_llm/_torch/pyexecutor/py_executor.py``) with CUDA graphs for generation-only
    batches (the perf-overview's ``cuda_graph_config: enable_padding, batch_sizes 1..8192``:
    ``graph_max_batch`` 8192) and the overlap scheduler on by default (docs "Overlap
    Scheduler": at step n the executor launches the GPU work of step n+1 before the CPU
    tasks of step n -- stop checks, response updates, scheduling -- so they run beside
    it).  Iteration = ``max(GPU pass, host)`` (``host_overlap``,
    :meth:`EngineProfile.with_host_s`), host = 0.5 ms per pass (carried from ``trtllm``)
    + ``seq_overhead_s`` per running sequence: ``TorchSampler.update_requests`` and
    ``_prepare_tp_inputs`` loop over every request in Python each iteration (pybind calls
    ``add_new_token``, finish-reason checks, per-request input lists).  Constant from
    measurements, not fitted: NVIDIA/TensorRT-LLM PR #16564 measures a ~8.8 ms per-iteration
    host bubble on a GB200 gen worker at 256 running requests, dominated by that loop
    (34 us per request on Grace), and NVIDIA/TransformerEngine issue #2053 measures the
    same PyTorch host work 37.08 us on GB200's Grace vs 13.48 us on an H100 DGX's Xeon
    8480C; scaled to an x86 host: 8.8 ms / 256 x 13.48 / 37.08 = 12.5 us per sequence
    (``TRTLLM_PY_SEQ_S``; Grace-hosted systems multiply it back by their
    ``host_cpu_slowdown``, :mod:`dse.spec.host_cpu`: 34 us on GB200).  Mixed (context + generation) passes are not graph-captured and
    run the Python model eagerly: ``eager_op_s`` = ``EAGER_OP_S``.  A waiting context
    request enters a pass whole (``whole_prompts``): the ``MicroBatchScheduler`` takes the
    generation requests first, then every waiting context that fits the token budget, and
    without context chunking (``LlmArgs.enable_chunked_prefill`` default False) a context
    is never split (:func:`dse.infer.serving.prefill_share`).  Under a steady load a share
    ``q`` of the passes carries one whole prompt and runs eagerly, the rest replay graphs;
    before, the mean load ``q S`` sat in every pass and every pass ran eagerly, which put a
    flat ~42 ms TPOT (the eager floor of a 70B model's ~1000 kernels) on any closed loop
    however light.  Measured change (this revision): out-of-sample serving row mean 27.43
    -> 27.48 % (developer guide 32.8 -> 31.1 %, v1.0 perf overview 17.2 -> 18.4 %, release
    1.2 14.8 -> 14.7 %); the calibration set has no row of this profile.  Batch limits of
    ``trtllm-bench`` (``tensorrt_llm/bench/build/tuning.py``, ``finetune_setting``): max
    batch ``min(KV requests, 4096)``, max tokens ``min(batch (1 + ISL/OSL), 32768)`` --
    the caps 4096 / 32768, the KV term coming from the pool; the token budget a mixed
    pass packs prompts into is that tuned one (``bench_tuned_tokens``,
    :func:`dse.infer.serving.bench_max_num_tokens`), about ``B S / O`` tokens above the
    decode batch, so a pass holds about one cohort of the ``B / O`` prompts that start
    per iteration (:func:`dse.infer.serving.prefill_share`).  OFF in this profile for
    now, because the published physics that would let it be switched on was not found.
    On this revision, switched on, the suite's row mean goes from 35.5 to 38.8 % (per
    source: TRT-LLM v1.0 perf overview 23.6 -> 29.2 %, developer guide 36.5 -> 40.5 %,
    release 1.2 16.9 -> 21.1 %), the Llama-3.3-70B Blackwell NVFP4 throughput rows (24)
    go from mean -1.9 % / MAPE 15.1 % to +23.2 % / 23.2 % (1024 in / 8192 out: B200
    -36 -> +43 %, GB200 -44 -> +27 %, B300 -12 -> +40 %, GB300 -24 -> +22 %), and the
    Hopper fp8 rows (H100 TP2 / H200 TP1, 12) from -7.9 % / 8.3 % to +1.6 % / 5.0 %: the
    eager floor on every pass was hiding decode-only (graph) passes that the model
    predicts too fast on Blackwell only.  That excess follows the output length
    (decode-only share), not the KV-read share of the step: 128/2048 B200 +47 %
    (attention 42 % of the step), 1024/8192 +43 % (59 %), 8192/1024 +17 % (70 %).  The
    implied B200 decode-only step is ~1.5x the model's (37.2 vs 24.4 ms at 369
    sequences, 26.8 vs 18.3 ms at 87), everything in it, and GB200 / GB300 (1200 / 1400
    W) run those rows ~19 % faster than B200 / B300 (1000 / 1100 W) at the same HBM
    bandwidth (the model: +4 %) -- a clock- or power-bound part of the Blackwell decode
    step.  Checked against published sources and ruled out as the cause:
    (1) the achieved HBM fraction: FluidX3D's bandwidth-bound benchmark measures B200
    at 81 % of 8 TB/s against H100 80 % / H200 73 % (:mod:`dse.spec.efficiency`,
    ``hbm``); (2) the KV dtype: ``trtllm-bench`` (PyTorch flow,
    ``tensorrt_llm/bench/benchmark/utils/general.py`` ``get_settings``) keeps
    ``kv_cache_dtype = "auto"`` -- its ``_KV_CACHE_MAP`` fp8 default only applies when
    the dtype is ``None``, which it never is -- so the KV cache is the checkpoint's, and
    ``nvidia/Llama-3.3-70B-Instruct-FP4`` carries an fp8 one (TensorRT-LLM's accuracy
    references, ``tests/integration/defs/accuracy/references/mmlu.yaml``, key its NVFP4
    entry ``kv_cache_quant_algo: FP8``), as modelled; (3) a SIMT dequant of the fp8 KV
    in decode attention: on SM100 the preprocessing kernel converts Q to fp8 when the
    cache is e4m3 (``cpp/tensorrt_llm/kernels/xqaDispatcher.cpp``), so trtllm-gen runs
    its ``QkvE4m3`` kernels with fp8 UMMA and no ``SmemTransformedKv`` stage (that stage
    exists only in the ``QBfloat16KvE4m3`` kernels); (4) NVFP4 GEMMs at small M: the
    published B200 figures (flashinfer PR #2540, M = 1: ~70-80 GB/s per CTA, a ~4-12 us
    K-dependent floor) cost the TP1 70B linears at M <= 128 ~0.5 ms more per step, not
    the ~8.5 ms missing.  A Blackwell power / clock reference is not grounded either: the
    one published sustained-clock figure (flashinfer PR #2899: B200 1965 -> ~1580 MHz
    under back-to-back FA4 at ~1000 W) is for tensor-bound work, and the decode step the
    model prices as bandwidth-bound would not move with it; no static-power measurement
    for Blackwell was found (:mod:`dse.spec.power` keeps only its Hopper reference).
    Also ruled out: the finite request count
    of trtllm-bench (1500-3000 requests; the last partial wave of cohorts costs <= 3.4 %,
    RTX Pro PP4 / PP8 9 %); host time at pp = 1 (overlapped: <= 5 ms against 18-37 ms
    steps -- with pp > 1 it is not overlapped: the PyExecutor's ``_executor_loop_pp``
    has no overlap scheduler, its host work per micro-batch runs in series with the
    stage pass, :mod:`dse.infer.pipeline`, which is what the RTX Pro PP4 / PP8 rows
    were missing); the KV batch (GUARANTEED_NO_EVICT reserves S + O per request: 87 on B200 at
    1024 + 8192, below ``tuning.py``'s max_batch_size: 98.8 estimated requests -> 128).
    KV: 32-token blocks (LLM API
    ``KvCacheConfig.tokens_per_block`` default), guaranteed-no-evict admission (the
    capacity scheduler's default policy), fp8 KV with fp8 / NVFP4 checkpoints as ``trtllm``;
    linears via TRT-LLM's own tuned GEMM ops (autotuner), ``linear_bw_eff`` 1.
``trtllm_mlperf`` -- NVIDIA's MLPerf Inference harness on the same executor
    (``closed/NVIDIA/code/harness/harness_llm``, engine text "... MLPerf harness" /
    "NVIDIA-derived harness"): the ``trtllm`` profile with admission on the blocks a
    request holds now (``MAX_UTILIZATION``): the published batches (806 Llama-2-70B
    requests on one H200, 1024 per TP2 pair of H100s,
    ``closed/NVIDIA/configs/llama2-70b/{Offline,Server}``, ``kvcache_free_gpu_mem_frac``
    0.90) fit an fp8 cache only on the mean footprint, not on input + maximum output.
``trtllm_static`` -- TensorRT-LLM ``gptSessionBenchmark`` (v0.5-v0.6 static batching):
    the benchmark times only the session's ``generate`` (engine enqueue and
    synchronisation), no scheduler, so host time per iteration 0; no CUDA graphs (the
    benchmark's ``--enable_cuda_graph`` is off in the documented commands,
    docs/source/performance.md at 77d24b5).  Each timed ``generate`` call also pays a
    fixed host cost, ``request_overhead_s`` = 3 ms, charged once to the first token:
    ``GptSession::generateSingleBatch`` (cpp/tensorrt_llm/runtime/gptSession.cpp of
    v0.5/0.6) copies the context lengths back to the host (a synchronising copy),
    reshapes the runtime buffers, resets the decoder for the new batch
    (``StatefulGptDecoder::newBatch``: memsets, sampling setup), prepares the context
    step's inputs on the host and binds the context-phase shapes of the TensorRT
    execution context before the first kernel runs, and after the context pass runs
    the decoder step, a ``shouldStopSync`` stream synchronisation, ``finalizeOutputIds``
    and a final synchronisation.  FITTED, one value for the profile: the v0.5 batch-1
    first-token rows (output length 1, so the measured latency is one ``generate``
    call) leave the model short by a near-constant amount where its GPU time is right
    (Llama-2-7B H100 fp8: 2.9 ms at 128 input tokens, 3.4 ms at 2048); scan 2 / 3 / 4
    ms: the profile's 8 TTFT rows 14.5 / 11.6 / 12.1 % MAPE (0: 22.6 %).  It is noise
    for the throughput rows (one call per several-second batch).
    Its decode kernel of that era (masked multi-head attention) reads K/V once per
    *query* head: the XQA kernel that shares a KV head across its GQA/MQA group arrived
    with v0.7/v0.8 (TensorRT-LLM docs/source/advanced/gpt-attention.md, "XQA
    optimization"; NVIDIA blog "TensorRT-LLM XQA", Jan 2024), so ``gqa_shared_kv`` is
    off: Llama-2-70B and Falcon-180B (8 KV heads) read ``a / g`` = 8 and 29 times the
    cache bytes of a shared read.
``nemo`` -- NeMo Framework inference on the TensorRT-LLM backend: the Python
    ``GenerationSession`` / ``ModelRunner`` loop (``tensorrt_llm/runtime/generation.py``)
    runs one Python step per token (dynamic decoder, stop checks, tensor bookkeeping):
    host time 1.5 ms per iteration, no CUDA graphs, static batch.
``vllm`` -- vLLM 0.4-0.6: decode as CUDA graphs for batches <= 256
    (``_BATCH_SIZES_TO_CAPTURE`` = 1, 2, 4, 8..256 in ``vllm/worker/model_runner.py``),
    prefill eager; ``max_num_seqs`` 256 (``SchedulerConfig`` default);
    ``gpu_memory_utilization`` 0.9 of total memory for weights + activations + KV;
    16-token blocks; admission on current blocks with preemption.  Host time 4 ms per
    iteration: the vLLM v0.6.0 release blog (blog.vllm.ai, 2024-09-05, "vLLM v0.6.0:
    2.7x Throughput Improvement and 5x Latency Reduction") profiles v0.5.3 and finds the
    GPU idle for most of each step on Llama-3-8B / H100 while the scheduler, input
    preparation and detokenisation run (tens of percent of a ~10 ms step); multi-step
    scheduling (``--num-scheduler-steps``, parsed from the engine text) amortises it, and a
    new request then waits for the running pass of that many iterations.  Prompts run
    as their own iteration (chunked prefill is off by default below 32k context in 0.6,
    ``EngineArgs.enable_chunked_prefill``), so decode stalls while they run.  The KV
    pool is what is left after the profiling forward of the whole token budget
    (``profile_at_budget``, every vLLM profile).  From 0.7.1 to 0.8.0 V0 forces chunked
    prefill off for MLA models, so their budget is ``max(max_model_len, 2048)`` -- 163840
    tokens for DeepSeek-R1 at its defaults (:func:`vllm_v0_mla`).
``vllm_mlperf`` -- vLLM under an MLPerf Inference harness (engine text "... MLPerf
    harness", as ``trtllm_mlperf``): the ``vllm`` profile without the default
    ``max_num_seqs`` = 256 cap.  An MLPerf submitter sets ``max_num_seqs`` per scenario
    to the throughput-best value the KV pool allows (AMD's v4.1 llama2-70b harness passes
    it per scenario, ``closed/AMD/code/llama2-70b-99.9/test_VllmFp8``), so the running
    batch is the tuned limit of :func:`dse.infer.serving.tuned_batch` under the KV slots;
    the CUDA-graph capture limit stays 256 (vLLM 0.4 ``_BATCH_SIZES_TO_CAPTURE``), larger
    decode batches run eager.  Benchmarks that run vLLM with its defaults
    (``benchmark_serving`` / ``benchmark_throughput``) keep the ``vllm`` profile.
``sglang`` -- SGLang v0.3: decode CUDA graphs up to batch 160 (``cuda_graph_max_bs``
    default, ``python/sglang/srt/server_args.py``), ``mem_fraction_static`` 0.88 at TP1
    (the share of GPU memory for weights + KV only, ``static_fraction``; by TP size and
    release, :func:`sglang_mem_fraction`), ``chunked_prefill_size`` 8192,
    ``max_running_requests`` from the pool; token-granular paged pool (block 1).  Host
    time 1.5 ms per iteration; prefill batches run apart from decode
    (``enable_mixed_chunk`` off by default).  The scheduler runs between GPU iterations until the
    v0.4 overlap scheduler (SGLang v0.4 release blog, 2024-12-04, "Zero-Overhead Batch
    Scheduler": without overlap the CPU scheduling overhead is a visible share of each
    decode step).  That host time also grows with the running batch,
    ``seq_overhead_s`` = 20 us per running request per iteration: the v0.3 scheduler
    (``python/sglang/srt/managers/tp_worker.py``, ``forward_decode_batch`` and
    ``handle_finished_requests``) runs a Python loop over every request after each
    decode step -- append the token, ``check_finished``, and, for streamed requests
    (``bench_serving`` streams), ``init_incremental_detokenize`` (a list of the prompt +
    output ids, ~S + o elements), a ``meta_info`` dict and the per-request lists of the
    ``BatchTokenIDOut`` pickled to the detokenizer -- and ``prepare_for_decode`` builds
    the next input ids from a Python list, all before the next forward starts (no
    overlap until v0.4).  ESTIMATE from those code paths (~100-200 Python bytecode-level
    operations of ~0.1 us each per request), not fitted: the calibration rows would
    take more (the A100 8B ShareGPT runs' median ITL rises 11.93 -> 14.41 ms from 4 to 8
    RPS, ~140 us per extra running request, while KV reads explain ~35 us), but a
    larger linear term makes the 5000-prompt offline runs too slow, so the rest of
    that rise is not a linear host cost (scan: 0 / 20 / 40 us: row-mean 12.67 / 12.49
    / 12.40 %).  vLLM 0.6 is left at 0: its MLPerf MI300X rows (vLLM 0.4.3, offline
    at the batch cap) are already predicted slow, and a per-sequence term makes them
    slower.
``sglang_overlap`` -- SGLang from v0.3.6 (engine text "sglang" with a version >= 0.3.6, or
    none): the ``sglang`` profile with the overlap scheduler, on by default since 0.3.6
    (``server_args.py``: ``disable_overlap_schedule = False``; ``managers/scheduler.py``
    ``event_loop_overlap`` launches batch n, then processes the results of n - 1 and
    schedules n + 1 while the GPU runs): iteration ``max(GPU pass, host)``
    (``host_overlap``).  Still prefill-first (``get_next_batch_to_run``: "Run prefill
    first if possible", through 0.5.7) with ``enable_mixed_chunk`` off, so fixed-length
    closed loops keep the lockstep waves.  From 0.4.8 ``chunked_prefill_size`` and
    ``cuda_graph_max_bs`` follow the GPU memory, from 0.5.3 the memory and the TP size
    (:func:`launch_defaults`).
``vllm_v1`` -- vLLM's V1 engine: the default from 0.8.0 (``vllm/envs.py`` ``VLLM_USE_V1``
    "1"), the only engine from 0.11.0; ``VLLM_USE_V1=1`` / ``=0`` in the engine text and
    multi-step scheduling (a V0-only option) override the version rule
    (:func:`vllm_runs_v1`).  The V1 scheduler has "no 'decoding phase' nor 'prefill
    phase'" (``vllm/v1/core/sched/scheduler.py``): it schedules the running requests,
    then the waiting ones, in one token budget, with chunked prefill always on
    (``arg_utils.py``: "V1 always uses chunked prefills"), so prompts are chunks of
    ``max_num_batched_tokens`` mixed into the decode steps (``mixed_batches``,
    ``chunked_prefill``; fixed-length closed loops stagger, as on TensorRT-LLM).  Limits
    by GPU (:func:`launch_defaults`): ``max_num_batched_tokens`` 8192 (server) / 16384
    (offline ``LLM`` class) and ``max_num_seqs`` 1024 on >= 70 GiB GPUs other than A100,
    else 2048 / 8192 and 256.  CUDA graphs are piecewise (attention outside them) and
    chosen by the step's token count, mixed steps included (``gpu_model_runner.py``:
    ``num_scheduled_tokens <= cudagraph_batch_sizes[-1]``, capture sizes up to 512:
    ``graphs_by_tokens``, ``graph_max_batch`` 512); larger steps run the compiled
    (``torch.compile`` / Inductor) model without graphs, whose generated wrapper launches
    each kernel with one Python call: the issue floor is ``COMPILED_OP_S`` =
    ``EAGER_OP_S`` / 2.4 per kernel (the eager constant is ~2.4 torch calls of 15-20 us per
    kernel; one such call per kernel here).  A waiting prompt enters the next step whole
    when it fits the budget left by the running decodes (the scheduler's
    ``num_new_tokens = min(request's remaining tokens, token_budget)``), so under a steady
    load a share ``q`` of the steps carries whole prompts and the rest are decode-only
    (``whole_prompts``; :func:`dse.infer.serving.prefill_share`), not ``q S`` tokens in
    every step.  ``gpu_memory_utilization`` 0.9 and
    16-token blocks as V0.  Host time: the EngineCore step is serial (schedule ->
    execute -> update_from_output) until async scheduling became the default in 0.14; no
    published per-step V1 figure was found (the V1 release blog gives only "up to 1.7x"
    V0's throughput), so V0's 4 ms (``VLLM_STEP_S``) is carried -- an open item.  The one
    measured V1 gap found is of that order: vllm-project/vllm issue #10634 (2024-11, the
    V1 engine with ``AsyncLLM``, PR #9826) sees 5-6 ms between two decode steps of
    Llama-2-7B at batch 256 on ShareGPT, GIL contention between the engine's threads.
    **Front end** (``frontend_s``, both V1 profiles): a request to vLLM's OpenAI server
    crosses a process of its own before and after the engine -- the API server parses the
    HTTP request, renders and tokenizes the prompt (``AsyncMicrobatchTokenizer``, which
    waits ``batch_wait_timeout_s`` = 2 ms for a batch, ``vllm/utils/async_utils.py``
    v0.13.0) and sends it to the EngineCore process over ZMQ (``AsyncLLM.add_request``);
    each output comes back over ZMQ to the API server's ``output_handler``, is
    detokenized (``OutputProcessor``) and written as a server-sent event.  The engine's
    own TTFT metric (``vllm:time_to_first_token_seconds``: ``arrival_time``, stamped
    after tokenization in ``InputProcessor.process_inputs``, to the first output) leaves
    both out; a client measures them.  Measured: client TTFT less the server metric
    8.4 and 12.0 ms in two rounds of ``vllm bench serve`` with the completions backend
    (512-token prompts, 8 in flight; 11.0-12.2 ms for the chat backend) --
    vllm-project/vllm PR #54628 ("Add Responses API backend to vllm bench serve") -- so
    ``VLLM_V1_FRONTEND_S`` = 10 ms, added once to TTFT and to e2e (the first and the last
    token each cross it once; TPOT unchanged) and, in a closed loop, to the time a client
    holds its slot.  Above the KV slots the queue wait is Little's law on that client
    cycle, which overstates it by the front end's share of the cycle (a queued request
    crossed the front end while another held its slot): 0.25 % for a 4 s request.  It is
    measured on one host (a laptop CPU, vLLM 0.28): the value is carried to every V1
    release and host, an open item.  Off where no server stands between client and
    engine (:func:`launch_defaults`: the offline ``LLM`` class, an MLPerf harness).
``vllm_v1_async`` -- the V1 engine with async scheduling: ``vllm_v1`` whose host step runs
    beside the GPU pass (``host_overlap``: iteration ``max(GPU pass, host)``, the same
    constants).  ``vllm/v1/engine/core.py`` ``step_with_batch_queue`` schedules step n + 1
    and submits it (``execute_model(..., non_block=True)``) while the GPU runs step n, and
    pops and processes step n's output (``update_from_output``) only once the queue of
    ``max_concurrent_batches`` = 2 batches is full; ``vllm/v1/core/sched/async_scheduler.py``
    keeps a placeholder per scheduled, not yet sampled token.  Opt-in ``--async-scheduling``
    from v0.10.0 (PR #19970, "Experimental async scheduling ... to overlap engine core
    scheduling with GPU runner"); on by default from v0.14.0 (PR #27614, merged 2025-12-29;
    the v0.14.0 notes: "Async scheduling is now enabled by default ... disable with
    --no-async-scheduling. Excludes ... pipeline parallel, CPU backend, non-MTP/Eagle spec
    decoding"; ``vllm/config/vllm.py`` resolves ``async_scheduling = None`` to True unless
    an incompatible option is set).  Routing (:func:`vllm_async`): a V1 text with
    ``--no-async-scheduling`` is ``vllm_v1``; with ``--async-scheduling`` (from 0.10.0) or
    a version >= 0.14.0, or no version (today's vLLM), ``vllm_v1_async``; a row's launch in
    ``notes`` decides too -- the flag, or the key ``async-scheduling: true`` / ``false`` of
    the ``--config`` YAML file (:func:`dse.infer.launch_flags.launch_settings`).  With pp > 1 the
    overlap is dropped (``pp_serial_step``, :mod:`dse.infer.pipeline`), as 0.14 does.

``tgi`` / ``tgi_v3`` -- Hugging Face text-generation-inference (engine text "tgi" or
    "text-generation-inference"; ``tgi`` from 2.0 to 2.4, ``tgi_v3`` from 3.0 or with no
    release stated; 1.x has no profile).  A Rust router drives a Python model server over gRPC; both profiles read
    the TGI source (``launcher/src/main.rs``, ``backends/v3/src/backend.rs``,
    ``server/text_generation_server/models/flash_causal_lm.py``, v2.0.0-v3.3.7):
    CUDA graphs for decode-only batches up to 32 (``--cuda-graphs`` default ``[1, 2, 4, 8,
    16, 32]`` in every release; larger decode batches, prefill and mixed passes run the
    Python model eagerly, ``eager_op_s`` = ``EAGER_OP_S``; a smaller batch replays the next
    captured size, a padding not charged); ``--max-concurrent-requests`` 128 bounds the
    requests in the system and so the running batch (``max_batch``); blocks for ``input +
    max_new_tokens`` are reserved at admission, no preemption (``reserve_final_kv``); the
    KV cache is the model's dtype; all-reduce is NCCL (no custom kernel); linears are
    ``torch`` GEMMs (``TORCH_LINEAR_BW_EFF``).  Before 3.0 new requests are prefilled in a
    ``Prefill`` call of their own while the running batch waits (``mixed_batches`` off,
    16-token blocks); from 3.0 ``PREFILL_CHUNKING`` is on and a prefill is concatenated
    with the running decode batch into one pass, budget ``max_batch_prefill_tokens``
    (``mixed_batches``, ``whole_prompts``: a waiting prompt enters whole where it fits;
    flashinfer, 1-token blocks).  The KV pool is what the warm-up prefill of the whole
    budget leaves (``profile_at_budget``); its fraction and the budget follow the release,
    the model, the card and the TP size (:mod:`dse.infer.tgi`, :func:`launch_defaults`).
    Host time: nothing of the server's step overlaps the GPU (the router awaits each
    ``Decode`` RPC; ``generate_token`` syncs with ``.tolist()`` and then runs a Python loop
    over every request -- two ``tokenizer.decode`` calls for incremental detokenization,
    the stopping criteria, a ``Generation`` protobuf), the same serial per-request loop as
    SGLang before its overlap scheduler, so SGLang v0.3's host constants are CARRIED, not
    fitted: 1.5 ms per step and 20 us per running request (an estimate from the code
    path; no published TGI step profile was found -- open item).
``lmdeploy`` / ``lmdeploy_async`` -- LMDeploy's TurboMind engine (engine text "lmdeploy"
    or "turbomind", the ``api_server`` default backend for Llama / Qwen; ``lmdeploy_async``
    from 0.12, whose two-thread Engine / ModelExecutor with ``async_ = 1`` schedules
    beside the GPU, ``host_overlap``).  C++ and CUDA, read from ``lmdeploy/messages.py``
    ``TurbomindEngineConfig`` and ``src/turbomind/models/llama/LlamaBatch.cc`` (v0.4-v0.16):
    no CUDA graphs in any release (kernels pay the generation's launch gap); the KV pool
    is ``cache_max_entry_count`` = 0.8 of the memory free after the weights
    (``BlockManager``: ``free x ratio / block_size``, ``kv_after_weights``), 64-token
    blocks, the model's dtype (``quant_policy`` 0); admission reserves only the current
    context's blocks and preempts the newest sequences when they run out
    (``reserve_final_kv`` off); decode rows and prefill chunks share one forward
    (``forwardUnified``), ``max_prefill_token_num`` 8192 per iteration (``mixed_batches``,
    ``chunked_prefill``; a prompt that fits enters whole); ``max_batch_size`` 128 before
    0.6, then by GPU name (``lmdeploy/utils.py`` ``get_max_batch_size``; :func:`launch_defaults`).
    Linears are TurboMind's own tuned GEMMs (``linear_bw_eff`` 1, as TensorRT-LLM).  Host:
    a C++ loop per iteration (``LlamaBatch::InternalThreadEntry``: initialize, forward,
    finish with a stream synchronisation; output streamed to Python through per-request
    callbacks off that loop), the C++ executor's 0.5 ms of ``trtllm`` CARRIED.
    LMDeploy's PyTorch engine (engine text naming "pytorch") has no profile.

Units: seconds, bytes, tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import jax.numpy as jnp

from dse.errors import InputError
from dse.spec.model import is_mla, max_context_of
from dse.infer.tgi import TGI_V2, TGI_V3, tgi_launch

GRAPH_LAUNCH_S = 1.5e-6


def graph_kernel_s(hw):
    """Fixed cost of one kernel replayed from a CUDA graph on ``hw``: the graph's launch
    gap ``GRAPH_LAUNCH_S`` plus one HBM round trip (``hw.dram_latency_s``, measured per
    generation, :mod:`dse.spec.efficiency`) before the kernel's first bytes arrive -- the
    ramp a dependent kernel cannot hide (module docstring, "kernel gaps")."""
    return GRAPH_LAUNCH_S + hw.dram_latency_s
EAGER_OP_S = 40e-6       # host issue time per kernel of an eager pass (module docstring)
# vLLM V1 beyond its CUDA-graph sizes runs the torch.compile'd model: one Python launch per
# kernel (Inductor's wrapper) instead of EAGER_OP_S's ~2.4 eager torch calls per kernel
COMPILED_OP_S = EAGER_OP_S / 2.4
TORCH_LINEAR_BW_EFF = 0.85   # weight-stream share of PyTorch linears (module docstring; FITTED)
# host time per running sequence per iteration of TensorRT-LLM's PyExecutor (``trtllm_pytorch``
# in the module docstring: 8.8 ms / 256 requests on Grace x 13.48 / 37.08 for an x86 host)
TRTLLM_PY_SEQ_S = 8.8e-3 / 256 * (13.48 / 37.08)
# host time per iteration of vLLM's engine step, V0 (v0.5.3 profile, module docstring) and
# carried to V1's EngineCore step for want of a V1 measurement (``vllm_v1``: open item)
VLLM_STEP_S = 4.0e-3
# latency vLLM's OpenAI server adds to a request outside the engine (module docstring,
# "Front end"): client TTFT less the server's own TTFT metric, vllm-project/vllm PR #54628
VLLM_V1_FRONTEND_S = 10.0e-3


@dataclass(frozen=True)
class EngineProfile:
    name: str
    cuda_graphs: bool          # decode iterations replayed as CUDA graphs
    graph_max_batch: int       # largest decode batch with a captured graph
    step_overhead_s: float     # host time per iteration, not overlapped with the GPU
    scheduler_steps: int       # iterations per scheduling pass (vLLM multi-step)
    mem_fraction: float        # of GPU memory for weights + KV (see kv_after_weights)
    kv_after_weights: bool     # fraction of the memory left after weights (TRT-LLM)
    block_tokens: int          # paged KV block
    reserve_final_kv: bool     # admission reserves prompt + output tokens
    max_batch: int
    max_num_tokens: int
    chunked_prefill: bool
    mixed_batches: bool = True     # prompts share an iteration with decode tokens
    gqa_shared_kv: bool = True     # decode kernel reads a KV head once per group
    fp8_kv_with_fp8: bool = False  # fp8 (or fp4) weights imply an fp8 KV cache
    request_overhead_s: float = 0.0  # host time per static generate() call (first token)
    seq_overhead_s: float = 0.0    # host time per running sequence per iteration
    eager_op_s: float = 0.0        # host time per kernel of a pass run without a CUDA graph
    linear_bw_eff: float = 1.0     # achieved / STREAM bandwidth of the weight stream of linears
    host_overlap: bool = False     # host time runs beside the GPU pass (overlap scheduler)
    bench_tuned_tokens: bool = False  # trtllm-bench sets max_num_tokens from ISL/OSL
    python_host: bool = False      # host work is Python: scales with the host CPU (dse.spec.host_cpu)
    graphs_by_tokens: bool = False  # a pass of <= graph_max_batch tokens, mixed or not, replays a graph
    whole_prompts: bool = False    # a mixed pass takes each waiting prompt whole, up to the budget
    pp_serial_step: bool = False   # with pp > 1 the host overlap is off and one serial engine step
    #                                runs per iteration, not a host loop per micro-batch (dse.infer.pipeline)
    profile_at_budget: bool = False  # the KV pool is what is left after a profiling forward of
    #                                  max_num_tokens tokens (vLLM profile_run), not of one prompt
    static_fraction: bool = False  # mem_fraction holds weights + KV only; activations and CUDA
    #                                graphs live in the rest (SGLang mem_fraction_static)
    mla_absorbed_weights: bool = False  # MLA decode weights W_Q_UK / W_UV_O materialized beside
    #                                     the raw ones (vLLM 0.7.x, dse.infer.memory.absorbed_mla_bytes)
    recv_interval: int = 1         # decode passes between polls for new requests (SGLang
    #                                --scheduler-recv-interval; module docstring)
    quant_kernels: float = 0.0     # 1: fp8 / fp4 activation quantization is a kernel of its own
    #                                before each linear (PyTorch model code), 0: fused
    #                                (dse.infer.forward.memory_pass_kernels)
    full_window: bool = False      # attends the whole KV cache unless the launch sets a window (served_model)
    attention_window: int = 0      # tokens of TensorRT-LLM's max_attention_window as the launch
    #                                states it for every layer; 0 = unstated (served_model)
    fp8_context_attn: float = 0.0  # 1: FP8 prompt attention on quantized models (forward.context_attention_rates)
    frontend_s: float = 0.0        # per-request latency of the HTTP front end outside the engine
    #                                (request in + first / last token out), added to TTFT and e2e

    @property
    def overhead_per_iter_s(self) -> float:
        return self.step_overhead_s / self.scheduler_steps

    @property
    def spreads_prompts(self) -> bool:
        """A mixing engine that puts the mean prompt load ``q S`` in every pass: neither
        whole prompts (``whole_prompts``) nor trtllm-bench's cohort packing
        (``bench_tuned_tokens``) -- :func:`dse.infer.serving.prefill_share`'s ``(1, q S)``."""
        return self.mixed_batches and not self.whole_prompts and not self.bench_tuned_tokens

    @property
    def poll_iterations(self) -> int:
        """Decode iterations between two looks at the request queue: ``scheduler_steps x
        recv_interval`` (a request arriving at a random instant waits half of it)."""
        return self.scheduler_steps * self.recv_interval

    def admission_lag(self, pp=1.0):
        """Whole iterations a request arriving during iteration n waits beyond the rest of
        n before the iteration that carries its prompt: 1 on an engine whose host runs one
        step ahead of the GPU (``host_overlap``), because iteration n + 1 was scheduled and
        submitted when n started -- vLLM V1 ``EngineCore.step_with_batch_queue``
        (``vllm/v1/engine/core.py``: schedule and submit a batch while the queue of
        ``max_concurrent_batches`` = 2 is not full, then block on the oldest; new requests
        are taken from the input queue only between two such calls), SGLang
        ``Scheduler.event_loop_overlap`` (``recv_requests`` then launch batch n + 1 before
        ``process_batch_result`` of n), TensorRT-LLM ``PyExecutor._executor_loop_overlap``
        (fetch, schedule and launch n + 1, then sync and process n) -- so the prompt rides
        n + 2.  It follows from the overlap itself (a schedule made while n runs cannot hold
        a request that arrives after it), so TurboMind's ``lmdeploy_async`` takes it by the
        same argument, not read from its code.  0 on a serial engine, whose next schedule
        follows n.  With pp > 1 an engine with ``pp_serial_step`` (vLLM 0.14 drops async
        scheduling with PP) is serial: 0.  ``pp`` may be traced."""
        if not self.host_overlap:
            return 0.0
        if not self.pp_serial_step:
            return 1.0
        if isinstance(pp, (int, float)):
            return 0.0 if pp > 1 else 1.0
        return jnp.where(pp > 1, 0.0, 1.0)

    def scheduling_wait(self, pp=1.0):
        """Mean iterations a request arriving at a random instant waits before the pass that
        carries its prompt: half the running scheduling pass (:attr:`poll_iterations`) plus
        the iteration an overlap scheduler has already submitted (:meth:`admission_lag`)."""
        return 0.5 * self.poll_iterations + self.admission_lag(pp)

    def host_scale(self, hw):
        """Factor on this engine's host constants for ``hw``'s host CPU: the hardware's
        ``host_cpu_slowdown`` (Grace-hosted GH200 / GB200 / GB300, :mod:`dse.spec.host_cpu`)
        where the host work is Python (``python_host``), else 1 (the constants are per
        x86 DGX host; C++ executors are not scaled)."""
        return hw.host_cpu_slowdown if self.python_host else 1.0

    def eager_floor_s(self, hw):
        """Host issue time per kernel of an eager pass on ``hw``'s host: ``eager_op_s``,
        NOT scaled by :meth:`host_scale`.  ``EAGER_OP_S`` (40 us) is a floor estimated for
        vLLM / SGLang's Python modules on x86, not a measured per-kernel cost of each
        engine's model code; scaled by Grace's 2.75 it would make every mixed pass of a
        70B model on GB200 host-bound (~960 kernels x 110 us = 105 ms against ~40 ms of GPU
        time) and put GB200 below B200, where the published TensorRT-LLM tables put it
        above -- evidence that the floor is too high for that engine's fused custom ops,
        not a reason to scale it.  Open item; the per-iteration and per-sequence host
        loops (:meth:`host_s`), measured on Grace in the first place, are scaled."""
        return self.eager_op_s

    def graph_replay(self, decode_batch, prompt_tokens):
        """Whether a pass of ``decode_batch`` decode sequences and ``prompt_tokens`` prompt
        tokens replays a CUDA graph: generation-only batches up to ``graph_max_batch``
        sequences, or, where graphs are chosen by the pass's token count
        (``graphs_by_tokens``: vLLM V1's piecewise graphs, ``num_scheduled_tokens <=
        cudagraph_batch_sizes[-1]``), any pass of at most ``graph_max_batch`` tokens.
        Python numbers give a bool, traced ones a JAX bool."""
        b, p = decode_batch, prompt_tokens
        fits = (b + p <= self.graph_max_batch if self.graphs_by_tokens
                else (p <= 0) & (b <= self.graph_max_batch))
        if isinstance(fits, bool):
            return bool(self.cuda_graphs) and fits
        return jnp.logical_and(self.cuda_graphs, fits)

    def host_s(self, sequences, host_scale=1.0) -> float:
        """Host time of one iteration that is serial with the GPU: the per-pass part
        (:attr:`overhead_per_iter_s`) plus ``seq_overhead_s`` per running sequence, times
        ``host_scale`` (:meth:`host_scale`; 1 = an x86 DGX host)."""
        return (self.overhead_per_iter_s + self.seq_overhead_s * sequences) * host_scale

    def with_host_s(self, gpu_s, sequences, host_scale=1.0):
        """Seconds of one iteration whose GPU pass takes ``gpu_s``, with the host time of
        ``sequences`` running sequences (:meth:`host_s`): serial, ``gpu_s + host``, or,
        with an overlap scheduler (``host_overlap``: the CPU prepares iteration n+1 and
        processes the results of n-1 while the GPU runs n), ``max(gpu_s, host)``."""
        host = self.host_s(sequences, host_scale)
        if self.host_overlap:
            if isinstance(gpu_s, (int, float)) and isinstance(host, (int, float)):
                return max(float(gpu_s), float(host))
            return jnp.maximum(gpu_s, host)      # traced callers (the vectorized sweep)
        return gpu_s + host


PROFILES = {
    "trtllm": EngineProfile("trtllm", False, 0, 0.5e-3, 1, 0.90, True, 64, True, 2048, 8192, False,
                            fp8_kv_with_fp8=True, full_window=True, fp8_context_attn=1.0,
                            whole_prompts=True),
    "trtllm_mlperf": EngineProfile("trtllm_mlperf", False, 0, 0.5e-3, 1, 0.90, True, 64, False, 2048,
                                   8192, False, fp8_kv_with_fp8=True, full_window=True,
                                   whole_prompts=True),
    "trtllm_pytorch_eager": EngineProfile("trtllm_pytorch_eager", False, 0, 0.5e-3, 1, 0.90, True, 64,
                                          True, 2048, 8192, False, eager_op_s=EAGER_OP_S,
                                          python_host=True, quant_kernels=1.0, whole_prompts=True),
    "trtllm_pytorch": EngineProfile("trtllm_pytorch", True, 8192, 0.5e-3, 1, 0.90, True, 32, True,
                                    4096, 32768, False, fp8_kv_with_fp8=True,
                                    seq_overhead_s=TRTLLM_PY_SEQ_S, eager_op_s=EAGER_OP_S,
                                    host_overlap=True, python_host=True, whole_prompts=True,
                                    quant_kernels=1.0),
    "trtllm_static": EngineProfile("trtllm_static", False, 0, 0.0, 1, 0.90, True, 64, True, 1 << 20,
                                   1 << 30, False, gqa_shared_kv=False, request_overhead_s=3.0e-3,
                                   full_window=True),
    "nemo": EngineProfile("nemo", False, 0, 1.5e-3, 1, 0.90, True, 64, True, 1 << 20, 1 << 30,
                          False, python_host=True),
    "vllm": EngineProfile("vllm", True, 256, VLLM_STEP_S, 1, 0.90, False, 16, False, 256, 8192, False,
                          mixed_batches=False, eager_op_s=EAGER_OP_S,
                          linear_bw_eff=TORCH_LINEAR_BW_EFF, python_host=True, profile_at_budget=True,
                          quant_kernels=1.0),
    "vllm_mlperf": EngineProfile("vllm_mlperf", True, 256, VLLM_STEP_S, 1, 0.90, False, 16, False, 1 << 20,
                                 8192, False, mixed_batches=False, eager_op_s=EAGER_OP_S,
                                 linear_bw_eff=TORCH_LINEAR_BW_EFF, python_host=True,
                                 profile_at_budget=True),
    "sglang": EngineProfile("sglang", True, 160, 1.5e-3, 1, 0.88, False, 1, False, 4096, 8192, True,
                            mixed_batches=False, seq_overhead_s=20e-6, eager_op_s=EAGER_OP_S,
                            linear_bw_eff=TORCH_LINEAR_BW_EFF, python_host=True, static_fraction=True,
                            quant_kernels=1.0),
    "sglang_overlap": EngineProfile("sglang_overlap", True, 160, 1.5e-3, 1, 0.88, False, 1, False,
                                    4096, 8192, True, mixed_batches=False, seq_overhead_s=20e-6,
                                    eager_op_s=EAGER_OP_S, linear_bw_eff=TORCH_LINEAR_BW_EFF,
                                    host_overlap=True, python_host=True, static_fraction=True,
                                    quant_kernels=1.0),
    "vllm_v1": EngineProfile("vllm_v1", True, 512, VLLM_STEP_S, 1, 0.90, False, 16, False, 1024,
                             8192, True, mixed_batches=True, eager_op_s=COMPILED_OP_S,
                             linear_bw_eff=TORCH_LINEAR_BW_EFF, python_host=True,
                             graphs_by_tokens=True, whole_prompts=True, profile_at_budget=True,
                             quant_kernels=1.0, frontend_s=VLLM_V1_FRONTEND_S),
    "tgi": EngineProfile("tgi", True, 32, 1.5e-3, 1, 0.95, True, 16, True, 128, 4145, False,
                         mixed_batches=False, seq_overhead_s=20e-6, eager_op_s=EAGER_OP_S,
                         linear_bw_eff=TORCH_LINEAR_BW_EFF, python_host=True, profile_at_budget=True,
                         quant_kernels=1.0),
    "tgi_v3": EngineProfile("tgi_v3", True, 32, 1.5e-3, 1, 0.90, False, 1, True, 128, 4096, True,
                            mixed_batches=True, seq_overhead_s=20e-6, eager_op_s=EAGER_OP_S,
                            linear_bw_eff=TORCH_LINEAR_BW_EFF, python_host=True, whole_prompts=True,
                            profile_at_budget=True, quant_kernels=1.0),
    "lmdeploy": EngineProfile("lmdeploy", False, 0, 0.5e-3, 1, 0.80, True, 64, False, 128, 8192, True,
                              mixed_batches=True, whole_prompts=True),
}
# the V1 engine with async scheduling (module docstring): its host step beside the GPU pass
PROFILES["vllm_v1_async"] = replace(PROFILES["vllm_v1"], name="vllm_v1_async", host_overlap=True,
                                    pp_serial_step=True)
# TurboMind from 0.12: scheduling beside the GPU (module docstring, ``lmdeploy_async``)
PROFILES["lmdeploy_async"] = replace(PROFILES["lmdeploy"], name="lmdeploy_async", host_overlap=True)
#: the V1 engine's profiles (same launch limits, :func:`launch_defaults`)
VLLM_V1_NAMES = ("vllm_v1", "vllm_v1_async")
#: text-generation-inference's and LMDeploy TurboMind's profiles (module docstring)
TGI_NAMES = ("tgi", "tgi_v3")
LMDEPLOY_NAMES = ("lmdeploy", "lmdeploy_async")


#: versions of other software an engine text may state beside the engine's own
#: ("TensorRT 10.2", "CUDA 12.9", "ROCm 6.3"): never the engine's version
_OTHER_VERSION = re.compile(r"\b(?:tensorrt|cuda|rocm|python|torch|pytorch|cudnn|nccl|driver)"
                            r"\s*v?\d+(?:\.\d+)*", re.IGNORECASE)


def _version(text: str) -> tuple[int, int] | None:
    """The first ``major.minor`` in an engine text (``"trtllm (0.17.post1.dev, ..."`` ->
    (0, 17); ``"v1.0"`` -> (1, 0)), or None; a TensorRT / CUDA / ROCm / PyTorch version
    (``"trtllm (TensorRT 10.2, ...)"``) is not the engine's (:data:`_OTHER_VERSION`)."""
    v = version3(text)
    return None if v is None else v[:2]


def version3(text: str) -> tuple[int, int, int] | None:
    """``(major, minor, patch)`` of the engine's own version in ``text``: the first
    ``major.minor[.patch]`` once other packages' versions are removed
    (:data:`_OTHER_VERSION`), a missing patch 0 (``"v0.4"`` -> (0, 4, 0)), a release series
    ``"v1.x"`` -> (1, 0, 0); None if there is none."""
    text = _OTHER_VERSION.sub(" ", text)
    m = re.search(r"\bv?(\d+)\.(\d+)(?:\.(\d+))?", text)
    if m:
        return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    m = re.search(r"\bv?(\d+)\.x\b", text)             # "v1.x": the release series
    return (int(m.group(1)), 0, 0) if m else None


VLLM_V1_DEFAULT = (0, 8, 0)        # vllm/envs.py: VLLM_USE_V1 defaults to "1" from v0.8.0
VLLM_V0_REMOVED = (0, 11, 0)       # v0.11.0: vllm/engine/llm_engine.py is the V1 LLMEngine
SGLANG_OVERLAP_DEFAULT = (0, 3, 6)  # server_args.py: disable_overlap_schedule = False from v0.3.6
SGLANG_GRAPH_BY_TP = (0, 5, 3)     # PR #10372: graph limits by GPU memory and tp (launch_defaults)
SGLANG_MEM_BY_GPU = (0, 4, 8)      # chunk, graphs and mem_fraction_static follow the GPU memory
VLLM_ASYNC_OPT_IN = (0, 10, 0)     # --async-scheduling (PR #19970) first shipped in v0.10.0
VLLM_ASYNC_DEFAULT = (0, 14, 0)    # async scheduling on by default (PR #27614) from v0.14.0


def served_model(model, eng: EngineProfile):
    """The model as engine ``eng`` serves it: a TensorRT-LLM C++ engine (``full_window``
    profiles) attends the whole KV cache unless its launch sets ``max_attention_window``,
    so a checkpoint whose config puts a sliding window on *every* layer (Mistral 7B
    v0.1's 4096; Phi-3's 2047 by the same rule, not checked against a measurement) runs full
    attention there: ``KvCacheConfig.max_attention_window``
    defaults to None (``tensorrt_llm/llmapi/llm_args.py``: "Size of the attention window for
    each sequence. Only the last tokens will be stored in the KV cache"), i.e. the whole
    sequence, and TensorRT-LLM's own Mistral tests pass ``--max_attention_window_size=4096``
    to ``run.py`` to get the window (``tests/integration/defs/examples/test_mistral.py``).
    A launch that states one ``max_attention_window`` W for every layer
    (``attention_window``, :func:`dse.infer.launch_flags.stated_window`) gets it: the
    KV cache keeps the last W tokens of each sequence and every layer attends them
    (``KvCacheConfig.max_attention_window``, the same docstring), so a full-attention
    model served with W is costed as a W-token sliding window on all its layers, and
    Mistral 7B v0.1 with its own 4096 is the checkpoint again.
    Interleaved local / global layers (Gemma, gpt-oss), chunked and sparse attention are
    the checkpoint's own layer kinds and stay whatever the launch says (dse holds one
    window kind per model).  Measured out of sample: TensorRT-LLM v0.17's
    Mistral 7B (v0.1) runs at 20000/2000 match Llama 3.1 8B's (the same layer shapes) within
    1 %, as full attention does (tests/data/published_trtllm_v017.md)."""
    every = model.window_layers == 0 or model.window_layers >= model.num_layers
    own_kinds = (model.attention_chunk_size > 0 or model.index_topk > 0
                 or (model.sliding_window > 0 and not every))
    if own_kinds:
        return model
    if eng.attention_window > 0:
        return replace(model, sliding_window=int(eng.attention_window), window_layers=model.num_layers)
    if eng.full_window and model.sliding_window > 0:
        return replace(model, sliding_window=0, window_layers=0)
    return model


#: how an engine text may begin when it names TensorRT-LLM (besides containing "tensorrt-llm")
TRTLLM_NAMES = ("trtllm", "trt-llm", "trt_llm", "tensorrt_llm", "tensorrtllm")
#: the reason :func:`engine_profile` gives an engine text naming no known engine at all (as
#: opposed to a known engine whose release or backend has no profile)
UNKNOWN_ENGINE = "has no profile (known:"
LMDEPLOY_ASYNC = (0, 12, 0)        # TurboMind's Engine / ModelExecutor threads, async_ = 1, from v0.12.0
_TGI = re.compile(r"(?<![\w-])(?:tgi|text[-\s]generation[-\s]inference)(?![\w-])")
_LMDEPLOY = re.compile(r"(?<![\w-])(?:lmdeploy|turbomind)(?![\w-])")
#: ``max_batch_size`` of a default TurboMind launch (``lmdeploy/utils.py``
#: ``get_max_batch_size``: the first key found in the GPU's name, else 128): (first
#: release, table); 128 for every GPU before 0.6
LMDEPLOY_MAX_BATCH = (((0, 10, 0), (("a100", 384), ("a800", 384), ("h100", 1024), ("h800", 1024),
                                    ("h200", 1024))),
                      ((0, 6, 0), (("a100", 256), ("a800", 256), ("h100", 512), ("h800", 512))),
                      ((0, 0, 0), ()))


def lmdeploy_max_batch(hw_name: str, v: tuple | None) -> int:
    """TurboMind's default ``max_batch_size`` on ``hw_name`` at release ``v`` (None: today's;
    :data:`LMDEPLOY_MAX_BATCH`)."""
    v = v if v is not None else (99, 0, 0)
    table = next(tab for first, tab in LMDEPLOY_MAX_BATCH if v >= first)
    name = hw_name.lower()
    return next((n for key, n in table if key in name), 128)


#: the booleans of a launch's YAML settings as the engines read them: vLLM's ``--config`` file and
#: TensorRT-LLM's ``extra_llm_api_options`` both go through PyYAML's ``yaml.safe_load`` (YAML 1.1,
#: where yes / no / on / off are booleans too); ``=1`` / ``=0`` on command lines
YAML_TRUE, YAML_FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
#: those values as regexes (a quote allowed before), for the patterns that read a switch
YAML_TRUE_RE, YAML_FALSE_RE = (r"['\"]?(?:" + "|".join(vals) + r")\b" for vals in (YAML_TRUE, YAML_FALSE))
_ASYNC_OFF = re.compile(r"--no-async[-_]scheduling\b|async[-_]scheduling\s*[=:]\s*" + YAML_FALSE_RE)
_ASYNC_ON = re.compile(r"--async[-_]scheduling\b|async[-_]scheduling\s*[=:]\s*" + YAML_TRUE_RE)  # after _ASYNC_OFF


def yaml_bool(raw: str, name: str, where: str, field: str) -> bool:
    """The boolean a launch setting ``name``'s raw value ``raw`` stands for
    (:data:`YAML_TRUE` / :data:`YAML_FALSE`, quotes allowed); another value raises
    :class:`InputError` naming ``field``."""
    v = raw.strip("'\"").lower()
    if v not in YAML_TRUE + YAML_FALSE:
        raise InputError(where, field, f"{name} must be true or false (YAML also yes / no, on / off, "
                         f"1 / 0), but got {raw!r}")
    return v in YAML_TRUE


def bool_setting_values(texts: dict, key: str, where: str = "row") -> list[bool]:
    """Every value the launch texts ``texts`` (column -> text: a row's ``engine`` and ``notes``)
    give the boolean setting ``key`` (a regex of its name) as ``key: v`` or ``key=v`` closing its
    clause (end of text, ``;``, ``,``, a closing bracket or brace -- a YAML flow map -- or a line
    break after it: a setting as a config file or
    command line states it, not prose such as "enable_attention_dp: attention DP over 4 ranks"),
    in order: :data:`YAML_TRUE` / :data:`YAML_FALSE`, quotes allowed.  Another value, or none
    after the colon, raises :class:`InputError` naming the column -- never read as unstated."""
    form = re.compile(rf"(?<![-\w.])(?:--)?({key})[ \t]*[=:][ \t]*([^\s;,)}}\]]*)(?=[ \t]*(?:$|[;,)}}\]\n]))",
                      re.IGNORECASE | re.MULTILINE)
    return [yaml_bool(m.group(2), m.group(1), where, field)
            for field, t in texts.items() for m in form.finditer(t)]


_V1_ON = re.compile(r"vllm_use_v1\s*=\s*1\b")
_V1_OFF = re.compile(r"vllm_use_v1\s*=\s*0\b")


def vllm_runs_v1(t: str, v: tuple | None, multi_step: bool) -> bool:
    """Whether a vLLM engine text (lower case) runs the V1 engine: ``VLLM_USE_V1=1`` says
    so (opt-in since 0.7), ``VLLM_USE_V1=0`` or multi-step scheduling (a V0-only
    option) says V0; otherwise V1 from 0.8.0 on (the default), V0 before, and V1 with no
    version stated (today's vLLM: V0 is gone since 0.11)."""
    if _V1_ON.search(t):
        return True
    if _V1_OFF.search(t) or multi_step:
        return False
    return v is None or v >= VLLM_V1_DEFAULT


def vllm_async(t: str, v: tuple | None) -> bool:
    """Whether a V1 vLLM engine text (lower case) runs async scheduling (module
    docstring, ``vllm_v1_async``): ``--no-async-scheduling`` (or ``async_scheduling=false``)
    says no; ``--async-scheduling`` (or ``=true``) says yes, and is refused before v0.10.0,
    which has no such flag; otherwise yes from v0.14.0 (the default) or with no version
    stated (today's vLLM), no before."""
    if _ASYNC_OFF.search(t):
        return False
    if _ASYNC_ON.search(t):
        if v is not None and v < VLLM_ASYNC_OPT_IN:
            raise InputError("row", "engine", f"--async-scheduling first shipped in vLLM "
                             f"{'.'.join(map(str, VLLM_ASYNC_OPT_IN))}, but the engine text "
                             f"says version {'.'.join(map(str, v))}: {t!r}")
        return True
    return v is None or v >= VLLM_ASYNC_DEFAULT


TRTLLM_BUILD_MAX_BATCH, TRTLLM_BUILD_MAX_TOKENS = 2048, 8192   # BuildConfig defaults


def _trtllm_serve(t: str, scenario: str) -> bool:
    """Whether a TensorRT-LLM engine text (lower case) runs the server / LLM API defaults
    rather than ``trtllm-bench``'s tuned limits (:func:`launch_defaults`)."""
    if "trtllm-bench" in t or "trtllm_bench" in t:
        return False
    return ("trtllm-serve" in t or "llm api" in t or "llm-api" in t
            or scenario in ("concurrency", "poisson_rate"))


_OFFLINE_VLLM = re.compile(r"benchmark_(?:latency|throughput)|bench\s+(?:latency|throughput)|"
                           r"\bllm\s+class\b|\bllm\.generate\b|offline inference")
#: an engine driven from its client's own process (an MLPerf submission: LoadGen calls the
#: engine in the harness's process): no HTTP front end
_IN_PROCESS = re.compile(r"\b(?:mlperf|loadgen)\b")
GIB = float(2**30)


def launch_defaults(eng: EngineProfile, text: str, hbm_bytes: float, hw_name: str,
                    scenario: str, tp: int | None = None, pp: int = 1, model=None) -> EngineProfile:
    """The limits an engine launched with its defaults takes from the GPU it runs on and
    the way it is launched, where the profile has them (the launch flags a row states
    override these afterwards):

    * ``vllm_v1`` / ``vllm_v1_async`` (``vllm/engine/arg_utils.py`` ``_set_default_args_v1``, 0.8.5-0.11; the
      table moved to ``get_batch_defaults`` in 0.11.1 unchanged): on a GPU with >= 70 GiB
      that is not an A100, ``max_num_batched_tokens`` 16384 for the offline ``LLM`` class
      (``benchmark_latency`` / ``benchmark_throughput``) and 8192 for the OpenAI server,
      ``max_num_seqs`` 1024; otherwise 8192 / 2048 and 256.  The offline class is read from
      the engine text (a ``benchmark_latency`` / ``benchmark_throughput`` /
      ``LLM.generate`` run), else from a static-batch scenario (``fixed_batch``,
      ``latency``).  Those runs, and an MLPerf submission (the engine text names MLPerf
      or LoadGen: LoadGen drives the engine in the harness's process), have no HTTP front
      end (``frontend_s`` 0).
    * ``trtllm_pytorch`` outside ``trtllm-bench`` (``trtllm-serve`` or the LLM API; a
      ``concurrency`` / ``poisson_rate`` row naming neither): ``tensorrt_llm/commands/serve.py``
      ``get_llm_args`` passes ``BuildConfig``'s ``max_batch_size`` / ``max_num_tokens``
      defaults, 2048 and 8192, not the bench's tuned caps (4096 / 32768); and it sizes the
      KV pool after a dummy pass of those 8192 tokens (``_torch/pyexecutor/_util.py``
      ``KvCacheCreator._create_dummy_context_requests`` fills ``max_num_tokens``; KV =
      fraction x (total - that peak)): ``profile_at_budget``.  Under trtllm-bench the same
      pass runs the bench's tuned budget (``tuning.py``), which the profile does not carry,
      so those rows keep the one-prompt workspace.
    * ``sglang_overlap`` from 0.4.8 (``python/sglang/srt/server_args.py``
      ``__post_init__``): ``chunked_prefill_size`` 2048 below 35 GiB, 8192 below 160 GiB,
      16384 above; ``cuda_graph_max_bs`` 160, extended by the capture list to 256 above
      90 GiB and 512 above 160 GiB (``model_executor/cuda_graph_runner.py``).
    * ``sglang_overlap`` from 0.5.3 (PR #10372, "Restruct gpu_memory_settings in a unify
      function and relax max_cuda_graph_bs", merged 2025-09-12, "to align with vLLM";
      ``server_args.py`` ``_handle_gpu_memory_settings``), by GPU memory and ``tp``
      (``tp_size``): below 20 GiB 2048 tokens and graphs to 8; below 35 GiB 2048 and 24
      (tp < 4) / 80; below 60 GiB 4096 and 32 / 160; below 160 GiB (H100, H200) 8192 and
      256 / 512; above (B200, MI300X) 16384 and 512.  ``tp`` None (a sweep over layouts) takes the tp < 4 limits.
    * SGLang's ``mem_fraction_static`` (the share of GPU memory for weights + KV,
      ``static_fraction``; :func:`sglang_mem_fraction`): before 0.4.8 by the TP size, from
      0.4.8 what is left of the GPU after a reserve for activations and CUDA graphs (a
      tiered one to 0.5.2, 0.5.3's computed one after).  ``tp`` None keeps the profile's 0.88.
    * ``tgi`` / ``tgi_v3`` (with ``model`` given): the release's KV-pool fraction and the
      prefill budget the launcher computes for the model, card and TP size
      (:func:`dse.infer.tgi.tgi_launch`).
    * ``lmdeploy`` / ``lmdeploy_async``: ``max_batch_size`` by GPU name and release
      (:func:`lmdeploy_max_batch`)."""
    gib = float(hbm_bytes) / GIB
    t = engine_text(text)
    if eng.name in TGI_NAMES and model is not None:
        return tgi_launch(eng, model, hw_name, tp, version3(t))
    if eng.name in LMDEPLOY_NAMES:
        return replace(eng, max_batch=lmdeploy_max_batch(hw_name, version3(t)))
    if eng.name == "trtllm_pytorch" and _trtllm_serve(t, scenario):
        return replace(eng, max_batch=TRTLLM_BUILD_MAX_BATCH, max_num_tokens=TRTLLM_BUILD_MAX_TOKENS,
                       profile_at_budget=True)
    if eng.name in VLLM_V1_NAMES:
        big = gib >= 70.0 and "a100" not in hw_name.lower()
        offline = bool(_OFFLINE_VLLM.search(t)) or scenario in ("fixed_batch", "latency")
        tokens = (16384 if offline else 8192) if big else (8192 if offline else 2048)
        seqs = 1024 if big else 256
        harness = eng.max_batch > PROFILES["vllm_v1"].max_batch   # its uncapped max_num_seqs stays
        # no OpenAI server between the client and the engine: the offline class, or an MLPerf
        # LoadGen harness driving the engine in its own process
        in_process = offline or bool(_IN_PROCESS.search(t))
        return replace(eng, max_num_tokens=tokens, max_batch=eng.max_batch if harness else seqs,
                       frontend_s=0.0 if in_process else eng.frontend_s)
    if eng.name == "sglang_overlap":
        v = version3(t)
        if v is None or v >= SGLANG_GRAPH_BY_TP:
            wide = tp is not None and tp >= 4
            tokens, graph = ((2048, 8) if gib < 20.0 else
                             (2048, 80 if wide else 24) if gib < 35.0 else
                             (4096, 160 if wide else 32) if gib < 60.0 else
                             (8192, 512 if wide else 256) if gib < 160.0 else (16384, 512))
            eng = replace(eng, max_num_tokens=tokens, graph_max_batch=graph)
        elif v >= SGLANG_MEM_BY_GPU:
            tokens = 2048 if gib < 35.0 else 8192 if gib < 160.0 else 16384
            graph = 512 if gib > 160.0 else 256 if gib > 90.0 else 160
            eng = replace(eng, max_num_tokens=tokens, graph_max_batch=graph)
    if eng.name in ("sglang", "sglang_overlap") and tp is not None:
        eng = replace(eng, mem_fraction=sglang_mem_fraction(eng, version3(t), hbm_bytes, tp, pp))
    return eng


#: SGLang's default ``mem_fraction_static`` by TP size before 0.5.3
#: (``python/sglang/srt/server_args.py`` ``ServerArgs.__post_init__``: "Set mem fraction
#: static, which depends on the tensor parallelism size"): tp >= 16, 8, 4, 2, 1
SGLANG_FRACTION_BY_TP = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
#: SGLang 0.4.8-0.5.2's reserve for activations and CUDA graphs (``server_args.py``
#: ``__post_init__``, "Set mem fraction static"): (GPU memory below, GiB; base GiB; GiB per
#: GPU of tp x pp)
SGLANG_TIERED_RESERVE_GIB = ((35.0, 2.8, 0.1), (90.0, 9.5, 0.5), (160.0, 12.0, 0.5),
                             (float("inf"), 32.0, 0.0))


def sglang_mem_fraction(eng: EngineProfile, v: tuple | None, hbm_bytes: float, tp: int, pp: int = 1) -> float:
    """SGLang's default ``mem_fraction_static``: the share of GPU memory for weights + KV
    (``model_runner.profile_max_num_token``: KV = memory free after the weights - total x
    (1 - fraction); activations and CUDA graphs live in the rest, ``static_fraction``).

    * Before 0.4.8 by the TP size (:data:`SGLANG_FRACTION_BY_TP`).
    * From 0.4.8 to 0.5.2 (the ``__post_init__`` that also sets the chunk by GPU memory,
      :func:`launch_defaults`): ``round((M - reserve) / M, 3)`` with a tiered reserve in GiB
      of ``2.8 + tp pp / 10`` below 35 GiB, ``9.5 + tp pp / 2`` below 90 GiB (H100),
      ``12 + tp pp / 2`` below 160 GiB (H200), 32 above (B200, MI300X); ``M`` the GPU
      memory (:data:`SGLANG_TIERED_RESERVE_GIB`).
    * From 0.5.3 (or no release stated: today's SGLang), ``server_args.py``
      ``_handle_gpu_memory_settings``: a reserve in MiB of ``512 + 1.5 max(chunk, 2048) + 2
      graph_bs + 1024 tp pp / 8``, at least 10 GiB on a GPU above 60 GiB, so ``fraction =
      round((M - reserve) / M, 3)`` with ``M`` the GPU memory in MiB and ``chunk`` /
      ``graph_bs`` the launch limits (:func:`launch_defaults`).  The attention-DP terms
      (``3 graph_bs dp`` more) are not carried: the profile does not see ``dp``.
    """
    mib = float(hbm_bytes) / 2**20
    if v is not None and v < SGLANG_MEM_BY_GPU:
        return next(f for n, f in SGLANG_FRACTION_BY_TP if tp >= n)
    if v is not None and v < SGLANG_GRAPH_BY_TP:
        gib, par = mib / 1024.0, tp * pp
        base, per = next((b, k) for top, b, k in SGLANG_TIERED_RESERVE_GIB if gib < top)
        return round((mib - (base + per * par) * 1024.0) / mib, 3)
    reserve = (512.0 + 1.5 * max(eng.max_num_tokens, 2048) + 2.0 * eng.graph_max_batch
               + 1024.0 * tp * pp / 8.0)
    if mib > 60 * 1024:
        reserve = max(reserve, 10 * 1024.0)
    return round((mib - reserve) / mib, 3)


#: vLLM releases whose V0 engine turns chunked prefill off for MLA models: PR #12642
#: (merged 2025-02-01, shipped in v0.7.1; ``vllm/config.py`` ``VllmConfig.__post_init__``:
#: "MLA is enabled; forcing chunked prefill and prefix caching to be disabled") up to the
#: V1 default of 0.8.0 (V1 always chunks)
VLLM_MLA_UNCHUNKED = ((0, 7, 1), VLLM_V1_DEFAULT)
#: V0 ``SchedulerConfig``: without chunked prefill ``max_num_batched_tokens =
#: max(max_model_len, _DEFAULT_MAX_NUM_BATCHED_TOKENS)``, the latter 2048 (``vllm/config.py``;
#: also :func:`dse.infer.lockstep.pass_tokens`)
VLLM_V0_MIN_BATCHED_TOKENS = 2048


def vllm_v0_mla(eng: EngineProfile, text: str, model, max_model_len: float | None = None) -> EngineProfile:
    """vLLM's V0 engine serving an MLA model (DeepSeek-V2/V3/R1) in the releases that force
    chunked prefill off for it (:data:`VLLM_MLA_UNCHUNKED`), two facts of those releases.

    **Materialized decode weights** (``mla_absorbed_weights``): PR #12528 (MLA decode,
    merged 2025-01-28, in 0.7.1; ``vllm/attention/backends/mla/utils.py``
    ``process_weights_after_loading`` under ``VLLM_MLA_PERFORM_MATRIX_ABSORPTION``, on by
    default) keeps the raw projections for prefill and adds the absorbed ``W_Q_UK`` and
    ``W_UV_O`` for decode (requantized to fp8 for fp8 checkpoints), until PR #14770 ("MLA
    get rid of materialization", merged 2025-03-13, in 0.8.0) -- the same window
    (:func:`dse.infer.memory.absorbed_mla_bytes`).

    **The token budget**: with
    chunking off, V0's ``SchedulerConfig`` makes ``max_num_batched_tokens = max(max_model_len,
    2048)``, and ``max_model_len`` defaults to the checkpoint's ``max_position_embeddings``
    (:func:`dse.spec.model.max_context_of`; 163840 for DeepSeek-V3 / R1) unless the launch
    states ``--max-model-len``.  That budget is both what one prompt pass may pack and what
    the memory-profiling forward runs (``profile_at_budget``), so the KV pool is what is
    left after a ``max_model_len``-token pass.  Other engines, releases and models: ``eng``
    unchanged.  ``text``: the engine text (its release)."""
    if eng.name not in ("vllm", "vllm_mlperf") or not is_mla(model):
        return eng
    v = version3(engine_text(text))
    if v is None or not (VLLM_MLA_UNCHUNKED[0] <= v < VLLM_MLA_UNCHUNKED[1]):
        return eng
    ctx = max_model_len if max_model_len is not None else max_context_of(model)
    return replace(eng, max_num_tokens=int(max(ctx, VLLM_V0_MIN_BATCHED_TOKENS)), chunked_prefill=False,
                   mla_absorbed_weights=True)


FLAG_MAX = 2**31 - 1      # engine limits are int32 in the engines and in the sweep arrays


def flag_values(text: str, flag: str, where: str, field: str, dashes: str = "--",
                value: str = r"\S*", yaml: bool = False) -> list[int]:
    """Every value of the launch flag ``flag`` (a regex of its name, after ``dashes``, a
    regex: ``(?:--)?`` where the leading ``--`` is optional) in ``text``: ``--flag N`` or
    ``--flag=N``, N a positive integer <= FLAG_MAX
    (trailing sentence punctuation allowed: "... --max_num_tokens 16384.").  A flag with a
    missing, negative, fractional, exponent or non-numeric value raises
    :class:`InputError` rather than being read as its leading digits or skipped.  ``value``
    (a regex) narrows what counts as the flag's value: a client flag quoted in prose
    ("--num-prompts is 3200") is then no flag at all.  ``yaml``: also the key form of a launch
    config file, ``flag: N`` (vLLM ``--config config.yaml``, whose keys are the flags' long
    names), not part of a dotted key (``cuda_graph_config.max_batch_size: 128`` is another
    setting)."""
    out = []
    forms = [rf"(?<![-\w]){dashes}({flag})(?![-_\w])(?:=|[ \t]+)?({value})"]
    if yaml:
        forms.append(rf"(?<![-.\w])({flag})(?![-_\w])[ \t]*:[ \t]*({value})")
    for m in (m for form in forms for m in re.finditer(form, text, re.IGNORECASE)):
        raw = m.group(2).rstrip(".,;:)]")
        if not (raw.isdigit() and 0 < int(raw) <= FLAG_MAX):
            got = repr(raw or m.group(2)) if m.group(2) else "no value"
            raise InputError(where, field, f"--{m.group(1)} must be a positive integer <= "
                             f"{FLAG_MAX}, but got {got}")
        out.append(int(raw))
    return out


def flag_value(texts: dict, flag: str, where: str, dashes: str = "--", value: str = r"\S*",
               yaml: bool = False) -> int | None:
    """The one value of the launch flag ``flag`` that ``texts`` (field -> text: a row's
    ``engine`` and ``notes``) state, or None: each value checked as :func:`flag_values`
    checks it (the error naming its field); values that disagree -- one launch command
    states a limit once -- raise :class:`InputError` naming the first field stating it and
    the flags as written."""
    vals = {f: flag_values(t, flag, where, f, dashes=dashes, value=value, yaml=yaml) for f, t in texts.items()}
    seen = sorted({v for vs in vals.values() for v in vs})
    if len(seen) > 1:
        field = next(f for f, vs in vals.items() if vs)
        names = sorted({m.group(1) for t in texts.values()
                        for m in re.finditer(rf"(?<![-\w]){dashes}({flag})(?![-_\w])", t, re.IGNORECASE)})
        raise InputError(where, field, f"{' / '.join('--' + n for n in names)} must be stated once "
                         f"(one launch command), but got {seen}")
    return seen[0] if seen else None


#: serving products that run one of the modelled engines underneath: NVIDIA NIM for LLMs,
#: NVIDIA Dynamo, Triton Inference Server, llm-d, Ray Serve LLM, KServe, AIBrix
_WRAPPER = re.compile(r"^(?:nvidia\s+)?(nim|dynamo|triton(?:\s*inference\s*server|server)?|llm-d|"
                      r"ray\s*serve(?:\s*llm)?|kserve|aibrix)\b")
_BACKEND = re.compile(r"(?<!\w)(trtllm|tensorrt-llm|vllm|sglang|tgi|text-generation-inference|lmdeploy|"
                      r"turbomind)(?!\w)")
_BACKEND_RELEASE = re.compile(r"\s*[(:-]?\s*(?:v|==\s*)?(\d+\.\d+(?:\.\d+)?(?:\.?(?:post|dev|rc)\d+)?)")
_ANY_RELEASE = re.compile(r"\bv?\d+\.(?:\d+|x)(?:\.\d+)*(?:\.?(?:post|dev|rc)\d+)?\b")


def backend_text(t: str) -> str | None:
    """The engine a serving product's text names, as an engine text of its own
    (``"dynamo 0.4.1 (vllm 0.10.1 backend, --no-async-scheduling)"`` -> ``"vllm 0.10.1
    backend, --no-async-scheduling)"``), or None when ``t`` (lower case) is not such a
    product.  The product's own release is dropped -- Dynamo 0.4 is not vLLM 0.4 -- and so
    is every other version in the text but the one written right after the backend's name,
    which is the backend's release; without one the backend's routing takes today's release.
    Triton's TensorRT-LLM backend is the C++ executor whatever version stands beside it.
    NIM naming no backend runs TensorRT-LLM (NIM for LLMs docs, "Model Profiles": an
    optimized TensorRT-LLM profile where one exists for the GPU, vLLM otherwise): ``"trtllm"``.
    Another product naming none: ``""`` (no profile)."""
    w = _WRAPPER.match(t)
    if not w:
        return None
    rest = t[w.end():].replace("tensorrt llm", "tensorrt-llm")
    b = _BACKEND.search(rest)
    if not b:
        return "trtllm" if w.group(1) == "nim" else ""
    if w.group(1).startswith("triton") and b.group(1) in ("trtllm", "tensorrt-llm"):
        # Triton's TensorRT-LLM backend (tensorrtllm_backend) drives the C++ executor,
        # whatever the version beside it (often the container's, "24.08")
        return "trtllm (c++ executor)" + _ANY_RELEASE.sub(" ", rest[b.end():])
    rel = _BACKEND_RELEASE.match(rest, b.end())
    tail = _ANY_RELEASE.sub(" ", rest[rel.end() if rel else b.end():])
    return f"{b.group(1)}{' ' + rel.group(1) if rel else ''}{tail}"


def engine_text(text: str) -> str:
    """The engine's own text, lower case: a serving product's backend
    (:func:`backend_text`, its release and flags), else ``text`` itself -- what every
    release-dependent rule reads, so that Dynamo's or Ray's version is never taken for the
    engine's."""
    t = str(text).strip().lower()
    inner = backend_text(t)
    return t if inner is None else inner


def engine_profile(text: str) -> tuple[EngineProfile, str]:
    """The profile an ``engine`` text names (``"trtllm (v0.13.0, trtllm-bench)"``,
    ``"vllm (v0.6.0, --num-scheduler-steps 10)"``, ``"nemo (..., TensorRT-LLM backend)"``),
    and "" -- or the reason it cannot be expressed.  A serving product over one of these
    engines (NIM, Dynamo, Triton Inference Server, llm-d, Ray Serve, KServe, AIBrix) is
    routed as the backend it names (:func:`backend_text`)."""
    t = str(text).strip().lower()
    inner = backend_text(t)
    if inner is not None:
        if not inner:
            return PROFILES["trtllm"], (f"engine {text!r} does not name the engine it runs "
                                        "(trtllm, vllm or sglang)")
        return engine_profile(inner)
    steps = flag_values(t, r"num[-_]scheduler[-_]steps", "row", "engine", dashes="(?:--)?")
    if t.startswith("nemo"):
        return PROFILES["nemo"], ""
    if t.startswith(TRTLLM_NAMES) or "tensorrt-llm" in t:
        if "gptsessionbenchmark" in t or "static" in t:
            return PROFILES["trtllm_static"], ""
        if "harness" in t:
            return PROFILES["trtllm_mlperf"], ""
        v = _version(t)
        if "pytorch" in t and v is not None and v < (1, 0):
            return PROFILES["trtllm_pytorch_eager"], ""
        cpp = "c++" in t or "tensorrt backend" in t or "trt backend" in t
        if "pytorch" in t or (v is not None and v >= (1, 0) and not cpp):
            return PROFILES["trtllm_pytorch"], ""
        return PROFILES["trtllm"], ""
    if t.startswith("vllm"):
        if len(set(steps)) > 1:
            raise InputError("row", "engine", f"--num-scheduler-steps must be stated once, but "
                             f"got {steps}")
        v = version3(t)
        if steps and v is not None and v >= VLLM_V0_REMOVED:
            raise InputError("row", "engine", f"--num-scheduler-steps is a V0-engine option and "
                             f"vLLM >= 0.11 has only the V1 engine, but got {text!r}")
        if steps and _V1_ON.search(t):
            raise InputError("row", "engine", f"--num-scheduler-steps is a V0-engine option, so "
                             f"it cannot run with VLLM_USE_V1=1, but got {text!r}")
        if vllm_runs_v1(t, v, bool(steps)):
            p = PROFILES["vllm_v1_async" if vllm_async(t, v) else "vllm_v1"]
            if "harness" in t:                 # the submitter sets max_num_seqs (as vllm_mlperf)
                p = replace(p, max_batch=PROFILES["vllm_mlperf"].max_batch)
            return p, ""
        p = PROFILES["vllm_mlperf" if "harness" in t else "vllm"]
        if steps:
            p = EngineProfile(**{**p.__dict__, "scheduler_steps": steps[0]})
        return p, ""
    if t.startswith("sglang"):
        v = version3(t)
        return PROFILES["sglang" if v is not None and v < SGLANG_OVERLAP_DEFAULT else
                        "sglang_overlap"], ""
    if _TGI.search(t):
        v = version3(t)
        if v is not None and v < TGI_V2:
            return PROFILES["trtllm"], (f"engine {text!r} is text-generation-inference before 2.0, "
                                        "which has no profile (the tgi profiles read 2.0-3.3)")
        return PROFILES["tgi" if v is not None and v < TGI_V3 else "tgi_v3"], ""
    if _LMDEPLOY.search(t):
        if "pytorch" in t:
            return PROFILES["trtllm"], (f"engine {text!r} is LMDeploy's PyTorch engine, which has "
                                        "no profile (TurboMind, its default backend, has: 'lmdeploy')")
        v = version3(t)
        return PROFILES["lmdeploy" if v is not None and v < LMDEPLOY_ASYNC else "lmdeploy_async"], ""
    if t == "" or t == "nan":
        return PROFILES["trtllm"], ""
    return PROFILES["trtllm"], (f"engine {text!r} {UNKNOWN_ENGINE} trtllm, vllm, sglang, "
                                "tgi, lmdeploy (TurboMind), nemo with the TensorRT-LLM "
                                "backend)")
