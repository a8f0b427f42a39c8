"""Standalone project export: a folder holding a Python package that builds and runs the network on the
LayerLab engine, outside LayerLab (the counterpart of a C++ project generator, for Python).

    <folder>/
      pyproject.toml            (optional) pip install <folder>: numpy, defusedxml, opencv-python-headless
      README.md
      <package>/
        __init__.py             exports the builder (_vendor_path.py first puts _vendor on sys.path)
        network.py              build_model() (the layers, spelt out) and the builder function
        __main__.py             (optional) command-line sample: python -m <package> --input ... --output ...
        weights/                <layer>_<weight>.npy for every weight of the network
        _vendor/engine/         a copy of the LayerLab engine
        _vendor/<plugins>/      a copy of the plugin collections the network uses

The package needs nothing from this repository: the engine and the collections are copied into it."""
from __future__ import annotations

import importlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from engine.custom.exports import custom_layer_lines
from engine.export.common import ExportError, ExportResult, build_network, host_weights, python_identifier
from engine.model import Model
from engine.registry import Registry
from engine.run import normalize_format
from engine.templates import expand_templates, has_instances
from engine.weights import WeightsSource, save_weights

ENGINE_DIR = Path(__file__).resolve().parents[1]
DEPENDENCIES = ("numpy>=1.24", "defusedxml>=0.7", "opencv-python-headless>=4.8")
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "qt.py")
_MARKER = "_vendor"


@dataclass(frozen=True)
class ProjectOptions:
    """``builder``: name of the function that builds the network; ``package``: the package name
    (default: the network name when it is a Python identifier, else ``network``); ``sample``: write the
    command-line sample; ``pyproject``: write a pyproject.toml; ``tensor_format``: the builder's default
    tensor format (``auto``: the backend's default, engine.run.DEFAULT_FORMATS); ``fusing``: the builder's
    default for fusing rules ('on' or 'off')."""

    builder: str = "build_network"
    package: str | None = None
    sample: bool = True
    pyproject: bool = True
    tensor_format: str = "auto"
    fusing: str = "on"


def _collections(model: Model, registry: Registry, fused: Model) -> list[str]:
    """Collections the network needs: those of its layer types (before and after fusing), of its
    activations, and those that register enabled fusing rules."""
    names: list[str] = []
    for m in (model, fused):
        for spec in m.layers.values():
            desc = registry.find_layer(spec.type)
            if desc is not None:
                names.append(desc.collection)
            if spec.activation and spec.activation != "none":
                adesc = registry.find_activation(spec.activation)
                if adesc is not None:
                    names.append(adesc.collection)
    names += [r.collection for r in registry.fusing_rules if r.enabled]
    return list(dict.fromkeys(n for n in names if n))


def _copy_module(module_name: str, vendor: Path) -> None:
    """Copy an importable module or package (and its parent packages' __init__ files) under ``vendor``."""
    module = importlib.import_module(module_name)
    file = Path(module.__file__ or "")
    parts = module_name.split(".")
    for i in range(1, len(parts)):  # parent packages
        parent = importlib.import_module(".".join(parts[:i]))
        init = Path(parent.__file__ or "")
        target = vendor.joinpath(*parts[:i])
        target.mkdir(parents=True, exist_ok=True)
        if init.name == "__init__.py":
            shutil.copy2(init, target / "__init__.py")
    if file.name == "__init__.py":
        shutil.copytree(file.parent, vendor.joinpath(*parts), ignore=_IGNORE, dirs_exist_ok=True)
    else:
        vendor.joinpath(*parts[:-1]).mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, vendor.joinpath(*parts[:-1], f"{parts[-1]}.py"))


def _vendor(collections: list[str], registry: Registry, vendor: Path) -> tuple[list[str], bool]:
    """Copy the engine and the collections; returns (plugin module names, whether folder plugins exist)."""
    shutil.copytree(ENGINE_DIR, vendor / "engine", ignore=_IGNORE, dirs_exist_ok=True)
    modules, folder_plugins = [], False
    for name in collections:
        info = registry.plugins.get(name)
        if info is None:
            raise ExportError(f"collection {name!r} is not loaded, so it cannot be copied into the project")
        source = Path(info.source)
        if source.exists():  # a plugin loaded from a folder (--plugins DIR)
            dest = vendor / "folder_plugins" / source.name
            if source.is_dir():
                shutil.copytree(source, dest, ignore=_IGNORE, dirs_exist_ok=True)
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, dest)
            folder_plugins = True
            continue
        try:
            _copy_module(info.source, vendor)
        except ImportError as exc:
            raise ExportError(f"collection {name!r} (module {info.source}) cannot be copied: {exc}") from None
        modules.append(info.source)
    return modules, folder_plugins


