"""The dense source's probe (docs/retrieval.md "Fifth version: cheaper dense rounds").

In the lists a widened round adds, a row blended with its predecessor starts with a loose
bound (the predecessor's dot taken at ``|q|`` × the longest indexed vector); the
predecessor's codes are gathered only where a bound that high could change what the probe
answers. These tests hold the loose bounds to being
bounds, and the probe's answers (the best rows, the least of them, the counts a widened round
reads) to those of every bound tight.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
import pytest

from engine.retrieval import RetrievalRequest, Retriever
from engine.retrieval.dense import IvfIndex, Probe, SemanticBounds
from engine.store.view import ViewSnapshot
from tests.engine.retrieval.test_candidates import BLENDED, NOW, Conversations, Workload

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
Rows = npt.NDArray[np.intp]


@pytest.fixture(scope="module")
def conversations() -> Conversations:
    return Conversations(6000, seed=13)


def _probe(retriever: Retriever, snapshot: ViewSnapshot, query: F32, widths: Sequence[int],
           agent: str | None = None) -> tuple[Probe, F64]:
    """A probe of ``widths[-1]`` lists, read as rounds of these widths would read it, and
    every probed row's exact (blended, centred) cosine."""
    request = RetrievalRequest(max_tokens=300, query="w1", agent_id=agent)
    candidates = retriever._candidates(snapshot, request, NOW)
    blend = retriever._blend(snapshot, candidates)
    assert blend is not None
    probe = Probe.start(retriever.dense_index(snapshot), query)
    for width in widths:
        probe = probe.read(width, candidates.eligible, blend.previous,
                           lambda rows, dots, before: retriever._semantic_bounds(
                               snapshot, query, candidates, rows, dots, before))
    return probe, retriever._cosine(snapshot, query, candidates, probe.rows)


def _near(work: Workload, row: int) -> F32:
    """A unit query close to record ``row``'s vector, the same whichever test asks first (the
    workload's own generator is shared by the module's tests)."""
    noise = np.random.default_rng(row).standard_normal(work.vectors.shape[1])
    query = work.vectors[row] + 0.03 * noise.astype(np.float32)
    unit: F32 = (query / np.linalg.norm(query)).astype(np.float32)
    return unit


def _looked_up(rows: Rows, values: F64) -> Callable[[Rows], F64]:
    """``values`` (of ``rows``) looked up for any of those rows."""
    ascending = np.argsort(rows)
    known, found = rows[ascending], values[ascending]

    def value(asked: Rows) -> F64:
        picked: F64 = found[np.searchsorted(known, asked)]
        return picked

    return value


def _tight(retriever: Retriever, snapshot: ViewSnapshot, probe: Probe,
           agent: str | None = None) -> F64:
    """Every probed row's bound with its predecessor's codes gathered (the fourth version's)."""
    request = RetrievalRequest(max_tokens=300, query="w1", agent_id=agent)
    candidates = retriever._candidates(snapshot, request, NOW)
    return retriever._semantic_bounds(snapshot, probe.query, candidates, probe.rows, probe.own)


@pytest.mark.parametrize("agent", [None, "agent1"])
def test_loose_and_tightened_bounds_both_bound_the_exact_cosine(
        conversations: Conversations, agent: str | None) -> None:
    retriever = Retriever(BLENDED[True][1])
    snapshot = conversations.view.snapshot()
    for row in range(0, 6000, 500):
        query = _near(conversations, row)
        first, _ = _probe(retriever, snapshot, query, [4], agent)
        assert not first.loose.any()  # the nearest lists: every bound tight at once
        probe, exact = _probe(retriever, snapshot, query, [4, 16], agent)
        loose = probe.loose.copy()
        assert not loose[:len(first.rows)].any()
        assert loose.sum() > len(probe.rows) // 4  # a day's window: most rows are blended
        assert (probe.bounds >= exact).all()
        tight = _tight(retriever, snapshot, probe, agent)
        assert (probe.bounds[loose] > tight[loose]).all()  # the loose ones are looser
        # the same bounds (a BLAS product may round a row's last bit apart in another block)
        np.testing.assert_allclose(probe.bounds[~loose], tight[~loose], rtol=0, atol=1e-7)
        probe.tighten(np.arange(len(probe.rows)))
        assert not probe.loose.any()
        np.testing.assert_allclose(probe.bounds, tight, rtol=0, atol=1e-7)
        assert (probe.bounds >= exact).all()


