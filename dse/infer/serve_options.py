"""The options of a serving sweep (``dse infer`` and ``dse.serve``), checked once for both.

* precision: the serving precisions ``dse predict`` accepts on a serving row (bf16, fp16,
  fp8, fp4 = nvfp4, nvfp4, mxfp4; :mod:`dse.infer.predict_rows`): fp32 / tf32 are training
  precisions -- the serving engines modelled (TensorRT-LLM, vLLM, SGLang) run 16-bit or
  lower-precision checkpoints -- so they are rejected here as they are there;
* batching: ``continuous`` (default, as the engines run) or ``static``;
* engine: a profile of :mod:`dse.infer.continuous` that runs on every hardware given; it
  only applies to continuous batching, so ``engine`` with ``batching="static"`` is an error
  (not silently ignored).
"""

from __future__ import annotations

from dse.errors import require

BATCHING = ("continuous", "static")
TRAINING_ONLY = ("fp32", "tf32")


def serving_options(precision: str, batching: str, engine, hws, where: str,
                    flags: dict | None = None) -> int:
    """The precision code, after checking ``precision``, ``batching`` and ``engine`` against
    the rules above and the hardware (:func:`dse.spec.hardware.check_precision`).
    ``flags``: how ``where`` names each option (CLI ``--precision``; API ``precision``)."""
    from dse.spec.hardware import check_precision
    from dse.spec.layout import serving_precision_code
    f = {"precision": "precision", "batching": "batching", "engine": "engine", **(flags or {})}
    require(isinstance(precision, str), where, f["precision"], f"must be a string, but got {precision!r}")
    require(precision.strip().lower() not in TRAINING_ONLY, where, f["precision"],
            "must be bf16, fp16, fp8, fp4, nvfp4 or mxfp4 for serving (fp32 / tf32 are training "
            f"precisions; dse predict rejects them on serving rows too), but got {precision!r}")
    at = where if flags is None else f["precision"]     # the CLI's messages start with the flag
    prec = serving_precision_code(precision, at)
    for hw in hws:
        check_precision(hw, prec, at)
    require(batching in BATCHING, where, f["batching"],
            f"must be one of {list(BATCHING)}, but got {batching!r}")
    if engine is not None:
        require(batching == "continuous", where, f["engine"],
                f"applies to continuous batching only, but got batching {batching!r} with engine "
                f"{engine!r}: drop one of them")
        from dse.infer.continuous import checked_engine
        for hw in hws:
            checked_engine(engine, hw, where, f["engine"])
    return prec