def _layer_lines(model: Model) -> list[str]:
    lines = custom_layer_lines(model)
    for spec in model.layers.values():
        args = [repr(spec.type), repr(spec.name)]
        if spec.params:
            args.append(f"params={dict(spec.params)!r}")
        if spec.inputs:
            args.append(f"inputs={list(spec.inputs)!r}")
        if spec.activation and spec.activation != "none":
            args.append(f"activation={spec.activation!r}")
        if spec.act_coefs:
            args.append(f"act_coefs={dict(spec.act_coefs)!r}")
        if spec.permanent:
            args.append("permanent=True")
        lines.append(f"    m.add_layer({', '.join(args)})")
    for rule in model.fusing_rules:
        lines.append(f"    m.fusing_rules.append(FusingRuleSpec({rule.text!r}, enabled={rule.enabled!r}))")
    return lines


def _pep440(version: str) -> str:
    import re  # noqa: PLC0415

    return version if re.fullmatch(r"\d+(\.\d+)*", version or "") else "0.1.0"


def export_project(model: Model, registry: Registry, folder: str | Path, options: ProjectOptions = ProjectOptions(),
                   weights: WeightsSource | None = None, seed: int = 0) -> ExportResult:
    """Write the project (see the module documentation) into ``folder``; weights from ``weights``
    (default: the seeded random weights of ``seed``, the ones ``layerlab infer --seed`` uses)."""
    if not python_identifier(options.builder):
        raise ExportError(f"builder name {options.builder!r} is not a Python identifier: use letters, digits and '_', "
                          "not starting with a digit, and not a Python keyword")
    package = options.package or (model.name if python_identifier(model.name) else "network")
    if not python_identifier(package):
        raise ExportError(f"package name {package!r} is not a Python identifier")
    if package in ("engine", "plugins", "app", "canvas", "resources") or options.builder in ("registry", "build_model"):
        raise ExportError(f"package {package!r} / builder {options.builder!r}: the name is taken by LayerLab itself")
    try:
        normalize_format(options.tensor_format)
    except Exception as exc:
        raise ExportError(f"tensor format {options.tensor_format!r}: {exc}") from None
    if has_instances(model):  # the project spells out plain layers: template instances are expanded
        model = expand_templates(model, registry)
    root = Path(folder)
    pkg = root / package
    if pkg.exists():
        if not (pkg / _MARKER).is_dir():
            raise ExportError(f"{pkg} exists and was not written by a LayerLab project export: choose another folder")
        shutil.rmtree(pkg)
    fused = build_network(model, registry, None, seed, options.fusing).model
    net = build_network(model, registry, weights, seed, "off")  # every layer's own weights, by its own name
    (pkg / "weights").mkdir(parents=True)
    arrays = {n: host_weights(net, n) for n in net.order}
    save_weights(pkg / "weights", {n: ws for n, ws in arrays.items() if ws})
    modules, folder_plugins = _vendor(_collections(model, registry, fused), registry, pkg / _MARKER)
    fields = dict(name=model.name, version=model.version, package=package, builder=options.builder,
                  fmt=options.tensor_format, fusing=options.fusing, modules=tuple(modules),
                  folder_plugins=folder_plugins, layers="\n".join(_layer_lines(model)),
                  model_names="FusingRuleSpec, Model" if model.fusing_rules else "Model")
    files = [pkg / "__init__.py", pkg / "network.py", root / "README.md"]
    (pkg / "__init__.py").write_text(_INIT.format(**fields), encoding="utf-8")
    (pkg / "_vendor_path.py").write_text(_VENDOR_PATH, encoding="utf-8")
    (pkg / "network.py").write_text(_NETWORK.format(**fields), encoding="utf-8")
    if options.sample:
        (pkg / "__main__.py").write_text(_MAIN.format(**fields), encoding="utf-8")
        files.append(pkg / "__main__.py")
    if options.pyproject:
        (root / "pyproject.toml").write_text(_PYPROJECT.format(
            version=_pep440(model.version), deps=", ".join(f'"{d}"' for d in DEPENDENCIES),
            scripts=f'\n[project.scripts]\n{package} = "{package}.__main__:main"\n' if options.sample else "",
            **{k: v for k, v in fields.items() if k != "version"}), encoding="utf-8")
        files.append(root / "pyproject.toml")
    (root / "README.md").write_text(_README.format(
        run=_README_RUN.format(**fields) if options.sample else "",
        install=_README_INSTALL.format(**fields) if options.pyproject else _README_NO_INSTALL.format(**fields),
        deps=", ".join(d.split(">")[0] for d in DEPENDENCIES), **fields), encoding="utf-8")
    n_weights = sum(1 for ws in arrays.values() for _ in ws)
    summary = (f"wrote the project {root} (package {package}, builder {options.builder}(), {len(model.layers)} layers, "
               f"{n_weights} weight files{', command-line sample' if options.sample else ''}"
               f"{', pyproject.toml' if options.pyproject else ''})")
    return ExportResult("project", root, files, [], summary)


