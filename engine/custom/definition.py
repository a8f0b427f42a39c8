"""Custom layer definitions: what a user describes in the designer's custom layer dialog, stored in the model
file's ``<custom-layers>`` element.

    <custom-layer name="s2d" display-name="Space to depth (custom)" category="Custom">
      <documentation>Moves 2x2 blocks of pixels into channels.</documentation>
      <input name="input" kind="primary"/>
      <param name="block" type="uint" default="2" min="1" max="8" doc="block size"/>
      <shape>in.n, in.c * 4, in.h / 2, in.w / 2</shape>
      <python>def forward(xp, inputs, params): ...</python>
      <cuda format="fp32|nchw" launch="k_s2d&lt;16,16,1&gt;(out, in, out.c, out.h, out.w)">extern "C" ...</cuda>
    </custom-layer>

A definition is data: reading, writing, describing and checking it never runs or compiles its code
(``engine.custom.layer`` does that, with the user's consent)."""
from __future__ import annotations

import ast
import functools
import hashlib
import html
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace
from pathlib import Path

from engine.custom.launch import LaunchError, parse_launch
from engine.custom.script import RESERVED, Scope, ScriptError, check_shape_script
from engine.descriptors import PARAM_TYPES, InputDesc, InputKind, LayerDesc, ParamDesc, is_identifier
from engine.errors import LayerLabError
from engine.tensor import FORMATS, TensorFormat

PREFIX = "custom:"
DEFAULT_CATEGORY = "Custom"
COLLECTION = "custom layers (model)"
INPUT_KINDS = {"primary": InputKind.PRIMARY, "secondary": InputKind.SECONDARY, "infinite": InputKind.PRIMARY_INFINITE}
PYTHON_SIGNATURE = "forward(xp, inputs, params)"


class DefinitionError(LayerLabError):
    """A custom layer definition that is malformed: names the layer and what is wrong."""


def custom_type(name: str) -> str:
    """The layer type of custom layer ``name`` as written in the model (``custom:NAME``)."""
    return PREFIX + name


def custom_name(layer_type: str) -> str | None:
    """The custom layer name of a layer type, or None when it is not a custom layer."""
    return layer_type[len(PREFIX):] if layer_type.startswith(PREFIX) else None


def format_key(fmt: TensorFormat) -> str:
    return str(fmt)


@dataclass(frozen=True)
class CustomInput:
    name: str
    kind: str = "primary"  # primary, secondary or infinite


@dataclass(frozen=True)
class CustomParam:
    """A parameter as the user typed it: type, default and (for numbers) range as text."""

    name: str
    type: str = "float"
    default: str = "0"
    min: str = ""
    max: str = ""
    values: tuple[str, ...] = ()  # enum values
    doc: str = ""

    def desc(self, layer: str = "") -> ParamDesc:
        """The ParamDesc of this parameter; raises DefinitionError for a bad type, range or default."""
        where = f"custom layer {layer}: " if layer else ""
        if self.type not in PARAM_TYPES:
            raise DefinitionError(f"{where}parameter {self.name}: unknown type {self.type!r} (one of {', '.join(PARAM_TYPES)})")
        bounds = []
        for label, text in (("min", self.min), ("max", self.max)):
            if not text.strip() or self.type not in ("uint", "int", "float"):
                bounds.append(None)
                continue
            try:
                bounds.append(float(text))
            except ValueError:
                raise DefinitionError(f"{where}parameter {self.name}: {label} {text!r} is not a number") from None
        if self.type == "enum" and not self.values:
            raise DefinitionError(f"{where}parameter {self.name}: an enum needs its values")
        probe = ParamDesc(self.name, self.type, self.values[0] if self.type == "enum" else None, self.doc,
                          enum_values=tuple(self.values), min=bounds[0], max=bounds[1], main=True)
        try:
            return replace(probe, default=probe.parse(self.default))
        except ValueError as exc:
            raise DefinitionError(f"{where}parameter {self.name}: default {exc}") from None


@dataclass(frozen=True)
class CudaVariant:
    """The CUDA C code and launch line of one tensor format."""

    format: TensorFormat
    code: str
    launch: str


