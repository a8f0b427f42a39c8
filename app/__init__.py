"""LayerLab's application layer: the Qt designer (app.gui starts app.designer) and the `layerlab` command line
(app.cli, Qt-free)."""