_INIT = '''"""The LayerLab network {name!r} (version {version}) as a Python package, generated by LayerLab.

    from {package} import {builder}
    net = {builder}()                  # weights from the package's weights folder
    outputs = net.infer({{"input": x}})  # x: float32 numpy array N x C x H x W, by input layer name

It runs on a copy of the LayerLab engine and of the plugin collections the network uses (in _vendor),
with numpy, defusedxml and, for images and video, opencv-python-headless."""
from __future__ import annotations

from . import _vendor_path  # noqa: F401 (first: puts the vendored engine and plugins on sys.path)
from .network import TENSOR_FORMAT, WEIGHTS, {builder}, build_model, registry

__all__ = ["TENSOR_FORMAT", "WEIGHTS", "{builder}", "build_model", "registry"]
'''

_VENDOR_PATH = '''"""Puts the copies of the LayerLab engine and plugin collections (in _vendor) first on sys.path."""
from __future__ import annotations

import sys
from pathlib import Path

VENDOR = str(Path(__file__).with_name("_vendor"))
if VENDOR not in sys.path:
    sys.path.insert(0, VENDOR)
'''

_NETWORK = '''"""The network {name!r} (version {version}): its layers, and the function that builds it on the LayerLab
engine. Generated by LayerLab; edit freely (re-exporting overwrites this package)."""
from __future__ import annotations

from pathlib import Path

from engine.errors import PluginError
from engine.model import {model_names}
from engine.network import Network
from engine.plugins import load_module_plugin, load_plugin_dir
from engine.registry import Registry
from engine.run import RunSpec, open_network

WEIGHTS = Path(__file__).with_name("weights")
TENSOR_FORMAT = {fmt!r}
FUSING = {fusing!r}
PLUGIN_MODULES = {modules!r}
FOLDER_PLUGINS = {folder_plugins!r}


def registry() -> Registry:
    """The layers and activations the network uses: the plugin collections copied into this package."""
    reg = Registry()
    for module in PLUGIN_MODULES:
        load_module_plugin(reg, module)
    if FOLDER_PLUGINS:
        load_plugin_dir(reg, Path(__file__).with_name("_vendor") / "folder_plugins")
    if reg.failures:
        raise PluginError("; ".join(str(f) for f in reg.failures))
    return reg


def build_model() -> Model:
    """The network design: layers (type, name, parameters, inputs, activation), as drawn in LayerLab."""
    m = Model({name!r}, {version!r})
{layers}
    m.clear_undo()
    return m


def {builder}(weights: str | Path | None = WEIGHTS, backend: str = "auto", tensor_format: str = TENSOR_FORMAT,
        fusing: str = FUSING, seed: int = 0) -> Network:
    """The network {name!r}, ready to run.

    ``weights``: a weights folder (<layer>_<weight>.npy files; default the package's), or None for seeded
    random weights; ``backend``: auto, numpy or cupy; ``tensor_format``: fp32|fp16 and nchw|nhwc, or auto (fp16 nhwc
    on cupy, fp32 nhwc on numpy); ``fusing``: on or off (fusing rules); ``seed``: of random weights and of inputs
    not given. Built by the engine's run path (engine.run.open_network), as layerlab builds it."""
    spec = RunSpec(backend=backend, format=tensor_format, weights=None if weights is None else str(weights), seed=seed,
                   fusing=fusing)
    return open_network(build_model(), spec, registry())
'''

