"""Choice boxes of engine codes that show words: the code rides along as the item's data.

The engine's privacy partitions are ``PUBLIC`` and ``PRIVATE`` — right on the wire, shouted in a
form whose other choices ("episodic", "fact", "human") are words. Every box that offers a privacy
(the Records filter and detail, Add memory, the Pipeline's form) shows "public" and "private"
through these helpers, as the detail's fields and the History already did.
"""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox

from engine.records import Privacy

__all__ = ["chosen_privacy", "fill_privacy", "show_privacy"]


def fill_privacy(box: QComboBox, *, any_text: str | None = None) -> None:
    """Offer the privacy partitions in ``box`` as words, after ``any_text`` (no choice) if
    given."""
    if any_text is not None:
        box.addItem(any_text, None)
    for privacy in Privacy:
        box.addItem(privacy.value.lower(), privacy.value)


def chosen_privacy(box: QComboBox) -> Privacy | None:
    """The privacy chosen in ``box`` (None: its "any" item, or nothing chosen)."""
    code = box.currentData()
    return Privacy(code) if isinstance(code, str) else None


def show_privacy(box: QComboBox, privacy: Privacy) -> None:
    """Choose ``privacy`` in ``box``."""
    box.setCurrentIndex(box.findData(privacy.value))
