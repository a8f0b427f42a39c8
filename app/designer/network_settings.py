"""Tools > Network Settings: how the designer runs a model (backend, tensor format, iterations, warm-up,
seed, weights folder, an input file per input layer, profiling, fusing rules). The values are stored
in the model's settings (saved in the ``.lnet`` file) as one undoable step; see app.run_config for the
keys and their defaults."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6 import QtCore, QtWidgets

from app.run_config import DEFAULTS, FORMAT_CHOICES, INPUT_PREFIX, input_layers, setting
from engine.backends import BACKENDS
from engine.errors import LayerLabError
from engine.model import Model
from engine.run import AUTO, DEFAULT_FORMATS, normalize_format

INPUT_FILTER = "Images and tensors (*.png *.jpg *.jpeg *.bmp *.tif *.tiff *.npy);;All files (*)"
FORMAT_TEXT = {AUTO: f"Auto ({DEFAULT_FORMATS['cupy'].upper()} on CuPy, {DEFAULT_FORMATS['numpy'].upper()} on NumPy)"}
BACKEND_TEXT = {"auto": "Auto (CuPy when a GPU is usable, else NumPy)", "numpy": "NumPy (CPU)", "cupy": "CuPy (GPU)"}


class PathEdit(QtWidgets.QWidget):
    """A line edit with Browse… (a file or a folder) and a clear button; empty means "none"."""

    def __init__(self, placeholder: str, folder: bool, start_dir: str, file_filter: str = "") -> None:
        super().__init__()
        self.folder, self.start_dir, self.file_filter = folder, start_dir, file_filter
        self.edit = QtWidgets.QLineEdit()
        self.edit.setPlaceholderText(placeholder)
        self.edit.setClearButtonEnabled(True)
        self.browse = QtWidgets.QPushButton("Browse…")
        self.browse.clicked.connect(self._browse)
        lay = QtWidgets.QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.edit, 1)
        lay.addWidget(self.browse)

    def _browse(self) -> None:
        start = self.edit.text() or self.start_dir
        if self.folder:
            path = QtWidgets.QFileDialog.getExistingDirectory(self, "Weights folder", start)
        else:
            path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Input file", start, self.file_filter)
        if path:
            self.edit.setText(path)

    def text(self) -> str:
        return self.edit.text().strip()

    def set_text(self, text: str) -> None:
        self.edit.setText(text)


class NetworkSettingsDialog(QtWidgets.QDialog):
    """Edits the run settings of ``model``; ``apply()`` (called on OK) writes the changed ones."""

    def __init__(self, model: Model, model_path: str | None = None, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.setWindowTitle(f"Network Settings — {model.name}")
        self.setMinimumWidth(560)
        self.resize(640, 10)
        start = str(Path(model_path).parent) if model_path else str(Path.cwd())

        self.backend = QtWidgets.QComboBox()
        for b in BACKENDS:
            self.backend.addItem(BACKEND_TEXT.get(b, b), b)
        self.format = QtWidgets.QComboBox()
        for f in FORMAT_CHOICES:
            self.format.addItem(FORMAT_TEXT.get(f, f.upper().replace(" ", " · ")), f)
        self.iterations = QtWidgets.QSpinBox()
        self.iterations.setRange(1, 1_000_000)
        self.warmup = QtWidgets.QSpinBox()
        self.warmup.setRange(0, 100_000)
        self.seed = QtWidgets.QSpinBox()
        self.seed.setRange(0, 2**31 - 1)
        self.weights = PathEdit("none: seeded random weights", True, start)
        self.input_layout = QtWidgets.QComboBox()
        self.input_layout.addItem("NCHW", "nchw")
        self.input_layout.addItem("NHWC", "nhwc")
        self.profiling = QtWidgets.QCheckBox("Per-layer profiling")
        self.profiling.setToolTip("Time every layer (off: time whole iterations only, without per-layer synchronisation)")
        self.fusing = QtWidgets.QCheckBox("Apply fusing rules")
        self.fusing.setToolTip("Apply the plugins' and the model's enabled fusing rules when the network is built")
        self.inputs: dict[str, PathEdit] = {}

        run_box = QtWidgets.QGroupBox("Run")
        form = QtWidgets.QFormLayout(run_box)
        for label, widget in (("Backend:", self.backend), ("Tensor format:", self.format),
                              ("Iterations:", self.iterations), ("Warm-up iterations:", self.warmup),
                              ("Seed:", self.seed), ("", self.profiling), ("", self.fusing)):
            form.addRow(label, widget)
        self.tf32 = QtWidgets.QCheckBox("fp32 on the GPU may use TF32 tensor cores")
        self.tf32.setToolTip("Faster fp32 convolutions on the GPU (products rounded to 10-bit mantissas, about 1e-3 "
                             "relative error); off: strict float32, as on the CPU")
        form.addRow("", self.tf32)
        self.device = QtWidgets.QSpinBox()
        self.device.setRange(-1, 63)
        self.device.setSpecialValueText("Default (GPU 0)")
        self.device.setToolTip("The GPU the CuPy backend runs on (its CUDA ordinal, as nvidia-smi lists them)")
        form.addRow("GPU device:", self.device)
        data_box = QtWidgets.QGroupBox("Data")
        dform = QtWidgets.QFormLayout(data_box)
        dform.addRow("Weights folder:", self.weights)
        names = input_layers(model)
        for name in names:
            edit = PathEdit("none: seeded random tensor", False, start, INPUT_FILTER)
            edit.setToolTip(f"Image or .npy file for input layer {name}; empty: a seeded random tensor of its dimensions")
            self.inputs[name] = edit
            dform.addRow(f"Input “{name}”:", edit)
        if not names:
            dform.addRow("Inputs:", QtWidgets.QLabel("the model has no input layer"))
        dform.addRow(".npy layout:", self.input_layout)
        note = QtWidgets.QLabel("Relative paths are relative to the model file's folder. The settings are saved "
                                "with the model.")
        note.setWordWrap(True)
        note.setStyleSheet("color: #9aa4b0;")
        self.buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Ok
                                                  | QtWidgets.QDialogButtonBox.StandardButton.Cancel
                                                  | QtWidgets.QDialogButtonBox.StandardButton.RestoreDefaults)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.buttons.button(QtWidgets.QDialogButtonBox.StandardButton.RestoreDefaults).clicked.connect(self.restore_defaults)
        lay = QtWidgets.QVBoxLayout(self)
        lay.addWidget(run_box)
        lay.addWidget(data_box)
        lay.addWidget(note)
        lay.addWidget(self.buttons)
        self.load()

    @staticmethod
    def _select(combo: QtWidgets.QComboBox, value: str) -> None:
        i = combo.findData(value)
        combo.setCurrentIndex(i if i >= 0 else 0)

    @staticmethod
    def _int(text: str, default: str) -> int:
        try:
            return int(text)
        except ValueError:
            return int(default)

    def _show(self, get: Callable[[str], str]) -> None:
        self._select(self.backend, get("backend").strip().lower())
        try:
            fmt = normalize_format(get("format"))
        except LayerLabError:
            fmt = DEFAULTS["format"]
        self._select(self.format, fmt)
        self.iterations.setValue(max(1, self._int(get("iterations"), DEFAULTS["iterations"])))
        self.warmup.setValue(max(0, self._int(get("warmup"), DEFAULTS["warmup"])))
        self.seed.setValue(max(0, self._int(get("seed"), DEFAULTS["seed"])))
        self.weights.set_text(get("weights"))
        self._select(self.input_layout, get("input_layout").strip().lower())
        self.profiling.setChecked(get("profiling").strip().lower() != "off")
        self.fusing.setChecked(get("fusing").strip().lower() != "off")
        self.tf32.setChecked(get("tf32").strip().lower() == "on")
        self.device.setValue(self._int(get("device").strip() or "-1", "-1"))
        for name, edit in self.inputs.items():
            edit.set_text(get(INPUT_PREFIX + name))

    def load(self) -> None:
        """Show the model's current settings."""
        self._show(lambda key: setting(self.model, key))

    def restore_defaults(self) -> None:
        self._show(lambda key: DEFAULTS.get(key, ""))

    def values(self) -> dict[str, str]:
        """The settings as the dialog shows them (empty paths: no file)."""
        out = {"backend": self.backend.currentData(), "format": self.format.currentData(),
               "iterations": str(self.iterations.value()), "warmup": str(self.warmup.value()),
               "seed": str(self.seed.value()), "weights": self.weights.text(),
               "input_layout": self.input_layout.currentData(),
               "profiling": "on" if self.profiling.isChecked() else "off",
               "fusing": "on" if self.fusing.isChecked() else "off", "tf32": "on" if self.tf32.isChecked() else "off",
               "device": "" if self.device.value() < 0 else str(self.device.value())}
        for name, edit in self.inputs.items():
            out[INPUT_PREFIX + name] = edit.text()
        return out

    def apply(self) -> list[str]:
        """Write the changed settings to the model as one undo step; returns the changed keys.

        A value equal to the default of a key the model does not set stays unset; an empty path removes
        the key; input files of layers that no longer exist are removed."""
        changes: dict[str, str | None] = {}
        for key, value in self.values().items():
            current = self.model.settings.get(key)
            default = DEFAULTS.get(key, "")
            if current is None and value == default:
                continue
            new = None if (value == "" and key not in ("format", "backend")) else value
            if new != current:
                changes[key] = new
        for key in self.model.settings:
            if key.startswith(INPUT_PREFIX) and key[len(INPUT_PREFIX):] not in self.inputs:
                changes[key] = None
        if changes:
            with self.model.macro("Network settings"):
                for key, value in changes.items():
                    self.model.set_setting(key, value)
        return list(changes)

    def accept(self) -> None:  # noqa: D102 (Qt API)
        self.apply()
        super().accept()

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802 (Qt API)
        return QtCore.QSize(620, super().sizeHint().height())
