"""The reference networks of BENCHMARKS.md as LayerLab models, and a PyTorch twin of any model built
from the same layer types (weights copied from the LayerLab network) for peer timings."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.model import Model
from engine.tensor import Dims

DNCNN_DIMS = Dims(1, 3, 256, 256)
UNET_DIMS = Dims(1, 3, 256, 256)
RESNET_DIMS = Dims(1, 3, 224, 224)


def dncnn(dims: Dims = DNCNN_DIMS, depth: int = 15) -> Model:
    m = Model("dncnn")
    m.add_layer("input", "input", params={"dimensions": str(dims)})
    m.add_layer("convolution", "conv0", params={"num_output_channels": "64"}, inputs=["input"], activation="relu")
    prev = "conv0"
    for i in range(1, depth + 1):
        m.add_layer("convolution", f"conv{i}", params={"num_output_channels": "64", "bias": "false"}, inputs=[prev])
        m.add_layer("batch_normalization", f"bn{i}", inputs=[f"conv{i}"], activation="relu")
        prev = f"bn{i}"
    m.add_layer("convolution", "conv_out", params={"num_output_channels": "3"}, inputs=[prev])
    m.add_layer("element_wise", "residual", params={"operation": "sum"}, inputs=["input", "conv_out"])
    m.add_layer("output", "output", inputs=["residual"])
    return m


def unet(dims: Dims = UNET_DIMS, widths: tuple[int, ...] = (32, 64, 128, 256)) -> Model:
    m = Model("unet")
    m.add_layer("input", "input", params={"dimensions": str(dims)})
    prev, skips = "input", []

    def block(name: str, src: str, ch: int) -> str:
        m.add_layer("convolution", f"{name}_a", params={"num_output_channels": str(ch)}, inputs=[src], activation="relu")
        m.add_layer("convolution", f"{name}_b", params={"num_output_channels": str(ch)}, inputs=[f"{name}_a"],
                    activation="relu")
        return f"{name}_b"

    for i, ch in enumerate(widths):
        prev = block(f"enc{i}", prev, ch)
        if i < len(widths) - 1:
            skips.append(prev)
            m.add_layer("pooling", f"pool{i}", params={"pool_type": "max", "kernel_size": "2", "stride": "2",
                                                      "padding": "0"}, inputs=[prev])
            prev = f"pool{i}"
    for i in reversed(range(len(widths) - 1)):
        m.add_layer("upsample", f"up{i}", params={"factor": "2", "method": "bilinear"}, inputs=[prev])
        m.add_layer("concatenation", f"cat{i}", inputs=[f"up{i}", skips[i]])
        prev = block(f"dec{i}", f"cat{i}", widths[i])
    m.add_layer("convolution", "final", params={"num_output_channels": "3", "kernel_size": "1", "padding": "0"},
                inputs=[prev])
    m.add_layer("output", "output", inputs=["final"])
    return m


def resnet18(dims: Dims = RESNET_DIMS, classes: int = 1000) -> Model:
    m = Model("resnet18")
    m.add_layer("input", "input", params={"dimensions": str(dims)})
    m.add_layer("convolution", "stem", params={"num_output_channels": "64", "kernel_size": "7", "stride": "2",
                                               "padding": "3", "bias": "false"}, inputs=["input"])
    m.add_layer("batch_normalization", "stem_bn", inputs=["stem"], activation="relu")
    m.add_layer("pooling", "stem_pool", params={"pool_type": "max", "kernel_size": "3", "stride": "2", "padding": "1"},
                inputs=["stem_bn"])
    prev, ch = "stem_pool", 64
    for stage, width in enumerate((64, 128, 256, 512)):
        for blk in range(2):
            stride = 2 if stage > 0 and blk == 0 else 1
            n = f"s{stage}b{blk}"
            m.add_layer("convolution", f"{n}_c1", params={"num_output_channels": str(width), "stride": str(stride),
                                                          "bias": "false"}, inputs=[prev])
            m.add_layer("batch_normalization", f"{n}_bn1", inputs=[f"{n}_c1"], activation="relu")
            m.add_layer("convolution", f"{n}_c2", params={"num_output_channels": str(width), "bias": "false"},
                        inputs=[f"{n}_bn1"])
            m.add_layer("batch_normalization", f"{n}_bn2", inputs=[f"{n}_c2"])
            short = prev
            if stride != 1 or ch != width:
                m.add_layer("convolution", f"{n}_down", params={"num_output_channels": str(width), "kernel_size": "1",
                                                                "stride": str(stride), "padding": "0", "bias": "false"},
                            inputs=[prev])
                m.add_layer("batch_normalization", f"{n}_down_bn", inputs=[f"{n}_down"])
                short = f"{n}_down_bn"
            m.add_layer("element_wise", f"{n}_add", params={"operation": "sum"}, inputs=[f"{n}_bn2", short],
                        activation="relu")
            prev, ch = f"{n}_add", width
    m.add_layer("pooling", "gap", params={"pool_type": "average", "global": "true"}, inputs=[prev])
    m.add_layer("fully_connected", "fc", params={"num_outputs": str(classes)}, inputs=["gap"])
    m.add_layer("output", "output", inputs=["fc"])
    return m


NETWORKS = {"dncnn": dncnn, "unet": unet, "resnet18": resnet18}


def torch_twin(net: Any) -> Any:
    """A torch callable computing the same function as a built LayerLab network (weights copied)."""
    import torch
    import torch.nn.functional as F

    host = {n: {k: torch.from_numpy(np.ascontiguousarray(net.backend.to_host(v), dtype=np.float32))
                for k, v in net.layer(n).weights.items()} for n in net.order}

    def act(y: Any, layer: Any) -> Any:
        a = layer.activation
        if a is None:
            return y
        if a.name == "relu":
            return F.relu(y)
        raise NotImplementedError(a.name)

    def forward(x: Any, params: dict[str, dict[str, Any]]) -> Any:
        vals: dict[str, Any] = {}
        for n in net.order:
            layer, nd = net.layer(n), net.nodes[n]
            ins = [vals[s] if s else None for s in nd.inputs]
            t, p, w = layer.desc.name, layer.p, params[n]
            if t == "input":
                y = x
            elif t == "output":
                y = ins[0]
            elif t in ("convolution", "conv_bn"):
                y = F.conv2d(ins[0], w["weights"], w.get("bias"), (p["stride"].h, p["stride"].w),
                             (p["padding"].h, p["padding"].w), (p["dilation"].h, p["dilation"].w), p["groups"])
                if t == "conv_bn":
                    y = F.batch_norm(y, w["bn_mean"], w["bn_variance"], w["bn_scale"], w["bn_bias"], False,
                                     eps=p["bn_epsilon"] if "bn_epsilon" in p else p["epsilon"])
            elif t == "batch_normalization":
                y = F.batch_norm(ins[0], w["mean"], w["variance"], w["scale"], w["bias"], False, eps=p["epsilon"])
            elif t == "element_wise":
                y = ins[0]
                for z in ins[1:]:
                    y = y + z
            elif t == "pooling":
                if p["global"]:
                    y = F.adaptive_avg_pool2d(ins[0], 1) if p["pool_type"] == "average" else F.adaptive_max_pool2d(ins[0], 1)
                elif p["pool_type"] == "max":
                    y = F.max_pool2d(ins[0], (p["kernel_size"].h, p["kernel_size"].w), (p["stride"].h, p["stride"].w),
                                     (p["padding"].h, p["padding"].w))
                else:
                    y = F.avg_pool2d(ins[0], (p["kernel_size"].h, p["kernel_size"].w), (p["stride"].h, p["stride"].w),
                                     (p["padding"].h, p["padding"].w), count_include_pad=p["count_include_pad"])
            elif t == "upsample":
                y = F.interpolate(ins[0], scale_factor=(p["factor"].h, p["factor"].w),
                                  mode="bilinear" if p["method"] == "bilinear" else "nearest",
                                  align_corners=False if p["method"] == "bilinear" else None)
            elif t == "concatenation":
                y = torch.cat([z for z in ins if z is not None], dim=1)
            elif t == "fully_connected":
                y = F.linear(ins[0].flatten(1), w["weights"], w.get("bias"))[:, :, None, None]
            else:
                raise NotImplementedError(t)
            vals[n] = act(y, layer)
        return vals[net.output_names[0]]

    return forward, host
