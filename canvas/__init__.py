"""The node-graph editor: a NodeGraphQt view of an engine Model (the Model stays the source of truth)."""
