"""Built-in plugin collections (standard layers, activations, ...)."""
