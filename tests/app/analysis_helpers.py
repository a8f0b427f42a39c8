"""Helpers for the analysis-mode GUI tests: a session in its own worker thread, small models, a video."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from app.analysis.live import StartRequest
from app.analysis.proxy import SessionProxy
from engine.model import Model
from engine.run import RunSpec


def compare_model(dims: str = "1x3x24x32") -> Model:
    """input -> conv -> mix(input, conv) -> out, plus a noise branch feeding a second output."""
    m = Model("cmp")
    m.add_layer("input", "inp", params={"dimensions": dims})
    m.add_layer("convolution", "conv", params={"num_output_channels": "3"}, inputs=["inp"], activation="relu")
    m.add_layer("convolution", "conv2", params={"num_output_channels": "3"}, inputs=["conv"])
    m.add_layer("mix", "cmp", params={"blend": "split"}, inputs=["inp", "conv2"])
    m.add_layer("output", "out", inputs=["cmp"])
    return m


def write_video(path: Path, frames: int = 6, size: tuple[int, int] = (32, 24)) -> Path:
    """An MJPG .avi whose frame i is a flat grey of level 30 * (i + 1)."""
    import cv2

    w, h = size
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (w, h))
    for i in range(frames):
        writer.write(np.full((h, w, 3), 30 * (i + 1), np.uint8))
    writer.release()
    return path


def start(proxy: SessionProxy, model: Model, registry, **config) -> None:
    proxy.send("start", StartRequest(model, registry, RunSpec(backend="numpy", **config)))
