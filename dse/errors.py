"""One error type for bad user input.

Every loader raises :class:`InputError` with a one-line message of the form
``<file>: <field>: `x <= y` must hold, but got (x=…, y=…)``; the CLI prints it and exits
with status 2 (docs/architecture.md, "Bad input").  Code never uses ``assert`` on user input.
"""

from __future__ import annotations


class InputError(ValueError):
    """A user-supplied file, flag or field that violates a stated rule."""

    def __init__(self, where: str, field: str, rule: str):
        self.where, self.field, self.rule = where, field, rule
        super().__init__(f"{where}: {field}: {rule}")


def require(ok: bool, where: str, field: str, rule: str) -> None:
    """Raise :class:`InputError` unless ``ok``."""
    if not ok:
        raise InputError(where, field, rule)
