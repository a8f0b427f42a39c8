"""Package data: sample models and images, icons, default layout."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent
SAMPLES = ROOT / "samples"
