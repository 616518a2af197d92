"""Command groups that several command modules add sub-commands to (``eval``)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["eval_group"]


def eval_group(subparsers: Any) -> Any:
    """The ``eval`` command's sub-parsers, created by whichever module asks first."""
    existing = subparsers.choices.get("eval")
    if existing is not None:
        for action in existing._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action
    parser = subparsers.add_parser("eval", help="evaluate engine decisions on labelled data "
                                                "(dedup: STS-B pairs; locomo: retrieval hit@k)")
    return parser.add_subparsers(dest="eval_what", metavar="WHAT", required=True)
