"""The Ray batch engine (the only module that imports Ray; install the ``cluster`` extra).

Ray Data streams the run's chunks through three stages: decoding on CPU workers (tasks), inference in an
actor pool (each actor holds one network: one per GPU with the CuPy backend, one per CPU worker with
NumPy), and writers that encode the outputs into the output folder. This process collects the finished
chunks (manifest, video assembly, progress), exactly as the local engine does, so the outputs are the
same bytes. On a cluster the input and output folders must be on storage every node sees at the same
path (a shared file system)."""
from __future__ import annotations

import dataclasses
import logging
import pickle
import threading
from typing import Any

from engine.batch.job import BatchJob, ProgressCallback
from engine.batch.runner import NetworkSpec, open_network_for
from engine.batch.stages import Plan, Work, decode, infer, write
from engine.errors import LayerLabError


def _ray() -> Any:
    try:
        import ray  # noqa: PLC0415 - only this engine needs Ray
        import ray.data  # noqa: F401, PLC0415
    except ImportError as exc:
        raise LayerLabError("the ray engine needs Ray: pip install 'layerlab[cluster]' (or ray[data])") from exc
    return ray


def _decode_row(row: dict[str, Any], plan: Plan) -> dict[str, Any]:
    work = decode(Work(pickle.loads(row["chunk"])), plan)
    return {"work": pickle.dumps(work, protocol=5)}


def _check_network(spec: NetworkSpec) -> str:
    """Open the network once where the actors will run: '' when it opens, else the user error's message."""
    try:
        open_network_for(spec, notice=None)
    except LayerLabError as exc:
        return str(exc)
    return ""


class _InferActor:
    """One network per actor, opened once and reused for every chunk it is given."""

    def __init__(self, spec: NetworkSpec, plan: Plan) -> None:
        self.net = open_network_for(spec, notice=None)
        self.plan = plan

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        work = infer(pickle.loads(row["work"]), self.net, self.plan)
        return {"work": pickle.dumps(work, protocol=5)}


def _write_row(row: dict[str, Any], plan: Plan) -> dict[str, Any]:
    return {"work": pickle.dumps(write(pickle.loads(row["work"]), plan), protocol=5)}


#: CPUs a decoding or writing task asks Ray for
TASK_CPUS = 0.5


def actor_cpus(cluster_cpus: float, pool: int) -> float:
    """CPUs each of ``pool`` inference actors asks for on a cluster of ``cluster_cpus`` CPUs: one, or less where
    ``pool`` whole CPUs would leave no room for a decoding or writing task. Actors hold their CPUs for the whole
    run, so a pool taking every CPU (``--workers 2`` on a 2-CPU machine) left the tasks that feed and drain it
    waiting forever: the run hung."""
    return min(1.0, max(cluster_cpus - TASK_CPUS, TASK_CPUS) / pool)


def run_ray(job: BatchJob, progress: ProgressCallback | None = None, cancel: threading.Event | None = None,
            address: str | None = None, num_cpus: int | None = None, actors: int | None = None) -> None:
    """Run ``job`` on Ray: attach to the cluster at ``address`` ('auto' or 'HOST:PORT'), or start a local
    Ray instance (``num_cpus`` CPUs) for this run and stop it afterwards. ``actors`` is the size of the
    inference actor pool (default: the cluster's GPUs with CuPy, else ``--workers``)."""
    ray = _ray()
    if not job.todo:
        return
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING}
        if address:
            kwargs["address"] = address
        elif num_cpus:
            kwargs["num_cpus"] = num_cpus
        try:
            ray.init(**kwargs)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            where = f"attach to the Ray cluster at {address}" if address else "start Ray"
            raise LayerLabError(f"cannot {where}: {exc}") from None
        started = True
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False  # LayerLab shows its own progress
        ctx.execution_options.preserve_order = False
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        # its note that its progress bars are off, at every run: LayerLab's own progress lines replace them
        logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)
        cluster = ray.cluster_resources()
        gpus = int(cluster.get("GPU", 0))
        use_gpu = job.spec.backend == "cupy" or (job.spec.backend == "auto" and gpus > 0)
        pool = actors or (max(1, gpus) if use_gpu else job.options.workers)
        resources = {"num_gpus": 1 if use_gpu else 0,
                     "num_cpus": 0 if use_gpu else actor_cpus(float(cluster.get("CPU", 1)), pool)}
        problem = ray.get(ray.remote(**resources)(_check_network).remote(job.spec))
        if problem:  # a bad network is the command's error, not a failure of every input
            raise LayerLabError(problem)
        plan = dataclasses.replace(job.plan, device_images=use_gpu)
        rows = [{"chunk": pickle.dumps(c, protocol=5)} for c in job.todo]
        ds = ray.data.from_items(rows, override_num_blocks=len(rows))
        # decoding asks for half a CPU, the actors for more (or a GPU): different resources keep Ray Data from
        # fusing decoding into the actors, so decoding runs in CPU tasks beside them (on a one-CPU cluster with one
        # actor both ask for half a CPU and Ray Data may fuse them: slower, not wrong)
        ds = ds.map(_decode_row, fn_kwargs={"plan": plan}, num_cpus=TASK_CPUS)
        ds = ds.map(_InferActor, fn_constructor_kwargs={"spec": job.spec, "plan": plan},
                    compute=ray.data.ActorPoolStrategy(size=pool), **resources)
        ds = ds.map(_write_row, fn_kwargs={"plan": plan}, num_cpus=TASK_CPUS)
        for row in ds.iter_rows():
            job.handle(pickle.loads(row["work"]))
            if progress is not None:
                progress(job.progress())
            if cancel is not None and cancel.is_set():
                job.cancelled = True
                break
    finally:
        if started:
            ray.shutdown()
