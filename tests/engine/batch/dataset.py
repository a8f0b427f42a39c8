"""A small generated dataset for batch tests: images of two sizes, a short video, NPY tensors and a few
corrupt files (deterministic, made with OpenCV and NumPy)."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

SIZES = ((24, 32), (16, 20))  # (H, W)


def make_dataset(root: Path, images: int = 40, video_frames: int = 10, corrupt: int = 2, npy: int = 3) -> Path:
    """Write the dataset under ``root/data`` and return that folder."""
    data = root / "data"
    rng = np.random.default_rng(1234)
    for i in range(images):
        h, w = SIZES[i % 2]
        sub = data / ("a" if i % 3 else "b")
        sub.mkdir(parents=True, exist_ok=True)
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        cv2.imwrite(str(sub / f"img_{i:04d}.png"), img)
    vid = data / "clips"
    vid.mkdir(parents=True, exist_ok=True)
    if video_frames:
        writer = cv2.VideoWriter(str(vid / "clip.avi"), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (32, 24))
        for f in range(video_frames):
            frame = np.full((24, 32, 3), (f * 20) % 256, np.uint8)
            frame[:, : (f + 1) * 3] = 255
            writer.write(frame)
        writer.release()
    for i in range(corrupt):
        (data / f"broken_{i}.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(rng.integers(0, 256, 50, dtype=np.uint8)))
    nd = data / "tensors"
    nd.mkdir(parents=True, exist_ok=True)
    for i in range(npy):
        np.save(nd / f"t_{i}.npy", rng.random((1, 3, 24, 32), dtype=np.float32))
    return data
