"""Memory lifecycle: TTL expiry, seed 004 pruning, retention caps, episodic compaction.

Selections (:mod:`.pruning`, :func:`.compaction.select_compaction`) are pure functions of a view
snapshot; :class:`Lifecycle` applies them through the engine (undoable deletes, audit events),
or only reports them on a dry run. :class:`LifecycleScheduler` runs them on an interval in a
background thread wherever the engine is long-lived; :mod:`.capacity` holds the episodic ring
buffer and strict caps at write time.
"""

from engine.lifecycle.capacity import (
    EVENT_ROLLED_OFF,
    RING_ACTOR,
    CapacityPlan,
    plan_capacity,
    roll_off,
)
from engine.lifecycle.compaction import (
    PROMPT_TEMPLATE,
    HeuristicSummarizer,
    SummarizationTask,
    Summarizer,
    TaskStatus,
    assemble_prompt,
    group_records,
    select_compaction,
)
from engine.lifecycle.manager import CompactionReport, Lifecycle, LifecycleReport
from engine.lifecycle.pruning import (
    PruneMode,
    Selection,
    select_expired,
    select_prune,
    select_retention,
)

__all__ = [
    "EVENT_ROLLED_OFF",
    "PROMPT_TEMPLATE",
    "RING_ACTOR",
    "CapacityPlan",
    "CompactionReport",
    "HeuristicSummarizer",
    "Lifecycle",
    "LifecycleReport",
    "PruneMode",
    "Selection",
    "SummarizationTask",
    "Summarizer",
    "TaskStatus",
    "assemble_prompt",
    "group_records",
    "plan_capacity",
    "roll_off",
    "select_compaction",
    "select_expired",
    "select_prune",
    "select_retention",
]
