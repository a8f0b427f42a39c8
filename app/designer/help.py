"""Help > Layer Documentation (the documentation browser, following the current model's templates and custom layers
and the selected layer) and Help > About."""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app.designer.context import Controller, DesignerContext
from app.designer.docs_browser import DocsBrowser
from engine.custom import custom_descs
from engine.templates import template_descs


class Help(Controller):
    """The documentation browser (``docs_browser``, made when first shown) and the About box."""

    def __init__(self, ctx: DesignerContext) -> None:
        super().__init__(ctx)
        self.docs_browser: DocsBrowser | None = None

    def show_docs(self, key: str | None = None) -> DocsBrowser:
        """Show the documentation of ``key`` (default: the selected layer's type)."""
        current = self.ctx.documents.current
        if self.docs_browser is None:
            self.docs_browser = DocsBrowser(self.ctx.registry, self.ctx.parent)
        self.docs_browser.set_templates([*template_descs(current.model, current.registry),
                                         *custom_descs(current.model)] if current else [])
        if key is None and current is not None:
            sel = current.canvas.selected_layers()
            if sel:
                key = "layer:" + current.model.layers[sel[0]].type
        if key:
            self.docs_browser.show_entry(key)
        self.docs_browser.show()
        self.docs_browser.raise_()
        return self.docs_browser

    def reload(self) -> None:
        """What the registry offers changed: the browser is made again (and shown again if it was visible)."""
        browser = self.docs_browser
        if browser is None:
            return
        visible = browser.isVisible()
        browser.close()
        browser.deleteLater()
        self.docs_browser = None
        if visible:
            self.show_docs()

    def close(self) -> None:
        """The window closes."""
        if self.docs_browser is not None:
            self.docs_browser.close()

    def about(self) -> None:
        """Help > About LayerLab."""
        registry = self.ctx.registry
        plugins = ", ".join(f"{p.meta.name} {p.meta.version}" for p in registry.plugins.values())
        QtWidgets.QMessageBox.about(
            self.ctx.parent, "About LayerLab",
            "<h3>LayerLab</h3><p>Design, run, profile and export convolutional networks.</p>"
            f"<p>{len(registry.layer_names)} layers and {len(registry.activation_names)} activations "
            f"from: {plugins}</p><p>Qt {QtCore.qVersion()}</p>")
