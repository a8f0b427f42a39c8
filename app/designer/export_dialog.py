"""File > Export: the export dialog (ONNX model, PyTorch module, standalone project, preprocessed model),
the result dialog (success or each error and warning, with a Details section holding the equivalent
command line), and ``add_export_menu`` which adds the File > Export submenu to a main window.

The dialog only collects an ``app.services.export.ExportRequest``; the export itself is the same code the
``layerlab export`` command runs (``run_export``), in a background thread on a copy of the model, so the
designer stays responsive (an export builds the network and its weights, which can take seconds)."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from app.services.export import DEFAULT_FUSING, KINDS, TITLES, ExportRequest, run_export
from engine.errors import LayerLabError
from engine.model import Model
from engine.registry import Registry
from engine.weights import is_weights_path

FORMATS = ("fp32 nchw", "fp32 nhwc", "fp16 nchw", "fp16 nhwc")
MENU_TEXT = {"onnx": "&ONNX Model…", "torch": "&PyTorch Module…", "project": "&Standalone Project…",
             "preprocessed": "P&reprocessed Model…"}


def _default_weights(model: Model, model_path: str | None) -> str:
    """The model's weights folder setting as an absolute path, when it names an existing folder."""
    text = model.settings.get("weights", "").strip()
    if not text:
        return ""
    path = Path(text)
    if not path.is_absolute() and model_path:
        path = Path(model_path).resolve().parent / path
    return str(path) if is_weights_path(path) else ""


def _default_output(model: Model, model_path: str | None, kind: str) -> str:
    """The output proposed for ``kind``: beside the model file, never an existing file or folder (an imported
    model's own ONNX file above all): ``name_exported``, ``name_exported_2``, ... when the plain name is taken."""
    folder = Path(model_path).resolve().parent if model_path else Path.cwd()
    stem, suffix = {"onnx": (model.name, ".onnx"), "torch": (f"{model.name}_torch", ""),
                    "project": (f"{model.name}_project", ""),
                    "preprocessed": (f"{model.name}_preprocessed", ".lnet")}[kind]
    path, n = folder / f"{stem}{suffix}", 1
    while path.exists():
        path = folder / f"{stem}_exported{'' if n == 1 else f'_{n}'}{suffix}"
        n += 1
    return str(path)


class ExportResultDialog(QtWidgets.QDialog):
    """What an export did: a list of messages (success, each warning, or the error) and a Details section
    (hidden until asked) with the equivalent command line and the files written."""

    def __init__(self, title: str, ok: bool, messages: list[str], details: str,
                 parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.ok = ok
        self.resize(640, 320)
        pix = QtWidgets.QStyle.StandardPixmap
        icon = pix.SP_DialogApplyButton if ok else pix.SP_MessageBoxCritical
        head = QtWidgets.QLabel(("Export succeeded" if ok else "Export failed") + f": {title}")
        head.setObjectName("exportResultHeading")
        self.messages = QtWidgets.QListWidget()
        for text in messages:
            kind = pix.SP_MessageBoxWarning if text.startswith("warning:") else icon
            item = QtWidgets.QListWidgetItem(self.style().standardIcon(kind), text)
            item.setToolTip(text)
            self.messages.addItem(item)
        self.messages.setWordWrap(True)
        self.details_button = QtWidgets.QPushButton("Show Details")
        self.details_button.setCheckable(True)
        self.details = QtWidgets.QPlainTextEdit(details)
        self.details.setReadOnly(True)
        self.details.setVisible(False)
        self.details_button.toggled.connect(self._toggle)
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        buttons.accepted.connect(self.accept)
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.details_button)
        row.addStretch(1)
        row.addWidget(buttons)
        lay = QtWidgets.QVBoxLayout(self)
        lay.addWidget(head)
        lay.addWidget(self.messages, 1)
        lay.addWidget(self.details, 1)
        lay.addLayout(row)

    def _toggle(self, on: bool) -> None:
        self.details.setVisible(on)
        self.details_button.setText("Hide Details" if on else "Show Details")

    def message_texts(self) -> list[str]:
        return [self.messages.item(i).text() for i in range(self.messages.count())]


