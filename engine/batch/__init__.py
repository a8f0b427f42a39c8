"""Batch runs: a designed network over a whole dataset (folders, patterns or lists of images, videos and
NPY tensors), resumable through a manifest in the output folder, on one machine (``local``: a pipeline of
threads, or worker processes) or on a Ray cluster (``ray``; Ray is imported only by that engine).

    summary = run_batch(NetworkSpec(model_text), BatchOptions(("photos/",), "out/"), engine="local")
"""
from __future__ import annotations

import threading
from typing import Any

from engine.batch.job import BatchJob, BatchOptions, ItemEvent, Progress, ProgressCallback, SettingsChangedError
from engine.batch.runner import NetworkSpec, open_network_for

ENGINES = ("local", "ray")

__all__ = ["ENGINES", "BatchJob", "BatchOptions", "ItemEvent", "NetworkSpec", "Progress", "SettingsChangedError",
           "open_network_for", "run_batch", "run_job"]


def run_job(job: BatchJob, engine: str = "local", progress: ProgressCallback | None = None,
            cancel: threading.Event | None = None, **ray_options: Any) -> dict[str, Any]:
    """Run a planned job on ``engine`` and write its summary; returns the summary. ``ray_options``:
    ``address``, ``num_cpus``, ``actors`` (see :func:`engine.batch.ray_engine.run_ray`)."""
    from engine.errors import InputError

    if engine not in ENGINES:
        raise InputError(f"unknown batch engine {engine!r} (expected {' or '.join(ENGINES)})")
    job.assemble_ready()
    if progress is not None:
        progress(job.progress())
    try:
        if engine == "ray":
            from engine.batch.ray_engine import run_ray

            run_ray(job, progress, cancel, **ray_options)
        else:
            from engine.batch.local import run_local

            run_local(job, progress, cancel)
    finally:
        summary, _path = job.write_summary(engine)
    return summary


def run_batch(spec: NetworkSpec, options: BatchOptions, engine: str = "local", progress: ProgressCallback | None = None,
              cancel: threading.Event | None = None, **ray_options: Any) -> dict[str, Any]:
    """Plan and run a batch; returns the JSON summary (also written as ``OUTPUT/layerlab-summary.json``)."""
    return run_job(BatchJob(spec, options), engine, progress, cancel, **ray_options)
