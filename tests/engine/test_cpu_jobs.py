"""A parallel kernel's call of its job by symbol (``engine.backends.cpu.jobs``): the same results as a direct call,
the job's code not compiled into the kernel, the job loaded before a kernel that Numba's cache gives another
process, and an error the job raises propagated."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba", reason="Numba is not installed")

#: a module of a kernel and its job, as the CPU kernels write them (one file, both cached)
_MODULE = textwrap.dedent('''
    import numpy as np
    from numba import njit, prange

    from engine.backends.cpu.jobs import job_caller


    @njit(cache=True, nogil=True)
    def scale_rows(x, y, factor, r0, r1):
        for r in range(r0, r1):
            if factor < 0:
                raise ValueError("a negative factor")
            for k in range(x.shape[1]):
                y[r, k] = x[r, k] * factor + np.float32(r)


    _call_scale_rows = job_caller(scale_rows)


    @njit(cache=True, nogil=True, parallel=True)
    def scale_par(x, y, factor, parts):
        rows = x.shape[0]
        for q in prange(parts):
            _call_scale_rows((x, y, factor, rows * q // parts, rows * (q + 1) // parts))


    @njit(cache=True, nogil=True)
    def scale_one(x, y, factor):
        _call_scale_rows((x, y, factor, 0, x.shape[0]))
''')

_RUN = textwrap.dedent('''
    import json, sys
    import numpy as np
    from numba.core import event

    compiled = []

    class Compiles(event.Listener):
        def on_start(self, ev):
            compiled.append(ev.data["dispatcher"].py_func.__name__)

        def on_end(self, ev):
            pass

    event.register("numba:compile", Compiles())
    import kernels
    x = np.arange(60, dtype=np.float32).reshape(12, 5)
    y = np.zeros_like(x)
    kernels.scale_par(x, y, np.float32(2), 3)
    print(json.dumps({"compiled": compiled, "job_loaded": len(kernels.scale_rows.overloads),
                      "y": y.tolist()}))
''')


def _kernels(tmp_path: Path) -> Path:
    (tmp_path / "kernels.py").write_text(_MODULE, encoding="utf-8")
    (tmp_path / "run.py").write_text(_RUN, encoding="utf-8")
    return tmp_path


def _run(folder: Path) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(folder / "cache"),
           "PYTHONPATH": os.pathsep.join([str(folder), str(Path(__file__).resolve().parents[2])])}
    done = subprocess.run([sys.executable, str(folder / "run.py")], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_kernel_from_the_cache_loads_its_job_first_in_another_process(tmp_path):
    folder = _kernels(tmp_path)
    x = np.arange(60, dtype=np.float32).reshape(12, 5)
    expected = (x * 2 + np.arange(12, dtype=np.float32)[:, None]).tolist()
    first = _run(folder)
    assert {"scale_par", "scale_rows"} <= set(first["compiled"])
    assert first["y"] == expected
    second = _run(folder)  # both from the cache: the kernel's reload_init loads the job before the kernel's code
    assert second["compiled"] == []
    assert second["job_loaded"] == 1
    assert second["y"] == expected


def test_a_kernel_from_the_cache_calls_a_job_another_process_compiled(tmp_path):
    """The job compiled afresh where the kernel comes from the cache (as when two test processes compile at once):
    Numba's symbol for the job differs from one compile to the next; the kernel's does not."""
    folder = _kernels(tmp_path)
    _run(folder)
    jobs = [f for f in (folder / "cache").rglob("*") if f.is_file() and ".scale_rows-" in f.name]
    assert jobs
    for f in jobs:
        f.unlink()
    again = _run(folder)
    assert again["compiled"] == ["scale_rows"]
    x = np.arange(60, dtype=np.float32).reshape(12, 5)
    assert again["y"] == (x * 2 + np.arange(12, dtype=np.float32)[:, None]).tolist()


def test_the_job_is_declared_in_the_kernel_not_compiled_into_it(tmp_path, monkeypatch):
    folder = _kernels(tmp_path)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(folder / "cache"))
    import kernels  # noqa: PLC0415

    from engine.backends.cpu.jobs import job_symbol  # noqa: PLC0415

    x = np.ones((4, 3), np.float32)
    y = np.zeros_like(x)
    kernels.scale_one(x, y, np.float32(3))
    assert y.tolist() == (3 + np.arange(4, dtype=np.float32)[:, None] * np.ones(3, np.float32)).tolist()
    signature = kernels.scale_rows.signatures[0]
    numba_symbol = kernels.scale_rows.overloads[signature].fndesc.mangled_name
    ir = next(iter(kernels.scale_one.inspect_llvm().values()))
    assert f"declare i32 @{job_symbol('kernels', 'scale_rows', tuple(signature))}(" in ir
    assert numba_symbol not in ir  # neither the job's code nor a reference to Numba's own symbol for it
    with pytest.raises(ValueError, match="a negative factor"):  # the job's error reaches the caller
        kernels.scale_one(x, y, np.float32(-1))


def test_a_job_another_process_could_not_find_by_its_name_is_refused():
    from numba import njit  # noqa: PLC0415

    from engine.backends.cpu.jobs import job_caller  # noqa: PLC0415

    @njit
    def local_job(a):  # pragma: no cover - compiled
        a[0] = 1

    with pytest.raises(ValueError, match="local_job: a job called by symbol must be a compiled function defined at "
                                         "the top level of its module"):
        job_caller(local_job)


def test_the_engine_kernels_call_their_jobs_by_symbol():
    from engine.backends.cpu import depthwise, panels, winograd  # noqa: PLC0415

    for kernel, job in ((panels._panel_windows_par, panels._panel_share), (winograd._wino_par, winograd._wino_job),
                        (depthwise._depthwise_vec_par, depthwise._depthwise_rows_vec)):
        names, job_name = kernel.py_func.__code__.co_names, job.py_func.__name__
        assert f"_call{job_name}" in names and job_name not in names, kernel.py_func.__name__


_DAMAGED_RUN = textwrap.dedent('''
    import json
    import numpy as np
    from engine.log import configure
    from engine.backends.cpu import runtime  # installs the guard for the engine's kernels
    from engine.backends.cpu.kernel_sources import TOLERANT_PACKAGES
    configure(0)
    TOLERANT_PACKAGES.add("kernels.")  # and for this small module's, as the engine's
    import kernels
    x = np.arange(60, dtype=np.float32).reshape(12, 5)
    y = np.zeros_like(x)
    kernels.scale_par(x, y, np.float32(2), 3)
    print(json.dumps(y.tolist()))
''')


def test_an_unreadable_cached_kernel_or_job_is_compiled_again_with_a_warning(tmp_path):
    """A truncated cache file (a full disk, a copy cut short) of a parallel kernel or of the job it calls: the kernel
    runs, compiled again, and one warning names it (a small kernel and job written as the engine's, guarded as the
    engine's are)."""
    folder = _kernels(tmp_path)
    (folder / "damaged.py").write_text(_DAMAGED_RUN, encoding="utf-8")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(folder / "cache"),
           "PYTHONPATH": os.pathsep.join([str(folder), str(Path(__file__).resolve().parents[2])])}

    def run() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(folder / "damaged.py")], capture_output=True, text=True, env=env,
                              timeout=300, check=False)

    first = run()
    assert first.returncode == 0, first.stderr
    x = np.arange(60, dtype=np.float32).reshape(12, 5)
    expected = (x * 2 + np.arange(12, dtype=np.float32)[:, None]).tolist()
    assert json.loads(first.stdout.splitlines()[-1]) == expected
    for name in ("scale_par", "scale_rows"):  # the parallel kernel, then its job
        damaged = [f for f in (folder / "cache").rglob(f"kernels.{name}-*.nbc")]
        assert damaged, name
        for f in damaged:
            f.write_bytes(f.read_bytes()[:20])
        again = run()
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout.splitlines()[-1]) == expected
        assert f"the cached CPU kernel kernels.{name} could not be read" in again.stderr
        assert again.stderr.count("could not be read") == 1 and "Traceback" not in again.stderr


def test_the_engine_kernels_are_guarded_against_an_unreadable_cache():
    from numba.core import caching  # noqa: PLC0415

    from engine.backends.cpu import runtime  # noqa: F401, PLC0415 - installs the guard
    from engine.backends.cpu.kernel_sources import TOLERANT_PACKAGES  # noqa: PLC0415

    assert getattr(caching.Cache.load_overload, "layerlab_tolerant", False)
    assert "engine.backends.cpu." in TOLERANT_PACKAGES
