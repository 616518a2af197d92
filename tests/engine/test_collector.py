"""fewer_collections: raises the first GC threshold for a batch and always puts it back."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from engine.collector import BATCH_THRESHOLD, fewer_collections


@pytest.fixture(autouse=True)
def default_threshold() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def test_raised_inside_and_restored_after() -> None:
    with fewer_collections():
        assert gc.get_threshold() == (BATCH_THRESHOLD, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_restored_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("batch failed")
    assert gc.get_threshold() == (700, 10, 10)


def test_a_higher_threshold_is_left_alone() -> None:
    gc.set_threshold(50_000, 20, 30)
    with fewer_collections():
        assert gc.get_threshold() == (50_000, 20, 30)
    assert gc.get_threshold() == (50_000, 20, 30)


def test_nested_and_overlapping_users_restore_once_the_last_leaves() -> None:
    inside, leave = threading.Event(), threading.Event()
    seen: list[tuple[int, int, int]] = []

    def other() -> None:
        with fewer_collections():
            inside.set()
            leave.wait(5)
        seen.append(gc.get_threshold())

    thread = threading.Thread(target=other)
    with fewer_collections():
        thread.start()
        assert inside.wait(5)
        with fewer_collections():
            pass
        assert gc.get_threshold()[0] == BATCH_THRESHOLD  # the nested exit kept it raised
    assert gc.get_threshold()[0] == BATCH_THRESHOLD  # the other thread is still inside
    leave.set()
    thread.join(5)
    assert seen == [(700, 10, 10)] and gc.get_threshold() == (700, 10, 10)
