"""engine/backends/cpu/warmup.py: the small network that compiles every CPU kernel path ahead of use."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from engine.backends import cpu
from engine.backends.cpu import compile_cache, warmup
from engine.backends.cpu.backend import NumpyBackend
from engine.network import Network
from engine.tensor import TensorFormat

pytest.importorskip("engine.backends.cpu.ops", reason="Numba is not installed")


@pytest.mark.parametrize("fmt", ["fp32 nhwc", "fp32 nchw"])
def test_the_warmup_network_takes_every_kernel_path_and_computes_right(monkeypatch, registry, fmt):
    """On 2 cores, as CI and this machine have (which paths a layer takes depends on how many blocks go round)."""
    monkeypatch.setattr(cpu.runtime, "cores", lambda: 2)
    launches = []
    real = cpu.runtime.launch
    monkeypatch.setattr(cpu.runtime, "launch", lambda kernel, *args: launches.append((kernel.__name__, args[:3])) or (
        kernel.__name__ == "_wino_par" and weights.add((args[8].shape[0], args[9]))) or real(kernel, *args))
    prepared = cpu.runtime.Launch.__call__  # a prepared launch inside a run calls its kernel without ``launch``

    def noted(self):  # noqa: ANN001, ANN202
        launches.append((self.kernel.__name__, self._bound[:3]))
        return prepared(self)
    monkeypatch.setattr(cpu.runtime.Launch, "__call__", noted)
    weights: set[tuple[int, bool]] = set()  # the Winograd launches' weights: (products, over the panels)
    net = Network(warmup.warmup_model(), registry, NumpyBackend(), TensorFormat.parse(fmt))
    warmup.feed(net, seed=1)
    net.run()
    got = net.output("output")
    kinds = {(name, args[2]) if name in ("_wino_par", "_conv_par") else (name, None) for name, args in launches}
    assert {("_wino_par", -1), ("_wino_par", 0), ("_wino_par", 1), ("_wino_par", 2)} <= kinds  # blocks, steps
    if fmt.endswith("nhwc"):  # im2col convolutions, pooling and element-wise kernels are NHWC ones
        depthwise = "_depthwise_vec_par" if cpu.depthwise.vector_tiles_apply(16) else "_depthwise_flat_par"
        by_taps = "_tap_panels_par" if cpu.taps.tap_panels_apply() else "_taps_par"  # AVX-512: the micro-kernel
        assert {("_conv_par", 0), ("_conv_par", 1), ("_conv_par", 2), ("_pool", None), ("_element_wise", None),
                ("_few_par", None), (depthwise, None), (by_taps, None), ("_channels_last_par", None)} <= kinds
        if cpu.microkernel.panels_available():  # AVX-512 or AVX2: small images' products over packed weight panels
            assert {("_panel_windows_par", None), ("_im2col_par", None), ("_panel_par", None),
                    ("_grouped_par", None), ("_blocked_par", None), ("_to_blocks_par", None)} <= kinds
            assert {(16, False), (36, True)} <= weights  # F(2x2) by OpenBLAS, F(4x4) on the panels
        else:
            assert {(16, False), (36, False)} <= weights
    else:
        assert weights == {(36, False)}  # NCHW: F(4x4), products by OpenBLAS
    assert {("_upsample", None), ("_resize_rows", None), ("_matmul_par", None), ("_softmax_par", None)} <= kinds
    if cpu.microkernel.panels_available():  # attention in one pass per matrix on the micro-kernel
        assert ("_attention_par", None) in kinds
    assert ("_scale_nhwc" if fmt.endswith("nhwc") else "_scale_rows_par", None) in kinds  # a squeeze-excitation gate
    assert {("_scale_shift_rows" if fmt.endswith("nhwc") else "_scale_shift_planes", None), ("_activation", None)} <= kinds
    monkeypatch.setenv("LAYERLAB_CPU_KERNELS", "off")
    plain = Network(warmup.warmup_model(), registry, NumpyBackend(), TensorFormat.parse(fmt))
    warmup.feed(plain, seed=1)
    plain.run()
    ref = plain.output("output")
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-5
    for name in ("depthwise", "squeezed", "steps", "residual", "stem_out", "averaged", "pooled", "wide_gate_out",
                 "big_gate_out", "normalized"):  # the generic path
        fast, slow = net.output(name), plain.output(name)
        assert np.linalg.norm(fast - slow) / np.linalg.norm(slow) < 1e-5


def test_the_warmup_cuts_its_layers_over_every_core_on_a_busy_machine(monkeypatch):
    """Other programs keeping a core busy make the kernels keep to fewer threads (``runtime.cores``), but the warm-up
    runs its network as on an idle machine, so that the parallel kernels are compiled too (else a first inference
    beside it would leave them to compile at the first run that needs them)."""
    import engine.network

    rt = cpu.runtime
    own = rt._own_cores()
    monkeypatch.setattr(rt, "_cores_taken", lambda: float(own))  # every core busy with another program
    monkeypatch.setattr(rt, "_cores_seen", [0.0, -1e9])  # (the last count forgotten)
    assert rt.cores() == 1
    seen = []
    monkeypatch.setattr(engine.network.Network, "run", lambda net: seen.append((rt.cores(), rt.threads())) or [])
    warmup.warm(["pointwise"])
    assert seen == [(own, min(own, rt.numba.config.NUMBA_NUM_THREADS))] * 2  # NHWC and NCHW
    monkeypatch.setattr(rt, "_cores_seen", [0.0, -1e9])
    assert rt.cores() == 1  # busy again outside the warm-up


def test_start_in_background_only_when_needed(monkeypatch):
    started = []
    monkeypatch.setattr(warmup.subprocess, "Popen", lambda argv, **kw: started.append(argv) or "process")
    monkeypatch.setattr(warmup, "needed", lambda: False)
    assert warmup.start_in_background() is None and not started
    monkeypatch.setattr(warmup, "needed", lambda: True)
    assert warmup.start_in_background() == "process"
    assert started == [[sys.executable, "-m", "engine.backends.cpu.warmup"]]


def test_main_says_when_there_is_nothing_to_do(monkeypatch, capsys):
    monkeypatch.setattr(warmup, "needed", lambda: False)
    assert warmup.main() == 0 and "compiled already" in capsys.readouterr().out
    monkeypatch.setattr(warmup, "needed", lambda: True)
    monkeypatch.setattr(warmup, "warm", lambda: 12.3)
    assert warmup.main() == 0 and "done in 12 s" in capsys.readouterr().out


def test_a_run_path_backend_defers_compiling_to_a_background_process(monkeypatch, registry):
    """Where the kernels were never compiled, the command line's and designer's backend starts the warmup in its
    own session and runs on the plain NumPy path (no kernel launch) until it has finished; results are the same."""
    import io

    from engine.backends import get_backend

    started, launches = [], []
    monkeypatch.setattr(compile_cache, "compiled_before", lambda: False)
    monkeypatch.setattr(warmup.subprocess, "Popen", lambda argv, **kw: started.append((argv, kw)) or "process")
    real = cpu.runtime.launch
    monkeypatch.setattr(cpu.runtime, "launch", lambda kernel, *args: launches.append(kernel.__name__) or real(kernel, *args))
    out = io.StringIO()
    backend = get_backend("numpy", notice=out, defer_compile=True)
    assert "in the background" in out.getvalue()
    assert started and started[0][0][-1] == "engine.backends.cpu.warmup" and started[0][1]["start_new_session"]
    assert backend.cpu_kernels() is None
    net = Network(warmup.warmup_model(), registry, backend, TensorFormat.parse("fp32 nhwc"))
    warmup.feed(net, seed=2)
    net.run()
    assert launches == []
    fast = Network(warmup.warmup_model(), registry, NumpyBackend(), TensorFormat.parse("fp32 nhwc"))
    warmup.feed(fast, seed=2)
    fast.run()
    assert launches
    np.testing.assert_allclose(net.output("output"), fast.output("output"), rtol=1e-4, atol=1e-5)
    out = io.StringIO()  # without deferring: the kernels run in this process (Numba compiles them on first use and
    # the notice comes only when it does: test_cpu_kernels); they are compiled already here, so nothing is said
    assert get_backend("numpy", notice=out).cpu_kernels() is not None and "compiling" not in out.getvalue()


def test_no_second_background_compile_and_no_notice_while_one_runs(monkeypatch, tmp_path):
    """Another process compiling the kernels (it holds the lock): the run path starts no second one and says
    nothing (a compile starts nowhere), but still runs on the plain NumPy path until the kernels are cached."""
    import fcntl
    import io

    from engine.backends import get_backend

    started = []
    monkeypatch.setattr(compile_cache, "compiled_before", lambda: False)
    monkeypatch.setattr(compile_cache, "warmup_lock_path", lambda: tmp_path / "w.lock")
    monkeypatch.setattr(warmup.subprocess, "Popen", lambda argv, **kw: started.append(argv) or "process")
    out = io.StringIO()
    with open(tmp_path / "w.lock", "a+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert compile_cache.compile_under_way()
        backend = get_backend("numpy", notice=out, defer_compile=True)
    assert not started and out.getvalue() == "" and backend.cpu_kernels() is None
    assert not compile_cache.compile_under_way()
    backend = get_backend("numpy", notice=out, defer_compile=True)  # the lock is free: this one starts it
    assert len(started) == 1 and "in the background" in out.getvalue() and backend.cpu_kernels() is None


def test_two_warmups_never_compile_at_once(monkeypatch, capsys, tmp_path):
    import fcntl

    monkeypatch.setattr(warmup, "needed", lambda: True)
    monkeypatch.setattr(compile_cache, "warmup_lock_path", lambda: tmp_path / "w.lock")
    monkeypatch.setattr(warmup, "warm", lambda: 1.0)
    with open(tmp_path / "w.lock", "a+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert warmup.main() == 0 and "another process" in capsys.readouterr().out
    assert warmup.main() == 0 and "done in 1 s" in capsys.readouterr().out


def test_kernels_compiled_from_other_sources_are_forgotten(tmp_path):
    """Numba's cache checks only the file defining a kernel; a change to a helper it inlines from another file of
    the package must not leave stale kernels in use: the cached kernels of other sources are deleted once."""
    pytest.importorskip("numba")
    from engine.backends.cpu import kernel_sources

    folder = tmp_path / "__pycache__"
    folder.mkdir()
    kept = folder / "runtime.cpython-312.pyc"
    for name in ("im2col._conv_par-1.py312.nbi", "im2col._conv_par-1.py312.1.nbc"):
        (folder / name).write_bytes(b"old")
    kept.write_bytes(b"pyc")
    (folder / kernel_sources.SOURCES_MARKER).write_text("an-older-digest\n")
    assert kernel_sources.forget_stale_kernels(folder, "digest-now")
    assert sorted(f.name for f in folder.iterdir()) == sorted([kept.name, kernel_sources.SOURCES_MARKER])
    (folder / "im2col._conv_par-1.py312.nbi").write_bytes(b"new")  # compiled from the current sources
    assert not kernel_sources.forget_stale_kernels(folder, "digest-now")
    assert (folder / "im2col._conv_par-1.py312.nbi").read_bytes() == b"new"
    assert kernel_sources.sources_digest() != kernel_sources.sources_digest.__name__  # a real digest of the files
    assert len(kernel_sources.sources_digest()) == 40


def test_each_kernel_family_is_a_network_of_its_own_with_a_lock_of_its_own(registry):
    """Parallel test processes compile different families at once (tests/conftest.py): each family's network runs
    alone, the families share no layer, together they are the whole warmup network, and each has its own lock."""
    layers = [set(warmup.warmup_model([family]).layers) for family in warmup.FAMILIES]
    assert set().union(*layers) == set(warmup.warmup_model().layers)
    assert sum(map(len, layers)) == len(warmup.warmup_model().layers)
    for family in warmup.FAMILIES:
        net = Network(warmup.warmup_model([family]), registry, NumpyBackend(), TensorFormat.parse("fp32 nhwc"))
        warmup.feed(net)
        net.run()
        assert all(np.isfinite(net.output(name)).all() for name in net.output_names)
    locks = {compile_cache.warmup_lock_path(family) for family in warmup.FAMILIES}
    assert len(locks) == len(warmup.FAMILIES) and compile_cache.warmup_lock_path() not in locks


_SIGNATURES = """
import gc
from numba.core.registry import CPUDispatcher
from engine.backends.cpu import warmup
warmup.warm()
for obj in gc.get_objects():
    if isinstance(obj, CPUDispatcher) and obj.py_func.__module__.startswith("engine.") and len(obj.overloads) > 1:
        print(obj.py_func.__module__, obj.py_func.__qualname__, *map(str, obj.overloads))
"""


def test_the_warmup_compiles_each_kernel_once():
    """Every kernel the warm-up network reaches holds one compiled signature: a constant one kernel passes to another
    (typed ``Literal[int](0)``) or a loop index of another integer type compiles the callee again (a fifth of the
    warm-up's compile time). Run in a process of its own, where the kernels load from the cache the test processes
    filled."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _SIGNATURES], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
