"""Exceptions a user can cause. Each message names what is wrong and what is expected."""
from __future__ import annotations


class LayerLabError(Exception):
    """Base class of every error LayerLab reports to a user (CLI exit status 2, GUI message)."""


class ModelFileError(LayerLabError):
    """A model file cannot be read: names the file, the line and the reason."""

    def __init__(self, path: str, line: int | None, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {reason}")


class TemplateError(ModelFileError):
    """A template definition or use is wrong: names the template, where (the file and line when it was read
    from a file, else the element) and what is wrong."""

    def __init__(self, template: str, reason: str, path: str | None = None, line: int | None = None) -> None:
        self.template = template
        LayerLabError.__init__(self)
        self.path = str(path) if path else ""
        self.line = line
        self.reason = f"template {template}: {reason}"
        where = (f"{self.path}:{line}: " if line else f"{self.path}: ") if self.path else ""
        self.args = (f"{where}{self.reason}",)


class ParameterError(LayerLabError):
    """A layer parameter has a bad value: names the layer, the parameter, the value and what is allowed."""


class ShapeError(LayerLabError):
    """Tensor shapes do not fit together."""


class WeightsError(LayerLabError):
    """A weight file is missing, unreadable or of the wrong shape."""


class BackendError(LayerLabError):
    """A backend was asked for that cannot be used here."""


class GraphError(LayerLabError):
    """The layer graph cannot be executed (cycle, missing input, unknown layer)."""


class PluginError(LayerLabError):
    """A plugin failed to import or register."""


class InputError(LayerLabError):
    """An input file cannot be read or does not fit its input layer."""


def check_at_least(what: str, value: int, minimum: int, error: type[LayerLabError] = InputError) -> None:
    """Raise ``error`` naming ``what``, the bound and ``value`` when ``value`` is below ``minimum``: the one
    wording of a count setting's lower bound ("must be at least 1", "must be 0 or more") wherever one is checked."""
    if value < minimum:
        bound = "0 or more" if minimum == 0 else f"at least {minimum}"
        raise error(f"{what} must be {bound}, got {value}")
