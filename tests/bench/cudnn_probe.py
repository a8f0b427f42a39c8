"""Probe: cuDNN frontend graph (conv + bias + relu, NHWC fp16) on CuPy buffers vs im2col + cuBLAS,
and whether a CUDA graph can capture it. Run on the GPU machine: python3 -m tests.bench.cudnn_probe"""
from __future__ import annotations

import time

import cupy as cp
import numpy as np


def timeit(fn, n=20):
    fn()
    cp.cuda.Device().synchronize()
    s, e = cp.cuda.Event(), cp.cuda.Event()
    s.record()
    for _ in range(n):
        fn()
    e.record()
    e.synchronize()
    return cp.cuda.get_elapsed_time(s, e) / n


def main() -> None:
    import cudnn

    print("cudnn frontend", cudnn.__version__, "backend", cudnn.backend_version())
    n, c, h, w, k = 1, 64, 1080, 1920, 64
    rng = np.random.default_rng(0)
    x = cp.asarray(rng.standard_normal((n, h, w, c), dtype=np.float32).astype(np.float16))
    wt = cp.asarray((rng.standard_normal((k, 3, 3, c), dtype=np.float32) * 0.05).astype(np.float16))  # KRSC
    b = cp.asarray(rng.standard_normal((k,), dtype=np.float32).astype(np.float16))
    y = cp.empty((n, h, w, k), dtype=cp.float16)
    handle = cudnn.create_handle()
    stream = cp.cuda.Stream(non_blocking=True)
    cudnn.set_stream(handle=handle, stream=stream.ptr)
    t0 = time.perf_counter()
    g = cudnn.pygraph(io_data_type=cudnn.data_type.HALF, intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT, handle=handle)
    X = g.tensor(name="X", dim=[n, c, h, w], stride=[h * w * c, 1, w * c, c], data_type=cudnn.data_type.HALF)
    W = g.tensor(name="W", dim=[k, c, 3, 3], stride=[9 * c, 1, 3 * c, c], data_type=cudnn.data_type.HALF)
    B = g.tensor(name="B", dim=[1, k, 1, 1], stride=[k, 1, k, k], data_type=cudnn.data_type.HALF)
    Y = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1],
                     compute_data_type=cudnn.data_type.FLOAT, name="conv")
    Y = g.bias(name="bias", input=Y, bias=B)
    Y = g.relu(name="relu", input=Y)
    Y.set_output(True).set_data_type(cudnn.data_type.HALF).set_dim([n, k, h, w]).set_stride([h * w * k, 1, w * k, k])
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()
    ws = cp.empty(max(g.get_workspace_size(), 1), dtype=cp.uint8)
    print(f"graph built in {1e3 * (time.perf_counter() - t0):.0f} ms, workspace {g.get_workspace_size()} B")
    pack = {X: x.data.ptr, W: wt.data.ptr, B: b.data.ptr, Y: y.data.ptr}

    def run():
        with stream:
            g.execute(pack, ws.data.ptr, handle=handle)

    run()
    stream.synchronize()
    # reference: float32 im2col
    xf = x.astype(cp.float32).transpose(0, 3, 1, 2)
    xp_ = cp.pad(xf, ((0, 0), (0, 0), (1, 1), (1, 1)))
    wf = wt.astype(cp.float32).transpose(0, 3, 1, 2)
    ref = cp.zeros((n, k, h, w), cp.float32)
    for i in range(3):
        for j in range(3):
            ref += cp.einsum("kc,nchw->nkhw", wf[:, :, i, j], xp_[:, :, i:i + h, j:j + w])
    ref = cp.maximum(ref + b.astype(cp.float32).reshape(1, k, 1, 1), 0)
    got = y.astype(cp.float32).transpose(0, 3, 1, 2)
    print("rel err", float(cp.linalg.norm(got - ref) / cp.linalg.norm(ref)))
    ms = timeit(run)
    flops = 2 * n * k * h * w * c * 9
    print(f"cudnn conv+bias+relu 1x64x1080x1920 fp16 NHWC: {ms:.3f} ms, {flops / ms / 1e9:.1f} TFLOP/s")
    # CUDA graph capture of the cudnn call
    try:
        with stream:
            stream.begin_capture()
            g.execute(pack, ws.data.ptr, handle=handle)
            graph = stream.end_capture()
        def replay():
            graph.launch(stream)
        print(f"captured replay: {timeit(replay):.3f} ms")
    except Exception as exc:  # noqa: BLE001
        print("capture failed:", type(exc).__name__, exc)


if __name__ == "__main__":
    main()
