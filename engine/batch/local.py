"""The local batch engine: a pipeline in which reading, inference and writing overlap. A feeder thread hands
each chunk's reads to a thread pool (one task per image: decoding and encoding release the GIL, so they scale
with the cores); one lane per network (a thread with its own network, or a worker process with its own network
for ``--workers N``) groups a chunk's decoded inputs, runs them and hands each input's writing to the same pool;
this thread collects the finished chunks (manifest, videos, progress). At most a bounded number of chunks is in
flight (memory stays bounded). Cancelling stops feeding new chunks; chunks in flight are finished and recorded,
so nothing half-done is left."""
from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

from engine.batch.job import BatchJob, ProgressCallback
from engine.batch.runner import NetworkSpec, open_network_for
from engine.batch.stages import Plan, Work, collect, group, infer, reads, writes

_STOP = object()
_WORKER_NET: Any = None  # the network of a worker process (one per process)


def _pin_gpu(device: str | None) -> None:
    """Worker process initializer: make one GPU the only visible one, before CUDA is initialised there."""
    if device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = device


def _worker_open(spec: NetworkSpec) -> str:
    global _WORKER_NET
    if _WORKER_NET is None:
        _WORKER_NET = open_network_for(spec, notice=None)
    return _WORKER_NET.backend.name


def _worker_infer(spec: NetworkSpec, work: Work, plan: Plan) -> Work:
    _worker_open(spec)
    return infer(work, _WORKER_NET, plan)


class _ThreadLane:
    """A network in this process, run by one pipeline thread (NumPy with one worker, or one GPU)."""

    def __init__(self, spec: NetworkSpec, graph_capture: bool = True) -> None:
        self.net = open_network_for(spec, graph_capture=graph_capture)

    def infer(self, work: Work, plan: Plan) -> Work:
        return infer(work, self.net, plan)

    def close(self) -> None:
        self.net = None


class _ProcessLane:
    """A network in a worker process of its own (``--workers N``), on the CPU or pinned to one GPU."""

    def __init__(self, spec: NetworkSpec, gpu: str | None = None) -> None:
        self.spec = spec
        self.pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=_pin_gpu,
                                        initargs=(gpu,))
        self.pool.submit(_worker_open, spec).result()  # a bad network fails here, before anything runs

    def infer(self, work: Work, plan: Plan) -> Work:
        return self.pool.submit(_worker_infer, self.spec, work, plan).result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


GPU_LANES = 2  # networks per GPU in this process: one's copies and host work overlap the other's kernels


def _on_gpu(job: BatchJob) -> bool:
    from engine.backends import get_backend

    return get_backend(job.spec.backend, notice=None).device_kind == "gpu"


def _lanes(job: BatchJob) -> list[Any]:
    """The inference lanes: NumPy: one network in this process, or ``--workers N`` worker processes. CuPy:
    ``GPU_LANES`` networks on the current GPU, each on its own CUDA stream (eager: no CUDA-graph capture while
    another thread uses the GPU), or with ``--workers N`` one worker process per GPU (GPU i of
    CUDA_VISIBLE_DEVICES, or of all GPUs), each holding one network."""
    from engine.backends import get_backend

    backend = get_backend(job.spec.backend, notice=None).name
    if job.options.workers == 1:
        n = GPU_LANES if backend == "cupy" else 1
        return [_ThreadLane(job.spec, graph_capture=n == 1) for _ in range(n)]
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    lanes: list[Any] = []
    try:
        for i in range(job.options.workers):
            gpu = (visible[i] if i < len(visible) else str(i)) if backend == "cupy" else None
            lanes.append(_ProcessLane(job.spec, gpu))
    except BaseException:
        for lane in lanes:
            lane.close()
        raise
    return lanes


#: threads of the reading and writing pool per CPU: its tasks are CPU-bound (decoding, encoding, hashing), but a
#: thread waiting on the disk (the sync of each output) leaves its core to another
POOL_PER_CPU = 2
#: inputs in flight per pool thread: enough that every thread finds work while the lanes run a batch
IN_FLIGHT_PER_THREAD = 2
#: ceiling of the inputs in flight on machines with many cores (memory: 128 decoded 1080p images and their 8-bit
#: outputs are about 1.6 GB)
MAX_IN_FLIGHT_INPUTS = 128


