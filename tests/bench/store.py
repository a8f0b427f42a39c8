"""Keep a benchmark's latest result as ``tests/bench/results/<benchmark>/<machine>.json``.

    python -m tests.bench.store BENCHMARK MACHINE FILE.json [--command TEXT]

FILE.json is what the benchmark wrote (its ``--json`` output). The stored file wraps it with the benchmark's name,
the machine, the commit and the date, and replaces the previous result of that benchmark on that machine (git keeps
the older ones). ``machine_name`` gives the short name used for GPUs (``h100``, ``h200``) from the device's name.
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parents[2]



def write_json(path: str | None, result: Any) -> None:
    """Write a benchmark's result to ``path``, its ``--json`` output (what this module keeps); nothing when None."""
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2, default=str)
def machine_name(device: str) -> str:
    """A short file name for a device: ``NVIDIA H100 80GB HBM3`` -> ``h100``; otherwise the name made safe."""
    m = re.search(r"\b([A-Z]\d{2,4}[A-Z]?)\b", device)
    return m.group(1).lower() if m else re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-") or "unknown"


def current_commit() -> str:
    """The short commit of the working tree, ``unknown`` outside git (with ``+dirty`` when it has changes)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def store(benchmark: str, machine: str, results: Any, command: str = "", results_dir: Path = RESULTS) -> Path:
    """Write ``results`` as the latest result of ``benchmark`` on ``machine``; returns the file written."""
    doc = {"benchmark": benchmark, "machine": machine, "commit": current_commit(),
           "date": datetime.date.today().isoformat(), "command": command, "results": results}
    path = results_dir / benchmark / f"{machine}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    """Command line: store a benchmark's JSON output as its latest result."""
    ap = argparse.ArgumentParser(prog="python -m tests.bench.store", description=__doc__.split("\n\n")[0])
    ap.add_argument("benchmark")
    ap.add_argument("machine")
    ap.add_argument("file")
    ap.add_argument("--command", default="")
    a = ap.parse_args(argv)
    try:
        results = json.loads(Path(a.file).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"python -m tests.bench.store: cannot read {a.file}: {exc}", file=sys.stderr)
        return 2
    print(store(a.benchmark, a.machine, results, a.command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