@dataclass(frozen=True)
class CustomLayerDef:
    """One custom layer: its description, shape script and implementations."""

    name: str
    display_name: str = ""
    category: str = DEFAULT_CATEGORY
    documentation: str = ""
    inputs: tuple[CustomInput, ...] = (CustomInput("input"),)
    params: tuple[CustomParam, ...] = ()
    shape: str = "in.n, in.c, in.h, in.w"
    python: str = ""
    cuda: tuple[CudaVariant, ...] = field(default=())

    # ---- identity ---------------------------------------------------------------------------------
    @property
    def type(self) -> str:
        return custom_type(self.name)

    @property
    def title(self) -> str:
        return self.display_name or self.name

    def digest(self) -> str:
        """SHA-256 of the definition's canonical XML: what consent and compiled kernels are keyed by."""
        return self._digest

    @functools.cached_property
    def _digest(self) -> str:
        return hashlib.sha256(self.to_xml().encode("utf-8")).hexdigest()

    def cuda_for(self, fmt: TensorFormat) -> CudaVariant | None:
        return next((v for v in self.cuda if v.format == fmt), None)

    @property
    def has_code(self) -> bool:
        return bool(self.python.strip()) or any(v.code.strip() for v in self.cuda)

    # ---- what it can run in ---------------------------------------------------------------------------
    def runs_in(self) -> dict[str, list[TensorFormat]]:
        """Formats the layer runs in, by backend: the Python code serves every format on both backends
        (on the GPU where no CUDA variant of the format exists); CUDA variants their own format."""
        cuda = [v.format for v in self.cuda if v.code.strip()]
        python = bool(self.python.strip())
        return {"numpy": list(FORMATS) if python else [],
                "cupy": [f for f in FORMATS if python or f in cuda]}

    def runs_in_text(self) -> str:
        """In words, for the dialog and the documentation."""
        ways = self.runs_in()
        if not ways["numpy"] and not ways["cupy"]:
            return "No implementation yet: add Python code (CPU) or a CUDA kernel (GPU)."
        cpu = ("every format (the Python code)" if ways["numpy"] else "nothing: add Python code to run on the CPU")
        gpu_parts = [f"{f}: CUDA kernel" for f in FORMATS if self.cuda_for(f) is not None and self.cuda_for(f).code.strip()]
        if self.python.strip():
            gpu_parts.append("other formats: the Python code on CuPy" if gpu_parts else "every format: the Python code on CuPy")
        return f"CPU (NumPy): {cpu}. GPU (CuPy): {'; '.join(gpu_parts) or 'nothing'}."

    # ---- checks (no code is run or compiled) -------------------------------------------------------------
    def scope(self, has_out: bool = False) -> Scope:
        infinite = any(i.kind == "infinite" for i in self.inputs)
        return Scope(None if infinite else len(self.inputs), {p.name: p.type for p in self.params}, has_out)

    def problems(self) -> list[tuple[str, str]]:
        """Every problem of the definition as (field, message), field one of ``description`` (name, inputs,
        parameters), ``shape``, ``code`` (no implementation), ``python`` and ``cuda <format>``. Empty when it is
        complete and valid."""
        out: list[tuple[str, str]] = []
        try:
            self.validate_structure()
        except DefinitionError as exc:
            out.append(("description", str(exc).removeprefix(f"custom layer {self.name}: ")))
        try:
            check_shape_script(self.shape, self.scope())
        except ScriptError as exc:
            out.append(("shape", f"shape script: {exc}"))
        if not self.has_code:
            out.append(("code", "at least one implementation is needed: Python code (CPU) or a CUDA kernel (GPU)"))
        if self.python.strip():
            problem = python_problem(self.python)
            if problem:
                out.append(("python", problem))
        for v in self.cuda:
            if not v.code.strip():
                continue
            try:
                spec = parse_launch(v.launch, self.scope(has_out=True))
            except LaunchError as exc:
                out.append((f"cuda {v.format}", f"launch line: {exc}"))
                continue
            if spec.block_problem():
                out.append((f"cuda {v.format}", f"launch line: {spec.block_problem()}"))
            if spec.kernel not in v.code:
                out.append((f"cuda {v.format}", f"launch line: kernel {spec.kernel!r} does not appear in the code"))
        return out

    def validate_structure(self) -> None:
        """Raise DefinitionError for a bad name, input or parameter (what a model file must get right)."""
        where = f"custom layer {self.name}: "
        if not is_identifier(self.name):
            raise DefinitionError(f"custom layer name {self.name!r} is not valid: use letters, digits and '_', "
                                  "not starting with a digit")
        if not self.inputs:
            raise DefinitionError(where + "it needs at least one input")
        names: set[str] = set()
        for i, inp in enumerate(self.inputs):
            if not is_identifier(inp.name):
                raise DefinitionError(where + f"input name {inp.name!r} is not valid")
            if inp.kind not in INPUT_KINDS:
                raise DefinitionError(where + f"input {inp.name}: kind {inp.kind!r} is not one of {', '.join(INPUT_KINDS)}")
            if inp.kind == "infinite" and i != len(self.inputs) - 1:
                raise DefinitionError(where + f"input {inp.name}: only the last input can be infinite")
            if inp.name in names:
                raise DefinitionError(where + f"two inputs are named {inp.name}")
            names.add(inp.name)
        pnames: set[str] = set()
        for p in self.params:
            if not is_identifier(p.name) or p.name in RESERVED:
                raise DefinitionError(where + f"parameter name {p.name!r} is not valid (an identifier other than "
                                      f"{', '.join(RESERVED)})")
            if p.name in pnames:
                raise DefinitionError(where + f"two parameters are named {p.name}")
            pnames.add(p.name)
            p.desc(self.name)
        seen = set()
        for v in self.cuda:
            if v.format in seen:
                raise DefinitionError(where + f"two CUDA variants for format {v.format}")
            seen.add(v.format)

    # ---- descriptor ---------------------------------------------------------------------------------------
    def descriptor(self) -> LayerDesc:
        """The LayerDesc the palette, parameter window, docs browser and type checker read."""
        self.validate_structure()
        summary = (self.documentation.strip().splitlines() or [f"Custom layer {self.name}"])[0]
        return LayerDesc(
            name=self.type, display_name=self.title, summary=summary,
            categories=(self.category.strip() or DEFAULT_CATEGORY,), documentation=self._doc_html(),
            inputs=tuple(InputDesc(i.name, INPUT_KINDS[i.kind]) for i in self.inputs),
            params=tuple(p.desc(self.name) for p in self.params), formats=FORMATS, collection=COLLECTION)

    def _doc_html(self) -> str:
        e = html.escape
        doc = "".join(f"<p>{e(par)}</p>" for par in self.documentation.strip().split("\n\n") if par.strip())
        impls = []
        if self.python.strip():
            impls.append("Python code (CPU, and GPU formats without a CUDA kernel)")
        impls += [f"CUDA kernel for {v.format}: <code>{e(v.launch)}</code>" for v in self.cuda if v.code.strip()]
        return (f"{doc}<p>A custom layer defined in this model (type <code>{e(self.type)}</code>).</p>"
                f"<p><b>Output shape</b>: <code>{e(self.shape)}</code></p>"
                f"<p><b>Implementations</b>:</p><ul>{''.join(f'<li>{i}</li>' for i in impls) or '<li>none</li>'}</ul>"
                f"<p>{e(self.runs_in_text())}</p>")

    # ---- XML -------------------------------------------------------------------------------------------
    def to_element(self) -> ET.Element:
        attrs = {"name": self.name}
        if self.display_name:
            attrs["display-name"] = self.display_name
        attrs["category"] = self.category
        root = ET.Element("custom-layer", attrs)
        if self.documentation.strip():
            ET.SubElement(root, "documentation").text = self.documentation
        for i in self.inputs:
            ET.SubElement(root, "input", {"name": i.name, "kind": i.kind})
        for p in self.params:
            pa = {"name": p.name, "type": p.type, "default": p.default}
            for k, v in (("min", p.min), ("max", p.max), ("values", ",".join(p.values)), ("doc", p.doc)):
                if v:
                    pa[k] = v
            ET.SubElement(root, "param", pa)
        ET.SubElement(root, "shape").text = self.shape if self.shape.strip() else None
        if self.python.strip():
            ET.SubElement(root, "python").text = self.python
        for v in self.cuda:
            ET.SubElement(root, "cuda", {"format": format_key(v.format), "launch": v.launch}).text = (
                v.code if v.code.strip() else None)
        return root

    def to_xml(self) -> str:
        """Canonical XML text (what the model stores; parsing it gives this definition back)."""
        return ET.tostring(self.to_element(), encoding="unicode")


