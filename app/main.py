"""``mnemoscope``: the desktop app without a command, the command line with one.

Kept import-light: Qt is imported only when the window is wanted, the engine's heavy parts only
by the commands that need them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

# Retrieval's matrix-vector products are small and memory-bound: a multi-threaded BLAS made them
# wait 6-15 ms for its threads on 2 cores (measured). Set before numpy is first imported; a user
# can still override it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mnemoscope`` console script."""
    from app.cli import run_cli

    return run_cli(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