_MAIN = '''"""Command-line sample: run the network {name!r} on input files and write its outputs.

    python -m {package} --input input=photo.png --output output=result.png --iterations 10

Inputs are images (PNG/JPG...), .npy tensors or videos (their first frame); outputs .npy or images. Inputs not
given are seeded random tensors. It runs through the engine's run path (engine.run), as ``layerlab infer`` does."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

from engine.errors import LayerLabError
from engine.io import write_output
from engine.run import RunSpec, load_inputs, parse_named, resolve_names, run_timed

from . import TENSOR_FORMAT, WEIGHTS, {builder}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="{package}", description="Run the network {name!r} and write its outputs.")
    parser.add_argument("--input", "-i", action="append", metavar="[NAME=]PATH",
                        help="image, .npy or video (its first frame) for input layer NAME")
    parser.add_argument("--input-layout", choices=("nchw", "nhwc"), default="nchw", help="layout of .npy inputs")
    parser.add_argument("--output", "-o", action="append", metavar="[NAME=]PATH",
                        help="write output layer NAME to PATH (.npy, .png, .jpg)")
    parser.add_argument("--format", "-f", nargs="+", default=TENSOR_FORMAT.split(), metavar="TOKEN",
                        help=f"tensor format: fp32|fp16 and nchw|nhwc, or auto (default {{TENSOR_FORMAT}})")
    parser.add_argument("--iterations", "-n", type=int, default=1, help="timed iterations (default 1)")
    parser.add_argument("--weights", "-w", default=str(WEIGHTS), metavar="DIR", help="weights folder (default: the package's)")
    parser.add_argument("--backend", "-b", default="auto", choices=("auto", "numpy", "cupy"))
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs used when none is given")
    args = parser.parse_args(argv)
    try:
        spec = RunSpec(backend=args.backend, format=" ".join(args.format), iterations=args.iterations, warmup=0,
                       weights=args.weights, seed=args.seed, inputs=tuple(parse_named(args.input)),
                       input_layout=args.input_layout, profiling=False).check()
        net = {builder}(spec.weights, spec.backend, spec.format, seed=spec.seed)
        load_inputs(net, spec).close()
        times = run_timed(net, spec).network_times_ms  # the engine's own run path, as layerlab infer
        print(f"network {{net.model_name}}: backend {{net.backend.name}}, format {{net.fmt}}; average time per iteration "
              f"{{np.mean(times):.3f}} ms over {{spec.iterations}} iteration(s)")
        for name, path in resolve_names(parse_named(args.output), net.output_names, "output"):
            for written in write_output(path, net.output(name)):
                print(f"wrote {{name}} to {{written}}")
        for name in net.output_names:
            y = net.output(name)
            shape = "x".join(map(str, y.shape))
            print(f"output {{name}}: {{shape}} min {{y.min():.4g}} max {{y.max():.4g}} mean {{y.mean():.4g}}")
    except LayerLabError as exc:
        print(f"{package}: error: {{exc}}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
'''

_PYPROJECT = '''[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{package}"
version = "{version}"
description = "The LayerLab network {name} as a Python package (generated by LayerLab)"
readme = "README.md"
requires-python = ">=3.10"
dependencies = [{deps}]
{scripts}
[tool.setuptools.packages.find]
include = ["{package}*"]
namespaces = true

[tool.setuptools.package-data]
"*" = ["*.npy"]
'''

_README = '''# {name} {version}

The LayerLab network `{name}`, exported as a Python package: `{package}/network.py` holds the layers
(`build_model()`) and the builder `{builder}()`; `{package}/weights/` its weights; `{package}/_vendor/` a
copy of the LayerLab engine and of the plugin collections the network uses. It needs {deps}.

{install}
```python
from {package} import {builder}

net = {builder}()                      # options: weights=..., backend="cupy", tensor_format="fp16 nhwc"
outputs = net.infer({{"input": x}})     # float32 numpy arrays N x C x H x W, by layer name
```
{run}'''

_README_INSTALL = '''Install it (in a virtual environment): `pip install .` in this folder; or use it in place with this
folder on `PYTHONPATH`.
'''

_README_NO_INSTALL = '''Use it with this folder on `PYTHONPATH` (or copy `{package}/` next to your code).
'''

_README_RUN = '''
Command-line sample (inputs: images or .npy; outputs: .npy or images):

```
python -m {package} --input input=photo.png --output output=result.png --iterations 10 --format fp32 nchw
```
'''

