"""Ledger tables of the layer handlers (component ``layers``).

The handlers keep their *evidence* here, not only in the store: compaction (seed 002 §8) and
retention retire raw episodic and social records, but a relationship's sentiment trend and a
procedure's success-rate history must survive that. The store holds the derived, user-visible
records (one social summary per counterpart, one procedural record per pattern); these tables
hold what they were derived from and their history.
"""

from __future__ import annotations

__all__ = ["LAYERS_COMPONENT", "MIGRATIONS"]

LAYERS_COMPONENT = "layers"

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE layer_social_obs (
        record_id   TEXT PRIMARY KEY,
        agent_id    TEXT NOT NULL,
        counterpart TEXT NOT NULL,
        sentiment   REAL,
        ts          REAL NOT NULL,
        privacy     TEXT NOT NULL
    );
    CREATE INDEX layer_social_obs_pair ON layer_social_obs(agent_id, counterpart, ts);
    CREATE TABLE layer_episode_obs (
        record_id  TEXT PRIMARY KEY,
        agent_id   TEXT NOT NULL,
        episode_id TEXT NOT NULL,
        ts         REAL NOT NULL,
        step_index REAL,
        steps      TEXT NOT NULL,
        outcome    INTEGER
    );
    CREATE INDEX layer_episode_obs_agent ON layer_episode_obs(agent_id, episode_id);
    CREATE TABLE layer_patterns (
        agent_id     TEXT NOT NULL,
        pattern_id   TEXT NOT NULL,
        steps        TEXT NOT NULL,
        support      INTEGER NOT NULL,
        successes    INTEGER NOT NULL,
        failures     INTEGER NOT NULL,
        success_rate REAL,
        first_seen   REAL NOT NULL,
        last_seen    REAL NOT NULL,
        updated_at   REAL NOT NULL,
        record_id    TEXT NOT NULL,
        PRIMARY KEY (agent_id, pattern_id)
    );
    CREATE TABLE layer_pattern_history (
        seq          INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id     TEXT NOT NULL,
        pattern_id   TEXT NOT NULL,
        ts           REAL NOT NULL,
        support      INTEGER NOT NULL,
        success_rate REAL
    );
    CREATE INDEX layer_pattern_history_pattern ON layer_pattern_history(agent_id, pattern_id, seq);
    """,
)