def pool_threads() -> int:
    """The CPUs this process may run on (its affinity, e.g. a container's share; at least 2) times
    ``POOL_PER_CPU``: the size of the reading and writing pool."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 2
    return POOL_PER_CPU * max(2, n)


@contextlib.contextmanager
def opencv_threads(n: int) -> Iterator[None]:
    """OpenCV's own worker threads limited to ``n`` while the pool runs (restored afterwards): the pool already
    runs one decoding or encoding per thread, and OpenCV splitting each colour conversion over every core as well
    only made the threads wait on each other (GPU machine, 16 CPUs, 32 pool threads, 1080p JPEG frames: 371
    decoded and 676 encoded per second with OpenCV's 16 threads, 517 and 828 with one)."""
    try:
        import cv2  # noqa: PLC0415 - OpenCV is optional until images are read
    except ImportError:
        yield
        return
    old = cv2.getNumThreads()
    cv2.setNumThreads(n)
    try:
        yield
    finally:
        cv2.setNumThreads(old)


def run_local(job: BatchJob, progress: ProgressCallback | None = None,
              cancel: threading.Event | None = None) -> None:
    """Run ``job``'s chunks through the local pipeline (see the module documentation)."""
    with opencv_threads(1):
        _run_local(job, progress, cancel)


def _run_local(job: BatchJob, progress: ProgressCallback | None, cancel: threading.Event | None) -> None:
    cancel = cancel or threading.Event()
    abort = threading.Event()  # a stage hit a bug: stop feeding, drain, re-raise
    errors: list[BaseException] = []
    interrupted: list[BaseException] = []
    lanes = _lanes(job)
    plan = dataclasses.replace(job.plan, device_images=_on_gpu(job))
    threads = pool_threads()
    pool = ThreadPoolExecutor(threads, thread_name_prefix="layerlab-io")  # every read and write task
    inputs = min(IN_FLIGHT_PER_THREAD * threads, MAX_IN_FLIGHT_INPUTS)
    depth = max(2 * len(lanes) + 2, -(-inputs // job.options.batch_size))  # chunks in flight
    decoded: queue.Queue[Any] = queue.Queue(maxsize=depth)  # (work, futures of its reads), in order
    written: queue.Queue[Any] = queue.Queue()  # (work, futures of its writes)
    in_flight = threading.BoundedSemaphore(depth)  # chunks between reading and the collector

    def stopped() -> bool:
        return cancel.is_set() or abort.is_set()

    def put(q: queue.Queue[Any], item: Any) -> None:
        while True:
            try:
                q.put(item, timeout=0.1)
                return
            except queue.Full:
                if abort.is_set() and item is not _STOP:
                    return

    def take_slot() -> bool:
        while not in_flight.acquire(timeout=0.1):
            if stopped():
                return False
        if stopped():
            in_flight.release()
            return False
        return True

    def feed() -> None:
        try:
            for chunk in job.todo:
                if not take_slot():
                    break
                put(decoded, (Work(chunk), [pool.submit(task) for task in reads(chunk, plan)]))
        finally:  # the lanes stop after the last chunk, whatever happened here
            for _ in lanes:
                put(decoded, _STOP)

    def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            try:
                return fn(*args)
            except BaseException as exc:
                errors.append(exc)
                abort.set()
        return run

    def step(lane: Any, work: Work, reading: list[Future[Any]]) -> tuple[Work, list[Future[Any]]]:
        work = lane.infer(group(work, [f.result() for f in reading], plan), plan)
        return work, [pool.submit(task) for task in writes(work, plan)]

    def lane_loop(lane: Any) -> None:
        while (entry := decoded.get()) is not _STOP:
            done = None if abort.is_set() else guarded(step)(lane, *entry)
            if done is None:
                in_flight.release()
            else:
                written.put(done)

    def results(futures: list[Future[Any]]) -> tuple[list[Any], Exception | None]:
        """What the tasks gave, and the first error of a task that failed (a bug): the others are still taken,
        so every output written is recorded."""
        out, error = [], None
        for f in futures:
            while True:
                try:
                    out.append(f.result())
                except KeyboardInterrupt as exc:  # Ctrl-C: finish and record what is in flight, then stop
                    interrupted.append(exc)
                    cancel.set()
                    continue
                except Exception as exc:
                    error = error or exc
                break
        return out, error

    feeder = threading.Thread(target=guarded(feed), name="layerlab-feed", daemon=True)
    workers = [threading.Thread(target=lane_loop, args=(lane,), name=f"layerlab-lane-{i}", daemon=True)
               for i, lane in enumerate(lanes)]

    def close_when_done() -> None:
        feeder.join()
        for w in workers:
            w.join()
        written.put(_STOP)

    closer = threading.Thread(target=close_when_done, name="layerlab-close", daemon=True)
    try:
        feeder.start()
        for w in workers:
            w.start()
        closer.start()
        while True:  # the collector: leaves only when every stage has stopped
            try:
                entry = written.get(timeout=0.2)
                if entry is _STOP:
                    break
                try:
                    work, writing = entry
                    done, error = results(writing)
                    job.handle(collect(work, done))
                    if error is not None:
                        raise error
                except Exception as exc:
                    errors.append(exc)
                    abort.set()
                finally:
                    in_flight.release()
                if progress is not None and not abort.is_set():
                    progress(job.progress())
            except queue.Empty:
                continue
            except KeyboardInterrupt as exc:  # Ctrl-C: finish and record what is in flight, then stop
                interrupted.append(exc)
                cancel.set()
            except Exception as exc:  # the progress callback failed: stop as for a bug in a stage
                errors.append(exc)
                abort.set()
    finally:
        if closer.is_alive():  # only when leaving on an unexpected BaseException: let the stages wind down
            abort.set()
            closer.join()
        pool.shutdown(wait=True)
        for lane in lanes:
            lane.close()
    job.cancelled = cancel.is_set()
    if errors:
        raise errors[0]
    if interrupted:
        raise interrupted[0]
