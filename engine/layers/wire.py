"""Reading the layer types back from their wire form (the introspection API's JSON).

The ``to_json`` methods of :mod:`.social`, :mod:`.procedural`, :mod:`.spatial` and
:mod:`.service` write the API's documents; their ``from_json`` twins use :func:`parse` so a
client (the desktop app attached to ``mnemoscope serve``) gets the same frozen types as a local
engine, and a malformed document is a :class:`~engine.errors.ValidationError` naming the type
and the field, never a ``KeyError`` from deep inside a view.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from engine.errors import ValidationError

__all__ = ["number", "optional_number", "parse", "texts"]

T = TypeVar("T")


def parse(kind: str, data: object, build: Callable[[Mapping[str, Any]], T]) -> T:
    """``build(data)``, with a missing or mistyped field reported as a ValidationError.

    Args:
        kind: What is being read (``"social summary"``), for the message.
        data: The JSON object.
        build: Builds the value from the object; may raise KeyError, TypeError or ValueError.
    """
    if not isinstance(data, Mapping):
        raise ValidationError(kind, data, "must be a JSON object")
    try:
        return build(data)
    except KeyError as exc:
        raise ValidationError(f"{kind}.{exc.args[0]}", None, "is required") from exc
    except (TypeError, ValueError) as exc:
        raise ValidationError(kind, dict(data), f"has a field of the wrong type: {exc}") \
            from exc


def number(value: object) -> float:
    """A finite JSON number (booleans refused)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(value):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def optional_number(value: object) -> float | None:
    """A finite JSON number or null."""
    return None if value is None else number(value)


def texts(value: object) -> tuple[str, ...]:
    """A JSON list of strings."""
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"expected a list of strings, got {value!r}")
    return tuple(value)
