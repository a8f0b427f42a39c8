"""Consent to run custom layer code.

A model file that carries custom layers carries code. Opening, viewing and type-checking it never runs or
compiles that code; running it needs the user's consent, given per definition content (a SHA-256 of the
definition), so a changed definition needs consent again. The command line gives it with
``--trust-custom-code``; the designer asks once per file content and remembers the answer in its settings;
a definition the user writes or edits in the designer is theirs, and trusted.

Consent belongs to the user's session, not to one model object (networks copy models for templates and
fusing rules, the designer's worker runs on a copy): it is held by one ``Consent`` object for the process,
``CONSENT``, which is only ever added to or cleared, never read for anything but this check."""
from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable

from engine.custom.definition import CustomLayerDef
from engine.errors import LayerLabError


class ConsentError(LayerLabError):
    """Custom layer code was about to run without the user's consent: names the custom layers."""


class Consent:
    """The definition digests the user has agreed to run."""

    def __init__(self) -> None:
        self._granted: set[str] = set()
        self._lock = threading.Lock()

    def grant(self, definitions: Iterable[CustomLayerDef]) -> None:
        with self._lock:
            self._granted.update(d.digest() for d in definitions)

    def granted(self, definition: CustomLayerDef) -> bool:
        with self._lock:
            return definition.digest() in self._granted

    def missing(self, definitions: Iterable[CustomLayerDef]) -> list[CustomLayerDef]:
        """The definitions not consented to yet."""
        return [d for d in definitions if not self.granted(d)]

    def clear(self) -> None:
        with self._lock:
            self._granted.clear()

    def require(self, definition: CustomLayerDef) -> None:
        """Raise ConsentError unless ``definition`` may run."""
        if not self.granted(definition):
            raise ConsentError(consent_message([definition.name]))


CONSENT = Consent()


def consent_message(names: Iterable[str]) -> str:
    listed = ", ".join(sorted(names))
    return (f"the model carries custom layer code ({listed}), which runs only with your consent: on the command line "
            "add --trust-custom-code; in the designer accept the prompt when you run it")


def content_hash(definition_texts: Iterable[str]) -> str:
    """One hash of a model's custom layer definitions (their XML texts): what the designer remembers."""
    h = hashlib.sha256()
    for text in sorted(definition_texts):
        h.update(text.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()
