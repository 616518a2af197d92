"""Text for a person's terminal: control characters and escape sequences shown, not obeyed.

Stored memories, file names and what a network client sends can hold escape sequences that
retitle, clear or overwrite the terminal (issue 18: ``ESC ]0;…``, ``ESC [2J``). Every line this
process writes for a person — command output, error messages, log lines — passes
:func:`escape_controls` first.
"""

from __future__ import annotations

import re

__all__ = ["escape_controls"]

# C0 controls but newline and tab (ESC starts every terminal escape sequence; CR and BS
# overwrite what was printed), DEL, C1 controls (0x9b is a one-byte CSI on some terminals) and
# the bidirectional overrides and isolates (they reorder what is shown, "Trojan Source").
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def escape_controls(text: str) -> str:
    """``text`` with control characters shown as ``\\xNN`` / ``\\uNNNN`` (newline, tab kept)."""
    return _CONTROLS.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
