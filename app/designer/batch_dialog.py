"""Tools > Run on Dataset…: the current model and its network settings run over a dataset by the same engine
as `layerlab batch` (``engine.batch``), in a background thread, with progress, a results table (failures
with their reasons) and Cancel. Closing the dialog while it runs cancels the run; the chunks in flight are
finished and recorded, so the run can be resumed later from the same output folder."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from app import run_config
from app.services.commandline import batch_command_line
from engine.batch import ENGINES, BatchJob, BatchOptions, NetworkSpec, Progress, run_job
from engine.batch.stages import SAVE_AS
from engine.errors import LayerLabError
from engine.io import PNG_LEVEL
from engine.model import Model
from engine.modelfile import dumps
from engine.registry import Registry
from engine.run import AUTO, DEFAULT_FORMATS, tensor_format

STATUS_TEXT = {"done": "done", "failed": "failed", "skipped": "already done"}


class _BatchJob(QtCore.QObject):
    """One batch run in a background thread; its signals reach the dialog in the GUI thread (queued)."""

    progressed = QtCore.Signal(object)  # Progress
    done = QtCore.Signal(object, str)  # summary dict or None, error message ('' when none)

    def __init__(self, spec: NetworkSpec, options: BatchOptions, engine: str) -> None:
        super().__init__()
        self.spec, self.options, self.engine = spec, options, engine
        self.cancel = threading.Event()

    def run(self) -> None:
        try:
            job = BatchJob(self.spec, self.options)
            summary = run_job(job, self.engine, self.progressed.emit, self.cancel)
        except LayerLabError as exc:
            self.done.emit(None, f"error: {exc}")
        except Exception as exc:  # a bug must not take the designer down: report it
            self.done.emit(None, f"internal error: {type(exc).__name__}: {exc}")
        else:
            self.done.emit(summary, "")


class BatchDialog(QtWidgets.QDialog):
    """Run the model over a dataset (see the module documentation). Non-modal."""

    finished_run = QtCore.Signal(object)  # the summary dict, or None when the run could not start

    def __init__(self, model: Model, registry: Registry, model_path: str | None = None,
                 parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Run {model.name} on a Dataset")
        self.model, self.registry, self.model_path = model, registry, model_path
        self._job: _BatchJob | None = None
        self._thread: threading.Thread | None = None
        self._close_when_done = False
        self.summary: dict[str, Any] | None = None

        self.inputs = QtWidgets.QLineEdit()
        self.inputs.setPlaceholderText("a folder, a pattern such as photos/*.jpg, or a list .txt")
        self.browse_inputs = QtWidgets.QPushButton("Folder…")
        self.browse_inputs.clicked.connect(self.choose_inputs)
        self.output = QtWidgets.QLineEdit()
        self.browse_output = QtWidgets.QPushButton("Browse…")
        self.browse_output.clicked.connect(self.choose_output)
        self.batch_size = QtWidgets.QSpinBox()
        self.batch_size.setRange(1, 4096)
        self.batch_size.setValue(8)
        self.every = QtWidgets.QSpinBox()
        self.every.setRange(1, 100000)
        self.every.setToolTip("keep every K-th video frame")
        self.save_as = QtWidgets.QComboBox()
        self.save_as.addItems(SAVE_AS)
        self.png_compression = QtWidgets.QSpinBox()
        self.png_compression.setRange(0, 9)
        self.png_compression.setValue(PNG_LEVEL)
        self.png_compression.setToolTip("zlib level of PNG outputs: 0 stored (fastest to write, largest files), "
                                        "1 fast (default), 2-9 smaller files, several times slower")
        self.engine = QtWidgets.QComboBox()
        self.engine.addItems(ENGINES)
        self.engine.setToolTip("local: this machine; ray: a local Ray instance (needs the 'cluster' extra)")
        self.overwrite = QtWidgets.QCheckBox("Start again (forget finished outputs)")
        self.settings_label = QtWidgets.QLabel()
        self.settings_label.setWordWrap(True)

        form = QtWidgets.QFormLayout()
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.inputs, 1)
        row.addWidget(self.browse_inputs)
        form.addRow("Inputs:", row)
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.output, 1)
        row.addWidget(self.browse_output)
        form.addRow("Output folder:", row)
        for label, widget in (("Batch size:", self.batch_size), ("Every K-th frame:", self.every),
                              ("Save stills as:", self.save_as), ("PNG compression:", self.png_compression),
                              ("Engine:", self.engine), ("", self.overwrite), ("Network:", self.settings_label)):
            form.addRow(label, widget)

        self.progress = QtWidgets.QProgressBar()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.status = QtWidgets.QLabel("")
        self.status.setWordWrap(True)
        self.table = QtWidgets.QTableWidget(0, 3)
        self.table.setHorizontalHeaderLabels(["Input", "Status", "Output / reason"])
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.run_button = QtWidgets.QPushButton("Run")
        self.run_button.setDefault(True)
        self.run_button.clicked.connect(self.run)
        self.cancel_button = QtWidgets.QPushButton("Cancel Run")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        close = QtWidgets.QPushButton("Close")
        close.clicked.connect(self.reject)
        buttons = QtWidgets.QHBoxLayout()
        buttons.addStretch(1)
        for b in (self.run_button, self.cancel_button, close):
            buttons.addWidget(b)

        self.command = QtWidgets.QLineEdit()  # the equivalent command line, following the fields
        self.command.setReadOnly(True)
        self.command.setObjectName("BatchCommand")
        form.addRow("Command line:", self.command)
        for w in (self.inputs, self.output):
            w.textChanged.connect(self._show_command)
        for box in (self.batch_size, self.every, self.png_compression):
            box.valueChanged.connect(self._show_command)
        for combo in (self.save_as, self.engine):
            combo.currentTextChanged.connect(self._show_command)
        self.overwrite.toggled.connect(self._show_command)

        lay = QtWidgets.QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.progress)
        lay.addWidget(self.status)
        lay.addWidget(self.table, 1)
        lay.addLayout(buttons)
        self.resize(760, 560)
        self._show_settings()
        self._show_command()

    # ---- settings --------------------------------------------------------------------------------
    def _config(self) -> run_config.RunConfig:
        return run_config.from_model(self.model, self.model_path)

    def _show_settings(self) -> None:
        try:
            cfg = self._config()
        except LayerLabError as exc:
            self.settings_label.setText(f"the network settings are invalid: {exc}")
            return
        fmt = cfg.format
        if fmt == AUTO:  # say what auto means here (on an auto backend, for each backend)
            fmt = (f"auto ({tensor_format(AUTO, cfg.backend)})" if cfg.backend != AUTO else
                   "auto (" + ", ".join(f"{v} on {k}" for k, v in DEFAULT_FORMATS.items()) + ")")
        self.settings_label.setText(f"backend {cfg.backend}, format {fmt}, "
                                    f"{'weights ' + cfg.weights if cfg.weights else f'random weights (seed {cfg.seed})'}, "
                                    f"fusing {'on' if cfg.fusing else 'off'} (Tools > Network Settings)")

    def _show_command(self) -> None:
        try:
            text = batch_command_line(self._network_spec(""), self.options(), self.engine.currentText(),
                                      self.model_path or f"{self.model.name}.lnet")
        except LayerLabError as exc:
            text = f"(the network settings are invalid: {exc})"
        self.command.setText(text)
        self.command.setCursorPosition(0)

    def spec(self) -> NetworkSpec:
        """The network of the run: the model as it is now (unsaved edits included) and its network settings."""
        return self._network_spec(dumps(self.model))

    def _network_spec(self, model_text: str) -> NetworkSpec:
        cfg = self._config()
        return NetworkSpec(model_text, self.model_path or f"<{self.model.name}>", cfg.backend, cfg.format,
                           cfg.weights, cfg.seed, "on" if cfg.fusing else "off")

    def options(self) -> BatchOptions:
        inputs = tuple(t for t in self.inputs.text().split(";") if t.strip())
        return BatchOptions(tuple(t.strip() for t in inputs), self.output.text().strip(), self.batch_size.value(),
                            self.every.value(), self.save_as.currentText(), self.overwrite.isChecked(),
                            self._config().input_layout, png_compression=self.png_compression.value())

    def choose_inputs(self) -> None:
        folder = QtWidgets.QFileDialog.getExistingDirectory(self, "Dataset folder", self.inputs.text())
        if folder:
            self.inputs.setText(folder)
            if not self.output.text():
                self.output.setText(str(Path(folder).with_name(Path(folder).name + "_out")))

    def choose_output(self) -> None:
        folder = QtWidgets.QFileDialog.getExistingDirectory(self, "Output folder", self.output.text())
        if folder:
            self.output.setText(folder)

    # ---- running ---------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._job is not None

    def run(self) -> None:
        """Start the run in a background thread (the inputs are found and planned there too)."""
        if self._job is not None:
            return
        if not self.inputs.text().strip() or not self.output.text().strip():
            self.status.setText("Choose the inputs and an output folder.")
            return
        try:
            spec, options = self.spec(), self.options()
        except LayerLabError as exc:
            self.status.setText(f"error: {exc}")
            return
        self.table.setRowCount(0)
        self.summary = None
        self.progress.setRange(0, 0)  # busy until the first progress report
        self.status.setText("Finding the inputs…")
        job = _BatchJob(spec, options, self.engine.currentText())
        job.progressed.connect(self._progressed)
        job.done.connect(self._finished)
        self._job = job
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self._thread = threading.Thread(target=job.run, name="layerlab-batch", daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        """Stop feeding the run; the chunks in flight finish and are recorded."""
        if self._job is not None:
            self._job.cancel.set()
            self.cancel_button.setEnabled(False)
            self.status.setText("Cancelling: finishing the inputs in flight…")

    def _add_row(self, name: str, status: str, detail: str) -> None:
        r = self.table.rowCount()
        self.table.insertRow(r)
        for c, text in enumerate((name, STATUS_TEXT.get(status, status), detail)):
            item = QtWidgets.QTableWidgetItem(text)
            if status == "failed":
                item.setForeground(QtGui.QBrush(QtGui.QColor("#c0392b")))
            self.table.setItem(r, c, item)

    def _progressed(self, p: Progress) -> None:
        self.progress.setRange(0, max(1, p.total))
        self.progress.setValue(min(p.done, p.total))
        if self._job is not None and not self._job.cancel.is_set():
            self.status.setText(f"{p.done} of {p.total} inputs, {p.failed} failed, {p.skipped} already done, "
                                f"{p.rate:.1f} inputs/s")
        for e in p.events:
            self._add_row(e.input, e.status, e.detail)

    def _finished(self, summary: dict[str, Any] | None, error: str) -> None:
        if self._thread is not None:  # the thread only returns now: never release the job while it emits
            self._thread.join(5.0)
            self._thread = None
        self._job = None
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self.progress.setRange(0, 1)
        self.summary = summary
        if summary is None:
            self.progress.setValue(0)
            self.status.setText(error)
        else:
            items = summary["items"]
            self.progress.setRange(0, max(1, items["total"]))  # after Cancel: how far it got, not 100%
            self.progress.setValue(items["finished"])
            self.status.setText(
                f"{'Cancelled' if summary['cancelled'] else 'Finished'}: {items['finished']} of {items['total']} "
                f"inputs done ({items['skipped']} from before), {items['failed']} failed, "
                f"{summary['throughput']['frames_per_s']} inputs/s. Outputs and layerlab-summary.json are in "
                f"{summary['output_dir']}.")
        self.finished_run.emit(summary)
        if self._close_when_done:
            super().reject()

    def reject(self) -> None:
        if self._job is not None:  # closing cancels; the dialog closes once the run has wound down
            self._close_when_done = True
            self.cancel()
            return
        super().reject()


def open_batch_dialog(window: Any) -> BatchDialog | None:
    """Open Tools > Run on Dataset… for the window's current model (non-blocking); None when no model is open."""
    doc = window.run_target() if hasattr(window, "run_target") else getattr(window, "current", None)
    if doc is None:
        window.statusBar().showMessage("Open a model to run it on a dataset", 5000)
        return None
    dlg = BatchDialog(doc.model, window.registry, doc.path, window)
    dlg.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
    window.batch_dialog = dlg
    dlg.show()
    return dlg


def add_batch_menu(window: Any) -> QtGui.QAction:
    """Add Tools > Run on Dataset… to a MainWindow (``window.act_batch``), after the run actions."""
    act = QtGui.QAction("Run on &Dataset…", window)
    act.setStatusTip("Run the current model over a folder of images, videos or NPY tensors")
    act.triggered.connect(lambda _checked=False: open_batch_dialog(window))
    tools = getattr(window, "tools_menu", None)
    if tools is None:
        tools = window.menuBar().addMenu("&Tools")
    acts = tools.actions()
    before = next((a for a in acts if a.isSeparator()), None)
    if before is not None:
        tools.insertAction(before, act)
    else:
        tools.addAction(act)
    window.act_batch = act
    return act
