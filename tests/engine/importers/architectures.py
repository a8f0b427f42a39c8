"""Small PyTorch versions of classic CNN architectures (random initialisation, eval mode) for the importer's
tests: the layer structure of each original, with few channels and small inputs so they run in seconds.
torchvision is not a dependency, so they are written here."""
from __future__ import annotations

from collections.abc import Callable

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


def export(name: str, path: str, dynamo: bool = False, seed: int = 0) -> torch.Tensor:
    """Export architecture ``name`` to ``path`` (TorchScript exporter, or the dynamo one); returns the input."""
    model, x = build(name, seed)
    kwargs = {"dynamo": True, "optimize": True} if dynamo else {"dynamo": False}
    torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["output"], opset_version=17 if not dynamo
                      else 18, **kwargs)
    return x