def test_the_probe_gathers_predecessor_codes_only_where_they_can_matter(
        conversations: Conversations) -> None:
    """The best rows and their least cosine are those of scoring every probed row, while in
    a wide probe (as a widened round's: most lists far from the query) most blended rows'
    predecessors are never gathered; a count over a value (what a widened round reads to size
    the dense source) is the count of the tight bounds over it."""
    retriever = Retriever(dataclasses.replace(BLENDED[True][1], dense_candidates=32))
    snapshot = conversations.view.snapshot()
    never_gathered = []  # of the blended rows of the lists the wider read added
    for row in range(0, 6000, 400):
        probe, exact = _probe(retriever, snapshot, _near(conversations, row), [12, 40])
        tight = _tight(retriever, snapshot, probe)
        blended = int(probe.loose.sum())
        best, least, (computed, cosines) = probe.best(32, _looked_up(probe.rows, exact))
        top = np.argsort(-exact, kind="stable")[:32]
        assert set(best.tolist()) == set(probe.rows[top].tolist())
        assert least == float(exact[top].min())
        assert (np.diff(computed) > 0).all() and len(cosines) == len(computed)
        # every row scored exactly would be scored with every bound tight, and no other
        scored = np.isin(probe.rows, computed)
        assert (tight[~scored] <= least).all()
        never_gathered.append(int(probe.loose.sum()) / blended)
        for value in (least, least - 0.05, least - 0.2, 0.0):
            assert probe.count_over(value) == int(np.count_nonzero(tight > value))
        assert (probe.bounds >= exact).all()
    # 62-98 %, median 85 % here; the fourth version gathered every one
    assert float(np.median(never_gathered)) > 0.6


def test_a_widened_probe_keeps_what_the_narrower_one_tightened(
        conversations: Conversations) -> None:
    retriever = Retriever(BLENDED[True][1])
    snapshot = conversations.view.snapshot()
    request = RetrievalRequest(max_tokens=300, query="w1")
    candidates = retriever._candidates(snapshot, request, NOW)
    query = _near(conversations, 77)
    narrow, _ = _probe(retriever, snapshot, query, [3, 6])
    narrow.tighten(np.arange(0, len(narrow.rows), 3))
    blend = retriever._blend(snapshot, candidates)
    assert blend is not None and narrow.semantic is not None and narrow.loose.any()
    wide = narrow.read(12, candidates.eligible, blend.previous, narrow.semantic)
    fresh, exact = _probe(retriever, snapshot, query, [3, 12])
    assert wide.lists == fresh.lists == 12
    np.testing.assert_array_equal(np.sort(wide.rows), np.sort(fresh.rows))
    head = len(narrow.rows)
    np.testing.assert_array_equal(wide.loose[:head], narrow.loose)
    np.testing.assert_array_equal(wide.bounds[:head], narrow.bounds)
    order = np.argsort(wide.rows)
    assert (wide.bounds[order] >= exact[np.argsort(fresh.rows)]).all()
    assert narrow.read(4, candidates.eligible, blend.previous, lambda *_: np.zeros(0)) \
        is narrow  # nothing more to read


