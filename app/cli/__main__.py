"""``python -m app.cli``: the ``layerlab`` command line, as the console script runs it."""
from app.cli import main

raise SystemExit(main())