def _text(elem: ET.Element | None) -> str:
    return "" if elem is None or elem.text is None else elem.text


def normalize_code(text: str) -> str:
    """Line ends as XML keeps them (``\\n``), so a definition round-trips exactly."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def from_element(elem: ET.Element) -> CustomLayerDef:
    """The definition of a ``<custom-layer>`` element; raises DefinitionError for a malformed one."""
    if elem.tag != "custom-layer":
        raise DefinitionError(f"expected <custom-layer>, found <{elem.tag}>")
    name = elem.get("name", "")
    where = f"custom layer {name}: "
    inputs, params, cuda = [], [], []
    for child in elem:
        if child.tag == "input":
            inputs.append(CustomInput(child.get("name", ""), child.get("kind", "primary")))
        elif child.tag == "param":
            values = tuple(v.strip() for v in child.get("values", "").split(",") if v.strip())
            params.append(CustomParam(child.get("name", ""), child.get("type", "float"), child.get("default", ""),
                                      child.get("min", ""), child.get("max", ""), values, child.get("doc", "")))
        elif child.tag == "cuda":
            try:
                fmt = TensorFormat.parse(child.get("format", ""))
            except LayerLabError as exc:
                raise DefinitionError(where + f"CUDA variant: {exc}") from None
            cuda.append(CudaVariant(fmt, normalize_code(_text(child)), child.get("launch", "")))
        elif child.tag not in ("documentation", "shape", "python"):
            raise DefinitionError(where + f"unknown element <{child.tag}>")
    if elem.find("shape") is None:
        raise DefinitionError(where + "it has no <shape> script")
    defn = CustomLayerDef(name, elem.get("display-name", ""), elem.get("category", DEFAULT_CATEGORY),
                          normalize_code(_text(elem.find("documentation"))), tuple(inputs), tuple(params),
                          _text(elem.find("shape")), normalize_code(_text(elem.find("python"))), tuple(cuda))
    defn.validate_structure()
    return defn


def parse_definition(text: str) -> CustomLayerDef:
    """The definition of a ``<custom-layer>`` XML text (as the model stores it); raises DefinitionError."""
    from engine.errors import ModelFileError  # noqa: PLC0415
    from engine.layer_xml import parse_xml  # noqa: PLC0415 - the safe parser

    try:
        root, _ = parse_xml(text.encode("utf-8"), "custom layer definition")
    except ModelFileError as exc:
        raise DefinitionError(str(exc)) from None
    return from_element(root)


def python_problem(code: str) -> str | None:
    """Why the Python code cannot be used (syntax error with its line, no ``forward`` function), or None.
    The code is only parsed (``ast``), never compiled or run."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return f"Python code, line {exc.lineno}: {exc.msg}" if exc.lineno else f"Python code: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes; absurdly deep nesting
        return f"Python code: cannot be parsed ({type(exc).__name__}: {exc})"
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "forward"]
    if not fns:
        return f"Python code: define {PYTHON_SIGNATURE} at the top level, returning the output (N, C, H, W)"
    if len(fns[0].args.args) != 3:
        return f"Python code, line {fns[0].lineno}: forward takes 3 arguments: xp, inputs, params"
    return None


def write_definition_file(defn: CustomLayerDef, path: str | os.PathLike[str]) -> None:
    """Write one definition as an XML file (to share it between models)."""
    Path(path).write_text('<?xml version="1.0" encoding="utf-8"?>\n' + defn.to_xml() + "\n", encoding="utf-8")


def read_definition_file(path: str | os.PathLike[str]) -> CustomLayerDef:
    """Read a definition file; raises DefinitionError naming the file and the reason. Nothing is run."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DefinitionError(f"{p}: cannot read the custom layer definition ({exc})") from None
    try:
        return parse_definition(text)
    except LayerLabError as exc:
        raise DefinitionError(f"{p}: {exc}") from None