def test_the_longest_vector_bounds_every_dot_product_through_appends() -> None:
    work = Workload(1200, seed=5)
    vectors = work.vectors.copy()
    vectors[10] *= 1.5  # not every store holds unit vectors only
    has = np.ones(1200, dtype=bool)
    index = IvfIndex.build(vectors[:1000], has[:1000])
    assert 1.5 <= index.longest < 1.5 * (1 + 1e-5)
    vectors[1100] *= 3.0
    longer = index.extended(vectors, has)
    assert 3.0 <= longer.longest < 3.0 * (1 + 1e-5)
    query = work.query_near(3)
    dots = (vectors @ query).astype(np.float64)
    assert (dots <= float(np.linalg.norm(query.astype(np.float64))) * longer.longest).all()


def test_dot_bounds_gathered_in_blocks_are_the_probed_lists_bounds() -> None:
    """A gather of more rows than one block (512) gives every row the bound the probe of its
    list gives it, and both bound the exact dot product."""
    work = Workload(3000, seed=9)
    index = IvfIndex.build(work.vectors, np.ones(3000, dtype=bool))
    query = work.query_near(42)
    rows, bounds = index.probe_bounds(query, index.lists)
    shuffled = np.random.default_rng(1).permutation(len(rows))
    gathered = index.dot_bounds(query, rows[shuffled])
    np.testing.assert_allclose(gathered, bounds[shuffled], rtol=0, atol=1e-6)
    exact = np.einsum("ij,j->i", work.vectors[rows], query).astype(np.float64)
    assert (bounds >= exact).all() and (gathered >= exact[shuffled]).all()


def test_a_widened_probe_reads_further_lists_while_a_step_holds_a_row_over_the_bar(
        conversations: Conversations) -> None:
    """``Probe.read_while`` (docs/retrieval.md "Sixth version: fewer lists in widened
    rounds"): after the lists already read, a step of lists is read whenever the step before
    it held a row whose **tight** bound is over the bar (a list that can still hold such a
    row is probed), and the probe stops after the first step holding none — reporting that it
    stopped on the rule — or at the most it may read, reporting it did not. The expected
    reads are worked out step by step from every probed row's tight bound."""
    retriever = Retriever(BLENDED[True][1])
    snapshot = conversations.view.snapshot()
    request = RetrievalRequest(max_tokens=300, query="w1")
    candidates = retriever._candidates(snapshot, request, NOW)
    blend = retriever._blend(snapshot, candidates)
    assert blend is not None
    step, most = 4, 40
    stops, continued, loose_over = set(), 0, 0
    for row in range(0, 6000, 600):
        query = _near(conversations, row)
        full, _ = _probe(retriever, snapshot, query, range(step, most + 1, step))
        tight = _tight(retriever, snapshot, full)
        # where each step's rows begin in the probe (read a step at a time, as read_while)
        ends = [len(_probe(retriever, snapshot, query, range(step, lists + 1, step))[0].rows)
                for lists in range(step, most + 1, step)]
        later = tight[ends[0]:]
        # bars that stop the probe at various steps, after the first, and never
        bars = [*np.quantile(later, [0.9, 0.99, 0.999]).tolist(), float(later.max()),
                float(later.min()) - 1.0]
        for bar in bars:
            lists, stopped = most, False
            for start, end, reached in zip(ends, ends[1:], range(2 * step, most + 1, step),
                                           strict=False):
                if not (tight[start:end] > bar).any():
                    lists, stopped = reached, True
                    break
            first, _ = _probe(retriever, snapshot, query, [step])
            read, said = first.read_while(most, step, bar, candidates.eligible,
                                          blend.previous, _semantic_of(first))
            assert (read.lists, said) == (lists, stopped), (row, bar)
            stops.add(lists)
            continued += lists > 2 * step
            # a loose bound over the bar is tightened before it can keep the probe reading
            loose_over += int(np.count_nonzero(full.bounds[ends[0]:] > bar)) > int(
                np.count_nonzero(later > bar))
    assert len(stops) >= 3 and continued >= 5 and most in stops and 2 * step in stops
    assert loose_over >= 3


def _semantic_of(probe: Probe) -> SemanticBounds:
    """The probe's transform from dot bounds to semantic bounds (set once it read a list)."""
    assert probe.semantic is not None
    return probe.semantic
