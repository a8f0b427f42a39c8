"""What the designer and the ``layerlab`` command line share, Qt-free: export requests (``export``) and the
command-line text that reproduces a run (``commandline``). Neither side imports the other; both import these."""
