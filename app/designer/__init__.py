"""The designer: the main window, the controllers it composes (documents, templates, runs, reports, autosave, recent
files, collections, network layers, custom layers), its dialogs and panels. Started by ``app.gui``."""
