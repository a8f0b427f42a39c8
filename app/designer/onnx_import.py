"""The designer's side of the ONNX import (``engine.importers.onnx``): File > Open of an ``.onnx`` file, File >
Import ONNX Model… (input sizes and placeholders), and ``.onnx``/``.lnet`` files dropped on the window or a canvas.

The import runs in a background thread; a non-modal dialog shows its progress, then what was mapped, folded and
refused and the equivalent ``layerlab import`` command, or the one message saying why it failed (no tab is opened
then). The imported model opens in a new, unsaved tab with its weights in memory (``model.weights_source``:
runs, analysis and exports use them); saving it writes the weights as a ``.safetensors`` file next to the
``.lnet``, named by the model's ``weights`` setting. ``OnnxImport`` wires all this into a MainWindow."""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6 import QtCore, QtGui, QtWidgets
from shiboken6 import isValid

from app.designer.context import Controller, DesignerContext
from engine.errors import LayerLabError
from engine.importers import is_importable
from engine.log import get_logger
from engine.weights import ArrayWeights, save_safetensors

if TYPE_CHECKING:
    from app.designer.document import Document
    from engine.importers.onnx import ImportResult
    from engine.registry import Registry

ONNX_FILTER = "ONNX models (*.onnx);;All files (*)"
OPEN_FILTER = "Models (*.lnet *.onnx);;LayerLab models (*.lnet);;ONNX models (*.onnx);;All files (*)"
#: default sizes of symbolic input dimensions, as the importer uses them (N, C, H, W)
SYMBOLIC_DEFAULTS = (1, 3, 224, 224)
MAX_LISTED = 2000  # rows per section of the result dialog
CANCELLED = "the import was cancelled"
log = get_logger(__name__)
class _Job(QtCore.QObject):
    """A function run by a background thread; its signals reach the GUI thread queued."""

    progress = QtCore.Signal(int, int, str)  # done, total, stage
    done = QtCore.Signal(object)
    failed = QtCore.Signal(str, object)  # the message; the refused nodes (or None)

    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn
        self.thread: threading.Thread | None = None
        self.cancelled = threading.Event()  # the next progress report stops the work

    def start(self, name: str) -> None:
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            result = self.fn(self._progress)
        except LayerLabError as exc:
            self.failed.emit(str(exc), getattr(exc, "refused", None))
        except Exception as exc:  # noqa: BLE001 - a bug must not take the designer down: report it
            self.failed.emit(f"internal error: {type(exc).__name__}: {exc}", None)
        else:
            self.done.emit(result)

    def _progress(self, done: int, total: int, stage: str) -> None:
        if self.cancelled.is_set():
            raise LayerLabError(CANCELLED)
        self.progress.emit(done, total, stage)

    def join(self) -> None:
        """Wait for the thread (it only returns after its last signal): the job is never released mid-emit."""
        if self.thread is not None:
            self.thread.join(5.0)
            self.thread = None


def onnx_inputs(path: str | os.PathLike[str]) -> list[tuple[str, list[int | str]]]:
    """The graph inputs of an ONNX file and their sizes (a symbolic size as its name, ``?`` when unnamed)."""
    from engine.importers.onnx.reader import graph_inputs, read  # noqa: PLC0415

    proto = read(path)
    out = []
    for inp in graph_inputs(proto):
        dims: list[int | str] = []
        if inp.type.HasField("tensor_type") and inp.type.tensor_type.HasField("shape"):
            for d in inp.type.tensor_type.shape.dim:
                dims.append(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else (d.dim_param or "?"))
        out.append((inp.name, dims))
    return out


def _default_shape(dims: list[int | str]) -> str:
    values = [d if isinstance(d, int) else SYMBOLIC_DEFAULTS[i] for i, d in enumerate(dims[:4])]
    return "x".join(map(str, values))


