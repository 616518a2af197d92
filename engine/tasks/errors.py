"""Errors of task workspaces (seed 003), all in the engine's one exception tree.

::

    * EngineError
      + CycleDetected (engine.errors)     1002: a reference or dependency cycle, with its path
      + ValidationError (engine.errors)
        + InputFormatError (engine.errors)
          + CardFormatError               front matter is not valid YAML / a field is wrong
          + MissingReference              ``@target`` names no card (file and line)
          + MissingAnchor                 ``@target#Anchor`` names no heading (file and line)
          + MissingDependency             ``depends_on`` names no card (file and line)
        + DuplicateCardId                 two files declare the same ``id``
        + CardNotFound                    a command names an id no card has
        + WorkspaceNotFound               the workspace folder does not exist
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.errors import InputFormatError, ValidationError

__all__ = [
    "CardFormatError",
    "CardNotFound",
    "DuplicateCardId",
    "MissingAnchor",
    "MissingDependency",
    "MissingReference",
    "WorkspaceNotFound",
]


class CardFormatError(InputFormatError):
    """A card's front matter is malformed; names the file, the line and the field."""


class MissingReference(InputFormatError):
    """A reference ``@target`` resolves to no card.

    Attributes:
        target: The reference as written, without the ``@``.
    """

    def __init__(self, source: str, line: int, target: str) -> None:
        super().__init__(source, line, "reference", f"@{target} names no card in the workspace")
        self.target = target


class MissingAnchor(InputFormatError):
    """An anchored reference ``@target#Anchor`` names a heading the target does not have."""

    def __init__(self, source: str, line: int, target: str, anchor: str) -> None:
        super().__init__(source, line, "reference",
                         f"@{target}#{anchor}: {target} has no heading {anchor!r}")
        self.target = target
        self.anchor = anchor


class MissingDependency(InputFormatError):
    """``depends_on`` names an id that no card of the workspace has."""

    def __init__(self, source: str, line: int, dependency: str) -> None:
        super().__init__(source, line, "depends_on", f"{dependency!r} names no card")
        self.dependency = dependency


class DuplicateCardId(ValidationError):
    """Two (or more) files declare the same card id."""

    def __init__(self, card_id: str, sources: Sequence[str]) -> None:
        super().__init__("id", card_id, f"declared by several files: {', '.join(sources)}")
        self.card_id = card_id
        self.sources = list(sources)


class CardNotFound(ValidationError):
    """No card of the workspace has the requested id or path."""

    def __init__(self, card_id: str) -> None:
        super().__init__("card", card_id, "no card with this id or path in the workspace")
        self.card_id = card_id


class WorkspaceNotFound(ValidationError):
    """The workspace folder does not exist or is not a folder."""

    def __init__(self, root: str) -> None:
        super().__init__("workspace", root, "is not a folder")
        self.root = root
