"""LayerLab's application layer: the Qt designer (app.gui, app.designer.main_window) and the `layerlab` command line (app.cli, Qt-free)."""
