"""Small PyTorch versions of classic CNN architectures (random initialisation, eval mode) for the importer's
tests: the layer structure of each original, with few channels and small inputs so they run in seconds.
torchvision is not a dependency, so they are written here.

The dynamo exporter takes 1.5-9 s of CPU for each of them (``torch.export`` tracing, decompositions, the ONNX
optimiser), where the TorchScript one takes a tenth of a second; its files are stored in ``dynamo_exports/`` (the
weights in the ``.onnx.data`` file the exporter writes beside each model), written by the pinned torch, less the
exporter's stack traces (source paths of the machine that exported them). ``python -m
tests.engine.importers.architectures`` writes them again (after a change to an architecture or to the torch pin);
``test_onnx_architectures`` checks that they are what the pinned exporter writes now, on the smallest of them."""
from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    """ResNet-18: 7x7 stem, max pool, 4 stages of 2 basic blocks, global average pool, linear classifier."""

    def __init__(self, width: int = 8, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], width
        for i, cout in enumerate((width, 2 * width, 4 * width, 8 * width)):
            blocks += [BasicBlock(cin, cout, 1 if i == 0 else 2), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand != 1:
            layers += [nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6()]
        layers += [nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
                   nn.ReLU6(), nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2: depthwise convolutions, ReLU6, inverted residuals, dropout + linear classifier."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        cfg = [(1, 8, 1, 1), (6, 12, 2, 2), (6, 16, 2, 2), (6, 24, 1, 1)]  # (expand, out, repeats, stride)
        layers: list[nn.Module] = [nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6()]
        cin = 8
        for t, c, n, s in cfg:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += [nn.Conv2d(cin, 64, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(64, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


def _double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


class UNet(nn.Module):
    """UNet with bilinear upsampling (no transposed convolutions) and concatenated skips."""

    def __init__(self, width: int = 8, classes: int = 2) -> None:
        super().__init__()
        w = width
        self.inc, self.d1, self.d2 = _double_conv(3, w), _double_conv(w, 2 * w), _double_conv(2 * w, 4 * w)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.u1, self.u2 = _double_conv(6 * w, 2 * w), _double_conv(3 * w, w)
        self.out = nn.Conv2d(w, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.inc(x)
        x2 = self.d1(F.max_pool2d(x1, 2))
        x3 = self.d2(F.max_pool2d(x2, 2))
        y = self.u1(torch.cat([x2, self.up(x3)], 1))
        y = self.u2(torch.cat([x1, self.up(y)], 1))
        return self.out(y)


class DnCNN(nn.Module):
    """DnCNN: conv+ReLU, (conv+BN+ReLU) x depth, conv; predicts the noise, subtracted from the input."""

    def __init__(self, depth: int = 6, width: int = 16) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(1, width, 3, padding=1), nn.ReLU()]
        for _ in range(depth - 2):
            layers += [nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
        layers.append(nn.Conv2d(width, 1, 3, padding=1))
        self.body = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x - self.body(x)


class ESPCN(nn.Module):
    """ESPCN super-resolution: tanh convolutions, then a sub-pixel convolution (PixelShuffle)."""

    def __init__(self, scale: int = 3) -> None:
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 16, 5, padding=2), nn.Conv2d(16, 8, 3, padding=1)
        self.c3 = nn.Conv2d(8, scale * scale, 3, padding=1)
        self.shuffle = nn.PixelShuffle(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.shuffle(self.c3(torch.tanh(self.c2(torch.tanh(self.c1(x)))))))


class SqueezeExcite(nn.Module):
    def __init__(self, c: int, r: int = 4) -> None:
        super().__init__()
        self.reduce, self.expand = nn.Conv2d(c, c // r, 1), nn.Conv2d(c // r, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.adaptive_avg_pool2d(x, 1)
        return x * torch.sigmoid(self.expand(F.silu(self.reduce(s))))


class EfficientBlock(nn.Module):
    """EfficientNet MBConv blocks: expand 1x1 + SiLU, depthwise + SiLU, squeeze-excitation, project, residual."""

    def __init__(self, c: int = 16, expand: int = 4) -> None:
        super().__init__()
        h = c * expand
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c), nn.SiLU())
        self.expand = nn.Sequential(nn.Conv2d(c, h, 1, bias=False), nn.BatchNorm2d(h), nn.SiLU())
        self.dw = nn.Sequential(nn.Conv2d(h, h, 5, 1, 2, groups=h, bias=False), nn.BatchNorm2d(h), nn.SiLU())
        self.se = SqueezeExcite(h)
        self.project = nn.Sequential(nn.Conv2d(h, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        return y + self.project(self.se(self.dw(self.expand(y))))


class SegmentationHead(nn.Module):
    """A strided backbone and a classifier head whose logits are resized back to the input size, then softmax."""

    def __init__(self, classes: int = 5) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(),
                                      nn.Conv2d(32, 32, 3, 1, 2, dilation=2), nn.ReLU())
        self.head = nn.Conv2d(32, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.head(self.backbone(x))
        y = F.interpolate(y, size=x.shape[2:], mode="bilinear", align_corners=False)
        return torch.softmax(y, dim=1)


class PReLUNet(nn.Module):
    """Convolutions with per-channel and shared PReLU, average pooling, nearest upsampling back."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.a1 = nn.Conv2d(3, 12, 3, padding=1), nn.PReLU(12)
        self.c2, self.a2 = nn.Conv2d(12, 12, 3, padding=1), nn.PReLU()
        self.c3 = nn.Conv2d(12, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.a1(self.c1(x))
        y = F.avg_pool2d(self.a2(self.c2(y)), 2)
        return self.c3(F.interpolate(y, scale_factor=2, mode="nearest"))


class ActivationZoo(nn.Module):
    """Every activation PyTorch networks commonly use, each after a convolution (GELU both ways, Softplus with
    its threshold, ReLU6...), so the exporters' decompositions of each are imported."""

    def __init__(self) -> None:
        super().__init__()
        acts = [nn.GELU(), nn.GELU(approximate="tanh"), nn.Hardswish(), nn.Mish(), nn.ELU(0.7), nn.Softplus(),
                nn.Hardsigmoid(), nn.SiLU(), nn.LeakyReLU(0.1), nn.ReLU6(), nn.SELU(), nn.CELU(0.8), nn.Tanh()]
        self.layers = nn.Sequential(*(m for a in acts for m in (nn.Conv2d(4, 4, 3, padding=1), a)))
        self.first = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(self.first(x) * 4.0)


class ChannelShuffle(nn.Module):
    """ShuffleNet v2's channel shuffle: a reshape to five dimensions, a transpose and a reshape back."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Conv2d(3, 8, 3, padding=1)
        self.last = nn.Conv2d(8, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.first(x)
        n, c, h, w = y.shape
        y = y.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous().view(n, c, h, w)
        return self.last(torch.relu(y))


class ConvNeXtBlock(nn.Module):
    """A ConvNeXt block: depthwise convolution, channels-last LayerNorm and MLP (Linear, exact GELU, Linear), layer
    scale and the residual sum."""

    def __init__(self, c: int = 8) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c, eps=1e-6)
        self.up, self.act, self.down = nn.Linear(c, 4 * c), nn.GELU(), nn.Linear(4 * c, c)
        self.scale = nn.Parameter(torch.rand(c, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.down(self.act(self.up(self.norm(y)))).permute(0, 3, 1, 2)
        return x + self.scale * y


class SwinBlock(nn.Module):
    """A Swin Transformer block as torchvision's swin_t computes it: channels-last LayerNorm, shifted windows
    (torch.roll, an attention mask for the shift), q, k and v picked from one projection (Gather), a relative-position
    bias gathered from its table by constant indices, q @ k^T, softmax, @ v, the MLP with exact GELU."""

    def __init__(self, c: int = 8, heads: int = 2, window: int = 4, shift: int = 2) -> None:
        super().__init__()
        self.heads, self.window, self.shift = heads, window, shift
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.norm1, self.norm2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.mlp = nn.Sequential(nn.Linear(c, 2 * c), nn.GELU(), nn.Linear(2 * c, c))
        self.table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.5)
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + window - 1
        self.register_buffer("index", (rel[:, :, 0] * (2 * window - 1) + rel[:, :, 1]).flatten())

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        ws, s = self.window, self.shift
        x = torch.roll(x, shifts=(-s, -s), dims=(1, 2))
        nh, nw = h // ws, w // ws
        x = x.view(b, nh, ws, nw, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b * nh * nw, ws * ws, c)
        qkv = self.qkv(x).reshape(x.size(0), ws * ws, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q * (c // self.heads) ** -0.5
        attn = q.matmul(k.transpose(-2, -1))
        bias = self.table[self.index].view(ws * ws, ws * ws, -1).permute(2, 0, 1).contiguous().unsqueeze(0)
        attn = attn + bias
        mask = x.new_zeros((h, w))
        regions = ((0, -ws), (-ws, -s), (-s, None))
        count = 0
        for hs in regions:
            for wsl in regions:
                mask[hs[0]:hs[1], wsl[0]:wsl[1]] = count
                count += 1
        mask = mask.view(nh, ws, nw, ws).permute(0, 2, 1, 3).reshape(nh * nw, ws * ws)
        mask = mask.unsqueeze(1) - mask.unsqueeze(2)
        mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
        attn = attn.view(b, nh * nw, self.heads, ws * ws, ws * ws) + mask.unsqueeze(1).unsqueeze(0)
        attn = F.softmax(attn.view(-1, self.heads, ws * ws, ws * ws), dim=-1)
        x = attn.matmul(v).transpose(1, 2).reshape(x.size(0), ws * ws, c)
        x = self.proj(x).view(b, nh, nw, ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)
        return torch.roll(x, shifts=(s, s), dims=(1, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x).permute(0, 2, 3, 1)
        x = x + self.attention(self.norm1(x))
        x = x + self.mlp(self.norm2(x))
        return x.permute(0, 3, 1, 2)


class MaxViTBlock(nn.Module):
    """MaxViT's window attention as torchvision's maxvit_t computes it: the image cut into windows by a six-axis
    reshape and permute, q, k and v by torch.chunk (Split), the two products as Einsum, a relative-position bias."""

    def __init__(self, c: int = 8, heads: int = 2, p: int = 4) -> None:
        super().__init__()
        self.heads, self.p = heads, p
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.norm = nn.LayerNorm(c)
        self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.bias = nn.Parameter(torch.randn(heads, p * p, p * p) * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        b, c, h, w = x.shape
        p, d = self.p, c // self.heads
        t = x.view(b, c, h // p, p, w // p, p).permute(0, 2, 4, 3, 5, 1).reshape(b, (h // p) * (w // p), p * p, c)
        q, k, v = torch.chunk(self.qkv(self.norm(t)), 3, dim=-1)
        q, k, v = (z.reshape(b, -1, p * p, self.heads, d).permute(0, 1, 3, 2, 4) for z in (q, k, v))
        q = q * d ** -0.5
        s = torch.einsum("B G H I D, B G H J D -> B G H I J", q, k)
        y = torch.einsum("B G H I J, B G H J D -> B G H I D", F.softmax(s + self.bias, dim=-1), v)
        y = self.proj(y.permute(0, 1, 3, 2, 4).reshape(b, -1, p * p, c))
        y = y.view(b, h // p, w // p, p, p, c).permute(0, 5, 1, 3, 2, 4).reshape(b, c, h, w)
        return x + y


class FusedMBConv(nn.Module):
    """EfficientNetV2's fused MBConv: a 3x3 expanding convolution with SiLU, a 1x1 projection, the residual sum."""

    def __init__(self, c: int = 8) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, 2, 1, bias=False), nn.BatchNorm2d(c), nn.SiLU())
        self.expand = nn.Sequential(nn.Conv2d(c, 4 * c, 3, 1, 1, bias=False), nn.BatchNorm2d(4 * c), nn.SiLU())
        self.project = nn.Sequential(nn.Conv2d(4 * c, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        return x + self.project(self.expand(x))


#: name -> (constructor, input shape N x C x H x W)
ARCHITECTURES: dict[str, tuple[Callable[[], nn.Module], tuple[int, int, int, int]]] = {
    "resnet18": (ResNet18, (1, 3, 64, 64)),
    "mobilenet_v2": (MobileNetV2, (1, 3, 64, 64)),
    "unet": (UNet, (1, 3, 32, 48)),
    "dncnn": (DnCNN, (1, 1, 40, 40)),
    "espcn": (ESPCN, (1, 1, 24, 20)),
    "efficientnet_block": (EfficientBlock, (2, 3, 24, 24)),
    "segmentation_head": (SegmentationHead, (1, 3, 40, 56)),
    "prelu_net": (PReLUNet, (1, 3, 32, 32)),
    "activation_zoo": (ActivationZoo, (1, 3, 16, 16)),
    "channel_shuffle": (ChannelShuffle, (1, 3, 12, 10)),
    "convnext_block": (ConvNeXtBlock, (2, 3, 14, 12)),
    "swin_block": (SwinBlock, (1, 3, 8, 12)),
    "maxvit_block": (MaxViTBlock, (2, 3, 8, 8)),
    "fused_mbconv": (FusedMBConv, (1, 3, 16, 16)),
}


def build(name: str, seed: int = 0) -> tuple[nn.Module, torch.Tensor]:
    """The eval-mode module (random weights, non-trivial batch-norm statistics) and an input of its size."""
    torch.manual_seed(seed)
    ctor, shape = ARCHITECTURES[name]
    model = ctor().eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):  # trained-looking statistics, not the identity
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.3, 0.3)
    return model, torch.rand(shape)


#: the dynamo exporter's files of :data:`ARCHITECTURES` (``<name>.onnx`` and its ``<name>.onnx.data``)
DYNAMO_EXPORTS = Path(__file__).with_name("dynamo_exports")


def dynamo_export(name: str) -> tuple[Path, torch.Tensor]:
    """The stored dynamo export of architecture ``name`` and the input it was exported with."""
    return DYNAMO_EXPORTS / f"{name}.onnx", build(name)[1]


#: the dynamo exporter's metadata on each node that names the source file and line it came from (an absolute path
#: of the machine that exported it); left out of the stored files, nothing else is changed
STACK_TRACE = "pkg.torch.onnx.stack_trace"


def without_stack_traces(path: Path) -> bytes:
    """The model of the ONNX file ``path`` (its weights left in their file) serialised without :data:`STACK_TRACE`."""
    import onnx  # noqa: PLC0415

    model = onnx.load(str(path), load_external_data=False)
    for node in model.graph.node:
        kept = [p for p in node.metadata_props if p.key != STACK_TRACE]
        del node.metadata_props[:]
        node.metadata_props.extend(kept)
    return model.SerializeToString()


def write_dynamo_exports() -> None:
    """Export every architecture with the dynamo exporter into :data:`DYNAMO_EXPORTS` (replacing what is there),
    without the exporter's stack traces."""
    DYNAMO_EXPORTS.mkdir(exist_ok=True)
    for old in DYNAMO_EXPORTS.glob("*.onnx*"):
        old.unlink()
    for name in ARCHITECTURES:
        path = DYNAMO_EXPORTS / f"{name}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            export(name, str(path), dynamo=True)
        path.write_bytes(without_stack_traces(path))


def export(name: str, path: str, dynamo: bool = False, seed: int = 0) -> torch.Tensor:
    """Export architecture ``name`` to ``path`` (TorchScript exporter, or the dynamo one); returns the input."""
    model, x = build(name, seed)
    kwargs = {"dynamo": True, "optimize": True} if dynamo else {"dynamo": False}
    torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["output"], opset_version=17 if not dynamo
                      else 18, **kwargs)
    return x


if __name__ == "__main__":
    # through the module's own name: the exporter writes each module's class path into the file
    from tests.engine.importers import architectures

    architectures.write_dynamo_exports()
