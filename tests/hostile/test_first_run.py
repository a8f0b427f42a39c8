"""Class 5: the designer and the first run. Without a display (or with a Qt platform plugin that fails) the
designer command says so in one line (exit 2) instead of Qt aborting the process; notices are given when they
are true (kernels actually compiled) and once (the CuPy notice); the README's sample writes into an ignored folder."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.hostile.conftest import SAMPLE, SMALL
from tests.hostile.harness import REPO

NO_DISPLAY = {"QT_QPA_PLATFORM": "", "DISPLAY": "", "WAYLAND_DISPLAY": ""}
CUPY_NOTICE = "layerlab: using the numpy backend"
COMPILE_NOTICE = "compiling the CPU kernels"


@pytest.mark.parametrize("args", [[], ["gui"], ["gui", str(SAMPLE)]])
def test_no_display_is_one_line_and_exit_2(case, args):
    res = case.expect(2, ["display", "QT_QPA_PLATFORM=offscreen", "layerlab infer"], *args, env=NO_DISPLAY, process=True)
    assert res.rc != -6  # not Qt's SIGABRT


def test_a_failing_platform_plugin_is_one_line_and_exit_2(case):
    pytest.importorskip("PySide6")
    res = case.expect(2, ["platform plugin", "QT_QPA_PLATFORM=offscreen"], "gui",
                      env={"QT_QPA_PLATFORM": "", "DISPLAY": ":97", "WAYLAND_DISPLAY": ""}, process=True)
    assert res.rc != -6


def test_cupy_notice_once_per_machine_and_with_verbose(case):
    case.model("m.lnet", SMALL)
    first = case.expect(0, None, "infer", "m.lnet", "-n", "1", process=True)
    second = case.expect(0, None, "infer", "m.lnet", "-n", "1", process=True)
    verbose = case.expect(0, None, "infer", "m.lnet", "-n", "1", "-v", process=True)
    if "cupy" not in first.out + first.err and "CUDA" not in first.err:
        pytest.skip("CuPy is usable here: no fallback notice")
    assert CUPY_NOTICE in first.err
    assert CUPY_NOTICE not in second.err
    assert CUPY_NOTICE in verbose.err
    assert (case.dir / ".cache" / "layerlab" / "notices").is_dir()  # the marker, in the user cache folder


def test_no_compile_notice_when_nothing_is_compiled(case):
    # the test session compiles the kernels first (tests/conftest.py): nothing is compiled here
    res = case.expect(0, None, "infer", str(SAMPLE), "-n", "1", process=True)
    assert COMPILE_NOTICE not in res.err


def _kernel_cache_without_one_kernel(kernels, env: dict[str, str]) -> None:
    """Fill the kernel cache of ``env`` (its NUMBA_CACHE_DIR) with this machine's compiled kernels, less one small
    main kernel: the cache is not complete (a run has something to compile), and compiling takes seconds, not the
    half minute of every kernel."""
    probe = "from engine.backends.cpu import few_outputs as k; print(k._few_par._cache._cache_file._cache_path)"
    target = Path(subprocess.run([sys.executable, "-c", probe], env={**os.environ, **env, "PYTHONPATH": str(REPO)},
                                 capture_output=True, text=True, check=True).stdout.strip())
    left_out = Path(kernels._few_par._cache._cache_file._index_path).name.removesuffix(".nbi")
    source = Path(kernels._few_par._cache._cache_file._cache_path)
    target.mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():
        if f.suffix in (".nbi", ".nbc") and not f.name.startswith(left_out + "."):
            shutil.copy2(f, target / f.name)


@pytest.mark.slow
def test_compile_notice_when_the_kernels_are_compiled(case):
    """A kernel cache short of a kernel: the first run starts the background compile and says so once; once that
    compile has finished, the next run compiles nothing and says nothing."""
    kernels = pytest.importorskip("engine.backends.cpu.few_outputs", reason="Numba is not installed")
    from engine.backends.cpu import compile_cache

    env = {"NUMBA_CACHE_DIR": str(case.dir / "numba")}
    _kernel_cache_without_one_kernel(kernels, env)
    res = case.expect(0, None, "infer", str(SAMPLE), "-n", "1", env=env, timeout=600, process=True)
    assert res.err.count(COMPILE_NOTICE) == 1
    probe = "from engine.backends.cpu import compile_cache as k; print(k.compiled_before())"
    deadline = time.monotonic() + 600
    while True:  # the background compile (a detached process) has finished: its kernels cached, its lock free
        done = subprocess.run([sys.executable, "-c", probe], env={**os.environ, **env, "PYTHONPATH": str(REPO)},
                              capture_output=True, text=True).stdout.strip() == "True"
        if done and not compile_cache.compile_under_way():
            break
        assert time.monotonic() < deadline, "the background compile did not finish in 10 minutes"
        time.sleep(1)
    again = case.expect(0, None, "infer", str(SAMPLE), "-n", "1", env=env, process=True)
    assert COMPILE_NOTICE not in again.err


def test_readme_sample_writes_into_an_ignored_folder():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    outputs = re.findall(r"layerlab infer resources/samples/denoiser(?:_trained)?\.lnet (?:-w \S+ )?-i input=\S+ "
                         r"-o output=(\S+?)`?\s", readme)
    assert outputs, "the README has no headless sample"
    for path in outputs:
        path = path.rstrip("`.")
        ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO).returncode == 0
        assert ignored, f"the README sample writes {path}, which git would show"
