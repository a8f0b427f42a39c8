"""The Model Inputs window: one viewer per input layer. Double-click or right-click > Open Input File
loads an image (PNG, JPG), a video (MP4, AVI, MPEG, MKV, WMV) or an NPY tensor (shown as an image,
passed to the network as it is). Under a video: play/pause, previous/next frame, a seek slider and the
frame number. The window only asks; the analysis session reads the files and sends frames back."""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app.analysis.views import ImageView
from engine.io import IMAGE_EXTS, VIDEO_EXTS

FILE_FILTER = ("Inputs (" + " ".join(f"*{e}" for e in (*IMAGE_EXTS, *VIDEO_EXTS, ".npy")) + ");;"
               "Images (" + " ".join(f"*{e}" for e in IMAGE_EXTS) + ");;"
               "Videos (" + " ".join(f"*{e}" for e in VIDEO_EXTS) + ");;NumPy tensors (*.npy);;All files (*)")


class InputViewer(QtWidgets.QWidget):
    """The viewer of one input layer with its video controls."""

    open_requested = QtCore.Signal(str)
    play = QtCore.Signal(str)
    pause = QtCore.Signal(str)
    seek = QtCore.Signal(str, int)
    step = QtCore.Signal(str, int)

    def __init__(self, layer: str, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.layer = layer
        self.frame = None  # the latest InputFrame
        self.title = QtWidgets.QLabel(f"<b>{layer}</b>")
        self.info = QtWidgets.QLabel("random input")
        self.info.setStyleSheet("color: #9aa0a6;")
        self.view = ImageView(placeholder="double-click to open an input file")
        self.view.double_clicked.connect(lambda *_: self.open_requested.emit(self.layer))
        self.view.context_menu.connect(self._menu)
        style = self.style()
        P = QtWidgets.QStyle.StandardPixmap
        self.play_button = QtWidgets.QToolButton()
        self.play_button.setIcon(style.standardIcon(P.SP_MediaPlay))
        self.play_button.setToolTip("Play / pause")
        self.play_button.setCheckable(True)
        self.play_button.clicked.connect(self._play_clicked)
        self.prev_button = QtWidgets.QToolButton()
        self.prev_button.setIcon(style.standardIcon(P.SP_MediaSeekBackward))
        self.prev_button.setToolTip("Previous frame")
        self.prev_button.clicked.connect(lambda: self.step.emit(self.layer, -1))
        self.next_button = QtWidgets.QToolButton()
        self.next_button.setIcon(style.standardIcon(P.SP_MediaSeekForward))
        self.next_button.setToolTip("Next frame")
        self.next_button.clicked.connect(lambda: self.step.emit(self.layer, 1))
        self.slider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
        self.slider.setToolTip("Seek")
        self.slider.sliderReleased.connect(lambda: self.seek.emit(self.layer, self.slider.value()))
        self.slider.actionTriggered.connect(self._slider_action)
        self.frame_label = QtWidgets.QLabel("0 / 0")
        self.frame_label.setMinimumWidth(70)
        self.frame_label.setAlignment(QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter)
        controls = QtWidgets.QHBoxLayout()
        controls.setContentsMargins(0, 0, 0, 0)
        for w in (self.play_button, self.prev_button, self.next_button):
            controls.addWidget(w)
        controls.addWidget(self.slider, 1)
        controls.addWidget(self.frame_label)
        self.controls = QtWidgets.QWidget()
        self.controls.setLayout(controls)
        head = QtWidgets.QHBoxLayout()
        head.addWidget(self.title)
        head.addStretch(1)
        head.addWidget(self.info)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(head)
        lay.addWidget(self.view, 1)
        lay.addWidget(self.controls)
        self.set_video_controls(False)

    def _menu(self, pos: QtCore.QPoint) -> None:
        menu = QtWidgets.QMenu(self)
        menu.addAction("Open Input File…", lambda: self.open_requested.emit(self.layer))
        menu.addAction("Reset Zoom", self.view.reset_view)
        menu.exec(pos)

    def _play_clicked(self, checked: bool) -> None:
        (self.play if checked else self.pause).emit(self.layer)

    def _slider_action(self, action: int) -> None:
        if not self.slider.isSliderDown():  # page steps and arrow keys: seek at once
            QtCore.QTimer.singleShot(0, lambda: self.seek.emit(self.layer, self.slider.value()))

    def set_video_controls(self, on: bool) -> None:
        for w in (self.play_button, self.prev_button, self.next_button, self.slider, self.frame_label):
            w.setEnabled(on)
        self.controls.setVisible(on)

    def show_frame(self, frame) -> None:  # noqa: ANN001 - app.analysis.live.InputFrame
        """Show an InputFrame sent by the session."""
        self.frame = frame
        self.view.set_image(frame.image)
        source = frame.path.rsplit("/", 1)[-1] if frame.path else "random input"
        self.info.setText(f"{source} · {frame.shape}")
        video = frame.kind == "video"
        self.set_video_controls(video)
        if video:
            self.slider.blockSignals(True)
            self.slider.setRange(0, max(0, frame.frame_count - 1))
            if not self.slider.isSliderDown():
                self.slider.setValue(frame.frame)
            self.slider.blockSignals(False)
            self.frame_label.setText(f"{frame.frame + 1} / {frame.frame_count}")
            self.play_button.setChecked(frame.playing)
            P = QtWidgets.QStyle.StandardPixmap
            self.play_button.setIcon(self.style().standardIcon(P.SP_MediaPause if frame.playing else P.SP_MediaPlay))


class ModelInputsWindow(QtWidgets.QWidget):
    """One InputViewer per input layer. ``file_chosen(layer, path)`` after Open Input File."""

    file_chosen = QtCore.Signal(str, str)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.viewers: dict[str, InputViewer] = {}
        self.start_dir = ""
        self._lay = QtWidgets.QVBoxLayout(self)
        self._lay.setContentsMargins(0, 0, 0, 0)
        self.empty = QtWidgets.QLabel("Launch Analysis to load inputs.")
        self.empty.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
        self._lay.addWidget(self.empty)

    def set_inputs(self, layers: list[str]) -> list[InputViewer]:
        """Create the viewers (one per input layer), replacing previous ones."""
        for v in self.viewers.values():
            v.setParent(None)
            v.deleteLater()
        self.viewers = {}
        self.empty.setVisible(not layers)
        for name in layers:
            v = InputViewer(name, self)
            v.open_requested.connect(self.choose_file)
            self._lay.addWidget(v, 1)
            self.viewers[name] = v
        return list(self.viewers.values())

    def choose_file(self, layer: str) -> None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, f"Open Input File for {layer}", self.start_dir, FILE_FILTER)
        if path:
            self.file_chosen.emit(layer, path)

    def show_frame(self, frame) -> None:  # noqa: ANN001 - app.analysis.live.InputFrame
        viewer = self.viewers.get(frame.layer)
        if viewer is not None:
            viewer.show_frame(frame)
