"""View > Figures on Canvas: which per-layer figure the canvases show (``canvas.overlay``), and where it comes from —
the model's latest report (a run's, or a report file opened for it), the latest precision comparison (Analysis >
Compare Precision), or the open report comparison (Tools > Compare Inference Reports: the report picked in its
summary, else its newest, against its base). Figures follow new runs, comparisons and tab changes."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from app.designer.context import Controller, DesignerContext
from app.designer.document import Document
from app.designer.reports import Reports, canvas_layer
from canvas.overlay import FigureOverlay
from engine.figures import DIFF, DRIFT, KINDS, TIME, Figures, drift_figures, profile_figures

NONE = ""
#: what to do to get each figure, said when the model has none yet
HOW = {TIME: "run the model (Tools > Launch Inference) or open a report of it (Tools > Open Inference Report)",
       DRIFT: "compare precisions (Analysis > Compare Precision)",
       DIFF: "compare reports of it (Tools > Compare Inference Reports)"}


class CanvasFigures(Controller):
    """The View menu's figure choice (``actions``: None and one per ``engine.figures.KINDS``, and ``act_show``, the
    toggle between None and the last figure chosen) and one ``FigureOverlay`` per open model."""

    def __init__(self, ctx: DesignerContext, reports: Reports, run_finished: QtCore.SignalInstance,
                 analysis: QtCore.QObject, analysed: Callable[[], Document | None]) -> None:
        """``run_finished``: the worker's signal after a run; ``analysis``: the analysis session's proxy (its ``drift``
        and ``precision_fixed`` signals); ``analysed``: the model analysis runs on."""
        super().__init__(ctx)
        self.reports = reports
        self._analysed = analysed
        self._drift: tuple[int, Any] | None = None  # (document id, engine.analysis.DriftResult)
        self._overlays: dict[int, FigureOverlay] = {}
        self._hooked: set[int] = set()  # comparison dialogs whose changes refresh the figures
        self.kind = NONE
        self._last = TIME
        self.group = QtGui.QActionGroup(self)
        self.group.setExclusive(True)
        self.actions: dict[str, QtGui.QAction] = {}
        for key, text in [(NONE, "&None"), *((k.key, k.text) for k in KINDS.values())]:
            act = QtGui.QAction(text, self)
            act.setCheckable(True)
            act.setStatusTip("Colour each layer by this figure, with its value and a legend" if key else
                             "No figures on the canvas")
            act.triggered.connect(lambda _c=False, k=key: self.choose(k))
            self.group.addAction(act)
            self.actions[key] = act
        self.actions[NONE].setChecked(True)
        self.act_show = QtGui.QAction("Show &Figures on Canvas", self)
        self.act_show.setCheckable(True)
        self.act_show.setShortcut(QtGui.QKeySequence("Ctrl+Shift+F"))
        self.act_show.setStatusTip("Colour each layer by its time, drift or change (View > Figures on Canvas)")
        self.act_show.toggled.connect(lambda on: self.choose(self._last if on else NONE))
        self.menu = QtWidgets.QMenu("Fi&gures on Canvas", ctx.parent)
        self.menu.addAction(self.act_show)
        self.menu.addSeparator()
        self.menu.addActions(list(self.actions.values()))
        view = ctx.menu("View")
        if view is not None:
            view.addSeparator()
            view.addMenu(self.menu)
        run_finished.connect(self._run_finished)  # queued after the slot that shows the run's report
        analysis.drift.connect(self._drift_done)  # Compare Precision
        analysis.precision_fixed.connect(lambda report: self._drift_done(report.after))  # Pin Diverging Layers
        ctx.documents.tabs.currentChanged.connect(self._tab_changed)
        reports.closed.connect(self._refresh_later)
        app = QtWidgets.QApplication.instance()
        if app is not None:  # a comparison dialog opened or changed: its figures may be the ones shown
            app.focusWindowChanged.connect(self._focus_changed)  # (a method: disconnected when this goes)

    # ---- choice ------------------------------------------------------------------------------------------------
    def choose(self, kind: str) -> None:
        """Show figure ``kind`` on every canvas (``NONE``: none)."""
        if kind not in self.actions:
            raise ValueError(f"unknown figure {kind!r}; figures: {', '.join(KINDS)}")
        self.kind = kind
        if kind:
            self._last = kind
        self.actions[kind].setChecked(True)
        self.act_show.blockSignals(True)  # (its toggle would choose again)
        self.act_show.setChecked(bool(kind))
        self.act_show.blockSignals(False)
        self.refresh()
        doc = self.ctx.documents.current
        if kind and doc is not None and not self.figures(doc, kind):
            self.ctx.status(f"No {KINDS[kind].text.lower()} for {doc.title} yet: {HOW[kind]}", 10000)

    def overlay(self, doc: Document) -> FigureOverlay:
        """``doc``'s canvas overlay (made when first asked for)."""
        found = self._overlays.get(doc.id)
        if found is None:
            found = self._overlays[doc.id] = FigureOverlay(doc.canvas)
        return found

    # ---- sources -----------------------------------------------------------------------------------------------
    def _rename(self, doc: Document) -> Callable[[str], str | None]:
        return lambda name: canvas_layer(doc, name)

    def report_of(self, doc: Document) -> dict[str, Any] | None:
        """``doc``'s profile: the report tab shown now if it is one of ``doc``'s, else its latest report tab. A report
        no open model claims (e.g. ``layerlab profile`` of an imported ONNX file) is ``doc``'s when it names
        ``doc``'s model."""
        def mine(view: Any) -> bool:
            owner = self.reports.doc_for_report(view)
            return owner is doc or (owner is None and view.model_name == doc.model.name)

        views = [v for v in self.reports.reports if mine(v)]
        current = self.reports.current_report
        view = current if current in views else (views[-1] if views else None)
        return view.report if view is not None else None

    def comparison_of(self, doc: Document) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(report, base) of the newest open comparison with a layer on ``doc``'s canvas: the report selected in its
        summary, else its newest one that is not the base."""
        for dlg in reversed(self.reports.compare_dialogs):
            self._hook(dlg)
            c = dlg.comparison
            if c is None or len(c.reports) < 2:
                continue
            rows = sorted({i.row() for i in dlg.summary.selectedIndexes()} - {c.base})
            pick = rows[-1] if rows else max(i for i in range(len(c.reports)) if i != c.base)
            report, base = c.reports[pick], c.reports[c.base]
            if any(canvas_layer(doc, x["name"]) is not None for x in report["layers"]):
                return report, base
        return None

    def figures(self, doc: Document, kind: str) -> Figures:
        """The figures of ``kind`` for ``doc``'s layers (empty when it has none)."""
        if kind == TIME:
            report = self.report_of(doc)
            return profile_figures(report, rename=self._rename(doc)) if report is not None else {}
        if kind == DIFF:
            pair = self.comparison_of(doc)
            return profile_figures(pair[0], pair[1], self._rename(doc)) if pair is not None else {}
        if kind == DRIFT and self._drift is not None and self._drift[0] == doc.id:
            return drift_figures(self._drift[1], self._rename(doc))
        return {}

    # ---- updates -----------------------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Show the chosen figure's latest figures on every open model's canvas."""
        docs = list(self.ctx.documents.docs)
        open_ids = {d.id for d in docs}
        self._overlays = {i: o for i, o in self._overlays.items() if i in open_ids}
        for doc in docs:
            figures = self.figures(doc, self.kind) if self.kind else {}
            if figures:
                self.overlay(doc).show_figures(self.kind, figures)
            elif doc.id in self._overlays:
                self._overlays[doc.id].clear()

    def _refresh_later(self) -> None:
        """``refresh``, from a signal or a timer that may come while the window closes."""
        try:
            self.refresh()
        except RuntimeError:  # the window was closed before the timer came due
            pass

    def _focus_changed(self, _window: Any) -> None:
        if self.kind == DIFF:
            self._refresh_later()

    def _tab_changed(self, _index: int) -> None:
        self._refresh_later()

    def _run_finished(self, _run_id: int, _result: Any) -> None:
        self.refresh()

    def _drift_done(self, result: Any) -> None:
        doc = self._analysed()
        if doc is not None:
            self._drift = (doc.id, result)
            self.refresh()

    def _hook(self, dlg: QtWidgets.QDialog) -> None:
        """A comparison dialog's base or selection changes the figures shown."""
        key = id(dlg)
        if key in self._hooked:
            return
        self._hooked.add(key)
        dlg.base.currentIndexChanged.connect(lambda _i: self.kind == DIFF and self.refresh())
        dlg.summary.itemSelectionChanged.connect(lambda: self.kind == DIFF and self.refresh())
        dlg.destroyed.connect(lambda _o=None: self._dialog_gone(key))

    def _dialog_gone(self, key: int) -> None:
        self._hooked.discard(key)
        if self.kind == DIFF:
            QtCore.QTimer.singleShot(0, self._refresh_later)  # (it is still in the list of dialogs now)