class ImportOptionsDialog(QtWidgets.QDialog):
    """File > Import ONNX Model…: the file, the sizes of inputs whose sizes are symbolic (read from the file in
    the background) and the placeholders option. Non-modal; Import starts the import and closes it."""

    def __init__(self, importer: OnnxImport, path: str = "", parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.importer = importer
        self.setWindowTitle("Import ONNX Model")
        self.setMinimumWidth(560)
        self._reader: _Job | None = None
        self._read_path = ""  # the file whose inputs are read (or shown)
        self._closed = False  # closed (and deleted): a read ending later has nowhere to go
        lay = QtWidgets.QVBoxLayout(self)
        form = QtWidgets.QFormLayout()
        row = QtWidgets.QHBoxLayout()
        self.path_edit = QtWidgets.QLineEdit(path)
        self.path_edit.setPlaceholderText("model.onnx")
        self.path_edit.editingFinished.connect(self._path_changed)
        self.path_edit.textChanged.connect(self._refresh)  # the command line follows the file chosen
        browse = QtWidgets.QPushButton("Browse…")
        browse.clicked.connect(self.browse)
        row.addWidget(self.path_edit, 1)
        row.addWidget(browse)
        form.addRow("ONNX file:", row)
        self.inputs_label = QtWidgets.QLabel("<i>choose a file</i>")
        self.inputs_label.setWordWrap(True)
        form.addRow("Inputs:", self.inputs_label)
        self.shapes_edit = QtWidgets.QPlainTextEdit()
        self.shapes_edit.setPlaceholderText("NAME=NxCxHxW, one a line (only inputs with symbolic sizes; "
                                            "default 1x3x224x224 with a notice)")
        self.shapes_edit.setMaximumHeight(90)
        self.shapes_edit.textChanged.connect(self._refresh)
        form.addRow("Input sizes:", self.shapes_edit)
        self.placeholders = QtWidgets.QCheckBox("Keep operators without a LayerLab equivalent as placeholder layers")
        self.placeholders.setToolTip("Without it, such a model is refused with the list of its unsupported nodes")
        self.placeholders.toggled.connect(self._refresh)
        form.addRow("", self.placeholders)
        lay.addLayout(form)
        self.command = QtWidgets.QLabel()
        self.command.setWordWrap(True)
        self.command.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.command.setStyleSheet("font-family: monospace; color: gray")
        lay.addWidget(self.command)
        self.error = QtWidgets.QLabel()
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #d9534f")
        self.error.hide()
        lay.addWidget(self.error)
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        self.import_button = buttons.addButton("Import", QtWidgets.QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.accepted.connect(self.start_import)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        if path:
            self._path_changed()
        self._refresh()

    def browse(self) -> None:
        start = self.path_edit.text() or str(Path.cwd())
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Import ONNX model", start, ONNX_FILTER)
        if path:
            self.path_edit.setText(path)
            self._path_changed()

    def _path_changed(self) -> None:
        """Read the file's inputs in the background; symbolic ones get a line in the sizes box."""
        path = self.path_edit.text().strip()
        if path == self._read_path:
            return
        self._read_path = path
        self.inputs_label.setText("<i>reading…</i>" if path else "<i>choose a file</i>")
        if not path:
            return
        job = _Job(lambda _progress: onnx_inputs(path))
        job.done.connect(lambda inputs, j=job, p=path: self._inputs_read(j, p, inputs))
        job.failed.connect(lambda msg, _refused, j=job, p=path: self._inputs_failed(j, p, msg))
        self._reader = job
        job.start("layerlab-onnx-inputs")

    def done(self, r: int) -> None:  # noqa: D102 (Qt API)
        self._closed = True
        super().done(r)

    def _inputs_failed(self, job: _Job, path: str, message: str) -> None:
        job.join()
        if not self._closed and path == self._read_path:
            self.inputs_label.setText(f"<i>{message}</i>")

    def _inputs_read(self, job: _Job, path: str, inputs: list[tuple[str, list[int | str]]]) -> None:
        job.join()
        if self._closed or path != self._read_path:
            return  # closed, or another file was chosen meanwhile
        self.inputs_label.setText(", ".join(f"{n} [{' x '.join(map(str, d)) or 'no shape'}]" for n, d in inputs)
                                  or "<i>none</i>")
        symbolic = [f"{n}={_default_shape(d)}" for n, d in inputs if len(d) == 4 and not all(isinstance(v, int) for v in d)]
        if symbolic and not self.shapes_edit.toPlainText().strip():
            self.shapes_edit.setPlainText("\n".join(symbolic))

    def input_shapes(self) -> dict[str, tuple[int, ...]]:
        """The sizes typed in (OnnxImportError naming a malformed line)."""
        from engine.importers.onnx import parse_input_shape  # noqa: PLC0415

        lines = [t.strip() for t in self.shapes_edit.toPlainText().replace(",", "\n").splitlines()]
        return dict(parse_input_shape(t) for t in lines if t)

    def _refresh(self) -> None:
        parts = ["layerlab", "import", self.path_edit.text().strip() or "MODEL.onnx"]
        for t in self.shapes_edit.toPlainText().replace(",", "\n").splitlines():
            if t.strip():
                parts += ["--input-shape", t.strip()]
        if self.placeholders.isChecked():
            parts.append("--placeholders")
        self.command.setText(" ".join(parts))

    def start_import(self) -> None:
        """Check the options, start the import (its own dialog shows it) and close."""
        path = self.path_edit.text().strip()
        try:
            if not path:
                raise LayerLabError("choose the ONNX file to import")
            shapes = self.input_shapes()
        except LayerLabError as exc:
            self.error.setText(str(exc))
            self.error.show()
            return
        self.importer.import_file(path, shapes, self.placeholders.isChecked())
        self.accept()


class ImportDialog(QtWidgets.QDialog):
    """One import: its progress while it runs, then the result (what was mapped, folded and refused, the notices
    and the equivalent command line) or the one message saying why it failed. Non-modal."""

    def __init__(self, path: str, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.path = path
        self.ok: bool | None = None  # None while running (the result is shown, not kept: it holds the weights)
        self.setWindowTitle(f"Import {Path(path).name}")
        self.resize(720, 520)
        lay = QtWidgets.QVBoxLayout(self)
        self.heading = QtWidgets.QLabel(f"Importing <b>{Path(path).name}</b>…")
        self.heading.setWordWrap(True)
        lay.addWidget(self.heading)
        self.progress = QtWidgets.QProgressBar()
        self.progress.setRange(0, 0)
        lay.addWidget(self.progress)
        self.stage = QtWidgets.QLabel("reading")
        lay.addWidget(self.stage)
        self.message = QtWidgets.QLabel()
        self.message.setObjectName("ImportMessage")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.hide()
        lay.addWidget(self.message)
        self.tree = QtWidgets.QTreeWidget()
        self.tree.setHeaderLabels(["ONNX node", "What happened"])
        self.tree.setColumnWidth(0, 300)
        self.tree.hide()
        lay.addWidget(self.tree, 1)
        cmd_row = QtWidgets.QHBoxLayout()
        self.command = QtWidgets.QLineEdit()
        self.command.setReadOnly(True)
        self.command.setObjectName("ImportCommand")
        self.copy_button = QtWidgets.QPushButton("Copy")
        self.copy_button.clicked.connect(lambda: QtWidgets.QApplication.clipboard().setText(self.command.text()))
        self.command_label = QtWidgets.QLabel("Command line:")
        for w in (self.command_label, self.command, self.copy_button):
            w.hide()
        cmd_row.addWidget(self.command_label)
        cmd_row.addWidget(self.command, 1)
        cmd_row.addWidget(self.copy_button)
        lay.addLayout(cmd_row)
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        self.cancel_button = buttons.addButton("Cancel Import", QtWidgets.QDialogButtonBox.ButtonRole.ActionRole)
        self.cancel_button.clicked.connect(self.cancel_requested)
        lay.addWidget(buttons)

    cancel_requested = QtCore.Signal()

    def set_progress(self, done: int, total: int, stage: str) -> None:
        if stage == "mapping" and total > 0:
            self.progress.setRange(0, total)
            self.progress.setValue(done)
            self.stage.setText(f"mapping node {done} of {total}")
        else:
            self.stage.setText({"reading": "reading and cleaning the graph up", "layout": "laying the layers out",
                                "done": "opening"}.get(stage, stage))

    def _finish(self) -> None:
        self.progress.hide()
        self.stage.hide()
        self.cancel_button.hide()
        self.message.show()

    def show_failure(self, message: str, refused: list[Any] | None = None) -> None:
        """The import failed: say why in one message (nothing was opened); refused nodes are listed grouped by
        operator, with how to import them anyway."""
        from engine.importers.onnx import refusals_by_operator  # noqa: PLC0415

        self.ok = False
        self._finish()
        name = Path(self.path).name
        self.setWindowTitle(f"Cannot import {name}")
        self.heading.setText(f"<b>Cannot import {name}</b> — nothing was opened.")
        self.message.setStyleSheet("color: #d9534f")
        if not refused:
            self.message.setText(message)
            return
        groups = refusals_by_operator(refused)
        self.message.setText(f"{len(refused)} node(s) of {len(groups)} operator(s) have no LayerLab equivalent. "
                             "To import the model anyway, keeping them as placeholder layers (on the canvas and "
                             "exportable, not runnable), tick \"Keep operators without a LayerLab equivalent as "
                             "placeholder layers\" in File > Import ONNX Model….")
        for op, group in groups.items():
            top = QtWidgets.QTreeWidgetItem([f"{op} ({len(group)})", "; ".join(sorted({r.reason for r in group}))])
            for r in group[:MAX_LISTED]:
                top.addChild(QtWidgets.QTreeWidgetItem([r.node, r.reason]))
            self.tree.addTopLevelItem(top)
        self.tree.setHeaderLabels(["Operator / node", "Why"])
        self.tree.show()

    def section(self, title: str) -> QtWidgets.QTreeWidgetItem | None:
        """The top-level item of a section (``Mapped``, ``Folded``, ``Refused``, ``Notices``)."""
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            if item.text(0).split(" (")[0] == title:
                return item
        return None

    def show_result(self, result: ImportResult) -> None:
        """The import succeeded: list what happened to the nodes and the command line."""
        self.ok = True
        self._finish()
        self.heading.setText(f"<b>Imported {Path(self.path).name}</b> as {result.model.name} (a new, unsaved tab: "
                             "File > Save As writes the model and its weights)")
        self.message.setText(result.summary())
        rows: dict[str, list[tuple[str, str]]] = {
            "Refused": [(f"{r.op} {r.node}", r.reason + (" (kept as a placeholder layer)" if result.placeholders else ""))
                        for r in result.refused],
            "Notices": [("", n) for n in result.notices],
            "Mapped": [(f"{op} {node}", f"-> layer {layer}") for op, node, layer in result.mapped],
            "Folded": [("", f) for f in result.folded],
        }
        for title, items in rows.items():
            top = QtWidgets.QTreeWidgetItem([f"{title} ({len(items)})", ""])
            top.setFirstColumnSpanned(False)
            for a, b in items[:MAX_LISTED]:
                child = QtWidgets.QTreeWidgetItem([a, b])
                child.setToolTip(1, b)
                top.addChild(child)
            if len(items) > MAX_LISTED:
                top.addChild(QtWidgets.QTreeWidgetItem(["", f"... and {len(items) - MAX_LISTED} more"]))
            self.tree.addTopLevelItem(top)
            top.setExpanded(title in ("Refused", "Notices") or len(items) <= 30)
        self.tree.show()
        self.command.setText(result.command_line())
        self.command.setCursorPosition(0)
        for w in (self.command_label, self.command, self.copy_button):
            w.show()


class OnnxImport(Controller):
    """Wires the ONNX import into the designer: File > Import ONNX Model… (after ``open_action``), ``.onnx`` in
    File > Open, drops on the window and its canvases, and the weights file written when an imported model is saved."""

    imported = QtCore.Signal(object)  # the Document an import opened

    def __init__(self, ctx: DesignerContext, open_action: QtGui.QAction) -> None:
        super().__init__(ctx)
        self.dialogs: list[ImportDialog] = []  # imports shown (the latest last)
        self.options_dialog: ImportOptionsDialog | None = None
        self._jobs: dict[ImportDialog, _Job] = {}
        self._weights_files: dict[int, Path] = {}  # document id -> the weights file its last save wrote
        self.act_import = QtGui.QAction("&Import ONNX Model…", ctx.parent)
        self.act_import.setStatusTip("Import an ONNX model (input sizes, placeholders) into a new tab")
        self.act_import.triggered.connect(lambda _checked=False: self.open_options())
        file_menu = ctx.menu("File")
        if file_menu is not None:
            acts = file_menu.actions()
            after = acts.index(open_action) + 1 if open_action in acts else len(acts)
            before = acts[after] if after < len(acts) else None
            file_menu.insertAction(before, self.act_import)
        ctx.parent.setAcceptDrops(True)  # drops on the docks and tabs come to the window
        ctx.parent.installEventFilter(self)

    @property
    def registry(self) -> Registry:
        return self.ctx.registry

    @property
    def running(self) -> bool:
        """Whether an import is still under way."""
        return bool(self._jobs)

    # ---- starting imports ------------------------------------------------------------------------
    def open_options(self, path: str = "") -> ImportOptionsDialog:
        """File > Import ONNX Model…: the options dialog (non-modal)."""
        dlg = ImportOptionsDialog(self, path, self.ctx.parent)
        dlg.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.destroyed.connect(lambda _o=None: setattr(self, "options_dialog", None))
        self.options_dialog = dlg
        dlg.open()
        return dlg

    def import_file(self, path: str | os.PathLike[str], input_shapes: dict[str, tuple[int, ...]] | None = None,
                    placeholders: bool = False) -> ImportDialog:
        """Import ``path`` in the background; its dialog (returned) shows the progress, then the result. On
        success the model opens in a new, unsaved tab; on failure nothing opens and the dialog says why."""
        from engine.importers.onnx import import_onnx  # noqa: PLC0415 - onnx is imported when needed

        path = str(Path(path).resolve())
        registry = self.registry
        dlg = ImportDialog(path, self.ctx.parent)
        job = _Job(lambda progress: import_onnx(path, input_shapes=dict(input_shapes or {}), placeholders=placeholders,
                                                progress=progress, registry=registry, layout=False))
        job.progress.connect(dlg.set_progress)
        job.done.connect(lambda result, d=dlg: self._done(d, result))
        job.failed.connect(lambda msg, refused, d=dlg: self._failed(d, msg, refused))
        dlg.cancel_requested.connect(job.cancelled.set)
        self._jobs[dlg] = job
        self.dialogs.append(dlg)
        dlg.finished.connect(lambda _r, d=dlg: self.dialogs.remove(d) if d in self.dialogs and d.ok is not None else None)
        dlg.show()
        self.ctx.status(f"Importing {path}…")
        log.info("Importing %s%s", path, " (placeholders)" if placeholders else "")
        job.start("layerlab-onnx-import")
        return dlg

    def _end(self, dlg: ImportDialog) -> None:
        job = self._jobs.pop(dlg, None)
        if job is not None:
            job.join()

    def _failed(self, dlg: ImportDialog, message: str, refused: list[Any] | None = None) -> None:
        self._end(dlg)
        log.warning("Import of %s %s", dlg.path, "cancelled" if message == CANCELLED else f"failed: {message}")
        if not (isValid(self.ctx.parent) and isValid(dlg)):
            return  # the window was closed meanwhile
        dlg.show_failure(message, refused)
        self.ctx.status(f"Cannot import: {message}", 15000)
        dlg.show()
        dlg.raise_()

    def _done(self, dlg: ImportDialog, result: ImportResult) -> None:
        self._end(dlg)
        if not (isValid(self.ctx.parent) and isValid(dlg)):
            return  # the window was closed meanwhile
        model = result.model
        model.weights_source = result.weights_source()
        doc = self.ctx.documents.add_document(model, None)
        try:
            self.arrange(doc)
        except LayerLabError as exc:  # the layers stay where they are
            self.ctx.status(f"Could not lay the imported network out again: {exc}", 10000)
        doc.recovered = True  # a new model not saved yet: closing asks, Save asks for a file
        doc.state_changed.emit()  # the tab shows it unsaved
        self.ctx.add_recent(dlg.path)  # Open Recent imports it again
        dlg.show_result(result)
        self.ctx.status(f"Imported {Path(dlg.path).name}: {result.summary()}", 15000)
        log.info("Imported %s: %s", dlg.path, result.summary())
        self.imported.emit(doc)

    @classmethod
    def arrange(cls, doc: Document) -> None:
        """Lay an imported model out again with the sizes its nodes have on the canvas (:meth:`layout`) and fit
        the view to it. Not an undo step: the model was just opened."""
        cls.layout(doc)
        doc.canvas.fit()
        QtCore.QTimer.singleShot(0, doc.canvas.fit)  # again once the tab has its final size

    @staticmethod
    def layout(doc: Document) -> None:
        """Lay ``doc``'s layers out with the sizes their nodes have on the canvas (the canvas's Arrange: the
        layered drawing of ``engine.layout``, the collapsed groups as blocks, links routed around the layers),
        folded into bands when it is much wider than the view. Not an undo step: the model was just opened."""
        doc.canvas.arrange(fold=True)
        doc.model.clear_undo()

    # ---- files: open and drop --------------------------------------------------------------------
    def open_files(self, paths: list[str]) -> None:
        """Open dropped files: ``.onnx`` ones are imported, ``.lnet`` ones opened; others are named as refused."""
        refused = []
        for p in paths:
            if is_importable(p):
                self.import_file(p)
            elif Path(p).suffix.lower() == ".lnet":
                self.ctx.open_path(p)
            else:
                refused.append(Path(p).name)
        if refused:
            self.ctx.status(f"Cannot open {', '.join(refused)}: drop .lnet or .onnx model files",
                                                10000)

    @staticmethod
    def dropped_files(mime: QtCore.QMimeData) -> list[str]:
        """The local model files (``.lnet``, ``.onnx``) in a drag's data."""
        if not mime.hasUrls():
            return []
        files = [u.toLocalFile() for u in mime.urls() if u.isLocalFile()]
        return [f for f in files if is_importable(f) or Path(f).suffix.lower() == ".lnet"]

    def attach(self, doc: Document) -> None:
        """Files dropped on ``doc``'s canvas are opened too."""
        doc.canvas.files_dropped.connect(self.open_files)

    def eventFilter(self, obj: QtCore.QObject, event: QtCore.QEvent) -> bool:  # noqa: N802 (Qt API)
        if obj is self.ctx.parent:
            kind = event.type()
            if kind in (QtCore.QEvent.Type.DragEnter, QtCore.QEvent.Type.DragMove):
                if self.dropped_files(event.mimeData()):  # type: ignore[attr-defined]
                    event.acceptProposedAction()  # type: ignore[attr-defined]
                    return True
            elif kind == QtCore.QEvent.Type.Drop:
                files = self.dropped_files(event.mimeData())  # type: ignore[attr-defined]
                if files:
                    event.acceptProposedAction()  # type: ignore[attr-defined]
                    self.open_files(files)
                    return True
        return super().eventFilter(obj, event)

    # ---- saving ----------------------------------------------------------------------------------
    def before_save(self, doc: Document, path: str | os.PathLike[str]) -> Path | None:
        """When ``doc`` holds imported weights in memory, write them as ``<model>.safetensors`` next to ``path``
        and make the model's ``weights`` setting name that file (unless the user set other weights); returns
        the weights file written, None when there was nothing to write. Raises OSError."""
        weights = doc.model.weights_source
        if not isinstance(weights, ArrayWeights):
            return None
        target = Path(path)
        wfile = target.with_suffix(".safetensors")
        setting = doc.model.settings.get("weights", "").strip()
        if setting and Path(setting).suffix.lower() != ".safetensors":
            return None  # the user chose a weights folder: leave it
        if setting:
            base = Path(doc.path).resolve().parent if doc.path else target.resolve().parent
            current = Path(setting) if Path(setting).is_absolute() else base / setting
            written = self._weights_files.get(doc.id)
            if written is None or current.resolve() != written:
                return None  # the user chose another weights file: leave it
        if not target.parent.is_dir():
            raise OSError(f"{target.parent}: no such folder")
        save_safetensors(wfile, weights.arrays, {"format": "layerlab-weights-1", "source": weights.origin})
        doc.model.settings["weights"] = wfile.name
        self._weights_files[doc.id] = wfile.resolve()
        return wfile