class ExportDialog(QtWidgets.QDialog):
    """Options of one export of ``model``: the exporter, the output path, the weights and, per exporter,
    its options (the project page is the wizard's: builder name, CLI sample, pyproject, tensor format).
    ``Export`` runs it and opens an ``ExportResultDialog`` (kept in ``result_dialog``)."""

    exported = QtCore.Signal(object)  # the ExportResult

    def __init__(self, model: Model, registry: Registry, model_path: str | None = None, kind: str = "onnx",
                 parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.registry = registry
        self.model_path = model_path
        self.result_dialog: ExportResultDialog | None = None
        self.last_result: Any = None
        self.setWindowTitle(f"Export {model.name}")
        self.resize(620, 420)

        self.kind_box = QtWidgets.QComboBox()
        for k in KINDS:
            self.kind_box.addItem(TITLES[k], k)
        self.output = QtWidgets.QLineEdit()
        self.browse_output = QtWidgets.QPushButton("Browse…")
        self.browse_output.clicked.connect(self.choose_output)
        out_row = QtWidgets.QHBoxLayout()
        out_row.addWidget(self.output, 1)
        out_row.addWidget(self.browse_output)
        self.weights = QtWidgets.QLineEdit(_default_weights(model, model_path))
        self.weights.setPlaceholderText("none: the imported weights" if model.weights_source is not None
                                        else "none: seeded random weights")
        self.browse_weights = QtWidgets.QPushButton("Browse…")
        self.browse_weights.clicked.connect(self.choose_weights)
        w_row = QtWidgets.QHBoxLayout()
        w_row.addWidget(self.weights, 1)
        w_row.addWidget(self.browse_weights)
        self.seed = QtWidgets.QSpinBox()
        self.seed.setRange(0, 2**31 - 1)
        try:
            self.seed.setValue(int(model.settings.get("seed", "0") or 0))
        except ValueError:
            self.seed.setValue(0)
        self.fusing = QtWidgets.QComboBox()
        self.fusing.addItems(["on", "off"])
        self.fusing.setToolTip("apply the plugins' and the model's fusing rules before exporting")

        common = QtWidgets.QFormLayout()
        common.addRow("Exporter:", self.kind_box)
        common.addRow("Output:", out_row)
        common.addRow("Weights folder:", w_row)
        common.addRow("Seed (random weights):", self.seed)
        common.addRow("Fusing rules:", self.fusing)

        # per-exporter options
        self.placeholders = QtWidgets.QCheckBox("Allow placeholder operators (layers without an ONNX equivalent)")
        self.fp16 = QtWidgets.QCheckBox("FP16: compute in float16 (layers pinned to fp32 in float between Casts)")
        self.fp32_compute = QtWidgets.QCheckBox("... but compute in float32 (FP16 inputs, outputs and weights only, "
                                                "for runtimes without float16 kernels)")
        self.explicit_sizes = QtWidgets.QCheckBox("Write tensor sizes (otherwise resolution-independent dimension names)")
        self.stubs = QtWidgets.QCheckBox("Write stub classes with a TODO for layers without a PyTorch equivalent")
        self.builder = QtWidgets.QLineEdit(f"build_{model.name}" if model.name.isidentifier() else "build_network")
        self.package = QtWidgets.QLineEdit()
        self.package.setPlaceholderText(model.name if model.name.isidentifier() else "network")
        self.sample = QtWidgets.QCheckBox("Generate a command-line sample (inputs, outputs, format, iterations, weights)")
        self.sample.setChecked(True)
        self.pyproject = QtWidgets.QCheckBox("Generate a pyproject.toml (pip install)")
        self.pyproject.setChecked(True)
        self.project_format = QtWidgets.QComboBox()
        self.project_format.addItems(("auto", *FORMATS))  # auto: the backend's default, as layerlab infer
        self.pre_format = QtWidgets.QComboBox()
        self.pre_format.addItems(FORMATS)
        self.pre_weights = QtWidgets.QCheckBox("Write the weights folder of the preprocessed layers")
        self.pre_weights.setChecked(True)
        self.pages = QtWidgets.QStackedWidget()
        for k in KINDS:
            page = QtWidgets.QWidget()
            form = QtWidgets.QFormLayout(page)
            if k == "onnx":
                for box in (self.placeholders, self.fp16, self.fp32_compute, self.explicit_sizes):
                    form.addRow(box)
            elif k == "torch":
                form.addRow(self.stubs)
            elif k == "project":
                form.addRow("Builder function:", self.builder)
                form.addRow("Package name:", self.package)
                form.addRow(self.sample)
                form.addRow(self.pyproject)
                form.addRow("Tensor format:", self.project_format)
            else:
                form.addRow("Tensor format:", self.pre_format)
                form.addRow(self.pre_weights)
            self.pages.addWidget(page)
        options = QtWidgets.QGroupBox("Options")
        QtWidgets.QVBoxLayout(options).addWidget(self.pages)

        self.command = QtWidgets.QLineEdit()
        self.command.setReadOnly(True)
        self.command.setToolTip("the equivalent layerlab command line")
        self.buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        self.export_button = self.buttons.addButton("Export", QtWidgets.QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.accepted.connect(self.export)
        self.buttons.rejected.connect(self.reject)
        lay = QtWidgets.QVBoxLayout(self)
        lay.addLayout(common)
        lay.addWidget(options)
        lay.addWidget(QtWidgets.QLabel("Command line:"))
        lay.addWidget(self.command)
        lay.addStretch(1)
        self.progress = QtWidgets.QProgressBar()
        self.progress.setRange(0, 0)  # busy: an export has no measurable progress
        self.progress.setTextVisible(False)
        self.progress_label = QtWidgets.QLabel()
        for w in (self.progress_label, self.progress):
            w.hide()
            lay.addWidget(w)
        lay.addWidget(self.buttons)
        self._job: _ExportJob | None = None
        self._thread: threading.Thread | None = None

        self._outputs: dict[str, str] = {}
        self._kind = kind
        self.kind_box.currentIndexChanged.connect(self._kind_changed)
        for w in (self.output, self.weights, self.builder, self.package):
            w.textChanged.connect(self._refresh)
        for b in (self.placeholders, self.fp16, self.fp32_compute, self.explicit_sizes, self.stubs, self.sample, self.pyproject,
                  self.pre_weights):
            b.toggled.connect(self._refresh)
        for c in (self.fusing, self.project_format, self.pre_format):
            c.currentIndexChanged.connect(self._refresh)
        self.seed.valueChanged.connect(self._refresh)
        self.set_kind(kind)

    # ---- state -----------------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        return str(self.kind_box.currentData())

    def set_kind(self, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown exporter {kind!r}")
        self.kind_box.setCurrentIndex(KINDS.index(kind))
        self._kind_changed()

    def _kind_changed(self) -> None:
        if self.output.text():
            self._outputs[self._kind] = self.output.text()
        self._kind = self.kind
        self.pages.setCurrentIndex(KINDS.index(self.kind))
        self.output.setText(self._outputs.get(self.kind) or _default_output(self.model, self.model_path, self.kind))
        self.fusing.setCurrentText(DEFAULT_FUSING[self.kind])
        self.setWindowTitle(f"Export {self.model.name}: {TITLES[self.kind]}")
        self._refresh()

    def request(self) -> ExportRequest:
        """The export these widgets describe."""
        req = ExportRequest(self.kind, self.output.text().strip(), self.weights.text().strip() or None, self.seed.value(),
                            self.fusing.currentText())
        req.placeholders, req.fp16, req.explicit_sizes = (self.placeholders.isChecked(), self.fp16.isChecked(),
                                                          self.explicit_sizes.isChecked())
        req.fp32_compute = self.fp16.isChecked() and self.fp32_compute.isChecked()
        req.stubs = self.stubs.isChecked()
        req.builder, req.package = self.builder.text().strip(), self.package.text().strip() or None
        req.sample, req.pyproject = self.sample.isChecked(), self.pyproject.isChecked()
        req.tensor_format = (self.project_format if self.kind == "project" else self.pre_format).currentText()
        req.write_weights = self.pre_weights.isChecked()
        return req

    def command_line(self) -> str:
        return self.request().command_line(self.model_path or f"{self.model.name}.lnet")

    def _refresh(self) -> None:
        self.fp32_compute.setEnabled(self.fp16.isChecked())
        self.command.setText(self.command_line())
        self.export_button.setEnabled(getattr(self, "_job", None) is None and bool(self.output.text().strip()) and
                                      (self.kind != "project" or bool(self.builder.text().strip())))

    # ---- file choosers (QFileDialog's static functions, so tests can replace them) ------------------
    def choose_output(self) -> None:
        current = self.output.text()
        if self.kind in ("onnx", "preprocessed"):
            filt = "ONNX models (*.onnx)" if self.kind == "onnx" else "LayerLab models (*.lnet)"
            path, _ = QtWidgets.QFileDialog.getSaveFileName(self, f"Export {TITLES[self.kind]}", current, filt)
            self._confirmed_output = path  # the file dialog asked before naming an existing file
        else:
            path = QtWidgets.QFileDialog.getExistingDirectory(self, f"Folder for the {TITLES[self.kind]}", current)
        if path:
            self.output.setText(path)

    def choose_weights(self) -> None:
        path = QtWidgets.QFileDialog.getExistingDirectory(self, "Weights folder", self.weights.text())
        if path:
            self.weights.setText(path)

    # ---- running ---------------------------------------------------------------------------------
    @property
    def exporting(self) -> bool:
        return self._job is not None

    _confirmed_output = ""  # a file the user chose in the file dialog (which asked about replacing it)

    def export(self) -> None:
        """Start the export in a background thread, on a copy of the model (edits made meanwhile do not reach
        it); the result dialog opens when it ends (non-blocking), and on success this dialog closes. An existing
        file is replaced only when the user says so."""
        if self._job is not None:
            return
        req = self.request()
        if req.kind in ("onnx", "preprocessed") and Path(req.output).is_file() and req.output != self._confirmed_output:
            answer = QtWidgets.QMessageBox.question(
                self, "Replace file?", f"{req.output} exists. Replace it with the export?",
                QtWidgets.QMessageBox.StandardButton.Yes | QtWidgets.QMessageBox.StandardButton.Cancel,
                QtWidgets.QMessageBox.StandardButton.Cancel)
            if answer != QtWidgets.QMessageBox.StandardButton.Yes:
                return
        snapshot = self.model.copy()
        snapshot.path = self.model.path
        job = _ExportJob(req, snapshot, self.registry)
        job.done.connect(self._finished)
        self._job = job
        self.result_dialog = None
        self.export_button.setEnabled(False)
        self.progress.show()
        self.progress_label.setText(f"Exporting to {req.output}…")
        self.progress_label.show()
        self._thread = threading.Thread(target=job.run, name="layerlab-export", daemon=True)
        self._thread.start()

    def reject(self) -> None:
        if self._job is not None:  # the files are being written: let the export end (its result still shows)
            self.progress_label.setText("Exporting… (the export cannot be stopped half-way; it ends shortly)")
            return
        super().reject()

    def _finished(self, req: ExportRequest, ok: bool, result: Any, messages: list[str]) -> None:
        # the thread has emitted its last signal and only returns now: wait for it, so that the job (a QObject)
        # is never released here while its signal is still being sent from there
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None
        self._job = None
        self.progress.hide()
        self.progress_label.hide()
        self._refresh()
        details = f"Command line:\n{req.command_line(self.model_path or f'{self.model.name}.lnet')}"
        if self.model_path is None:
            details += "\n(the model is not saved: save it to run this command)"
        if ok:
            self.last_result = result
            details += "\n\nFiles:\n" + "\n".join(str(f) for f in result.files[:200])
            if len(result.files) > 200:
                details += f"\n... and {len(result.files) - 200} more"
        dlg = ExportResultDialog(TITLES[req.kind], ok, messages, details, self.parentWidget() or self)
        dlg.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        self.result_dialog = dlg
        dlg.open()
        if ok:
            self.exported.emit(self.last_result)
            self.accept()


class _ExportJob(QtCore.QObject):
    """One export, run by a background thread; ``done`` reaches the dialog in the GUI thread (queued)."""

    done = QtCore.Signal(object, bool, object, object)  # request, ok, ExportResult or None, messages

    def __init__(self, request: ExportRequest, model: Model, registry: Registry) -> None:
        super().__init__()
        self.request, self.model, self.registry = request, model, registry

    def run(self) -> None:
        try:
            result = run_export(self.request, self.model, self.registry)
        except LayerLabError as exc:
            self.done.emit(self.request, False, None, [f"error: {exc}"])
        except Exception as exc:  # a bug must not take the designer down: report it
            self.done.emit(self.request, False, None, [f"internal error: {type(exc).__name__}: {exc}"])
        else:
            self.done.emit(self.request, True, result, [result.summary] + [f"warning: {w}" for w in result.warnings])


def open_export_dialog(window: Any, kind: str) -> ExportDialog | None:
    """Open the export dialog for the window's current model (non-blocking); None when no model is open."""
    doc = window.run_target() if hasattr(window, "run_target") else getattr(window, "current", None)
    if doc is None:
        window.statusBar().showMessage("Open a model to export it", 5000)
        return None
    dlg = ExportDialog(doc.model, window.registry, doc.path, kind, window)
    dlg.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
    dlg.exported.connect(lambda r: window.statusBar().showMessage(r.summary, 10000))
    window.export_dialog = dlg
    dlg.open()
    return dlg


def add_export_menu(window: Any) -> QtWidgets.QMenu:
    """Add File > Export (ONNX Model…, PyTorch Module…, Standalone Project…, Preprocessed Model…) to a
    MainWindow, before its Close action; returns the submenu. Actions: ``window.export_actions[kind]``."""
    bar = window.menuBar()
    file_menu = next((a.menu() for a in bar.actions() if a.text().replace("&", "") == "File" and a.menu()), None)
    if file_menu is None:
        file_menu = bar.addMenu("&File")
    menu = QtWidgets.QMenu("&Export", file_menu)
    window.export_actions = {}
    for kind in KINDS:
        act = QtGui.QAction(MENU_TEXT[kind], window)
        act.setStatusTip(f"Export the current model as a {TITLES[kind]}")
        act.triggered.connect(lambda _checked=False, k=kind: open_export_dialog(window, k))
        menu.addAction(act)
        window.export_actions[kind] = act
    before = getattr(window, "act_close", None)
    if before is not None and before in file_menu.actions():
        file_menu.insertMenu(before, menu)
        file_menu.insertSeparator(before)
    else:
        file_menu.addMenu(menu)
    window.export_menu = menu
    return menu
