"""Analysis mode: the worker-side session that keeps the network built and reruns it on every change,
and the panels that show it (model inputs, analysis output, parameter editor, network overview, channel
inspector, debugger controls). The maths behind the panels lives in engine/analysis.py."""
