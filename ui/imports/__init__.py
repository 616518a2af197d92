"""Bringing memories in and out: imports, previews, undo, other tools' collections."""
