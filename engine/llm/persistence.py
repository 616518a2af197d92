"""The LLM component's ledger tables (component ``llm``) and the reads that restore state.

Tables (one row per fact, epoch-ms timestamps):

* ``llm_calls`` — every attempt: ok, retry (failed, will retry), failed (gave up), rejected
  (breaker open, budget, throttle) with provider, model, purpose, tokens, exact and float cost,
  latency and a short error. Spend survives restarts: the budget window's spend is the sum of
  ``cost_exact`` since UTC midnight.
* ``llm_breaker_transitions`` — every circuit state change with its reason.
* ``llm_budget_alerts`` — each 70/90/100 % alert, unique per window and threshold.
* ``llm_throttle`` — every throttle decision (token projection or request rate).

No column holds prompt or completion text, headers or keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from engine.ledger import Ledger

__all__ = ["COMPONENT", "MIGRATIONS", "BreakerTransition", "CallRow", "LLMActivity", "LLMCall",
           "LLMLedger", "llm_activity"]

COMPONENT = "llm"

MIGRATIONS = (
    """
    CREATE TABLE llm_calls (
        id                INTEGER PRIMARY KEY AUTOINCREMENT,
        ts_ms             REAL NOT NULL,
        call_id           TEXT NOT NULL,
        provider          TEXT NOT NULL,
        model             TEXT NOT NULL,
        purpose           TEXT NOT NULL,
        attempt           INTEGER NOT NULL,
        outcome           TEXT NOT NULL,
        status            INTEGER,
        failure           TEXT,
        input_tokens      INTEGER NOT NULL DEFAULT 0,
        output_tokens     INTEGER NOT NULL DEFAULT 0,
        cost_usd          REAL NOT NULL DEFAULT 0,
        cost_exact        TEXT NOT NULL DEFAULT '0',
        latency_ms        REAL,
        streamed          INTEGER NOT NULL DEFAULT 0,
        error             TEXT
    );
    CREATE INDEX llm_calls_ts ON llm_calls(ts_ms);
    CREATE INDEX llm_calls_provider_ts ON llm_calls(provider, ts_ms);
    CREATE TABLE llm_breaker_transitions (
        id                INTEGER PRIMARY KEY AUTOINCREMENT,
        ts_ms             REAL NOT NULL,
        provider          TEXT NOT NULL,
        from_state        TEXT NOT NULL,
        to_state          TEXT NOT NULL,
        reason            TEXT NOT NULL,
        failures_in_window INTEGER NOT NULL
    );
    CREATE INDEX llm_breaker_provider_ts ON llm_breaker_transitions(provider, ts_ms);
    CREATE TABLE llm_budget_alerts (
        id                INTEGER PRIMARY KEY AUTOINCREMENT,
        ts_ms             REAL NOT NULL,
        window_start_ms   REAL NOT NULL,
        threshold         INTEGER NOT NULL,
        spent_usd         REAL NOT NULL,
        budget_usd        REAL NOT NULL,
        UNIQUE(window_start_ms, threshold)
    );
    CREATE TABLE llm_throttle (
        id                INTEGER PRIMARY KEY AUTOINCREMENT,
        ts_ms             REAL NOT NULL,
        provider          TEXT NOT NULL,
        decision          TEXT NOT NULL,
        utilization_percent REAL,
        projected_total   REAL,
        wait_ms           REAL NOT NULL
    );
    CREATE INDEX llm_throttle_ts ON llm_throttle(ts_ms);
    """,
)


@dataclass(frozen=True, slots=True)
class CallRow:
    """One ``llm_calls`` row to write."""

    ts_ms: float
    call_id: str
    provider: str
    model: str
    purpose: str
    attempt: int
    outcome: str
    status: int | None = None
    failure: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal = Decimal(0)
    latency_ms: float | None = None
    streamed: bool = False
    error: str | None = None


class LLMLedger:
    """Writes and reads the ``llm_*`` tables of a :class:`~engine.ledger.Ledger`.

    A read-only ledger is read but never written (the CLI's status on a read-only store).
    """

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.writable = not ledger.read_only
        if self.writable:
            ledger.migrate(COMPONENT, MIGRATIONS)

    @property
    def ready(self) -> bool:
        """The tables exist (a fresh read-only ledger has none)."""
        return self.ledger.version(COMPONENT) >= 1

    def add_call(self, row: CallRow) -> None:
        """Append one attempt."""
        if not self.writable:
            return
        with self.ledger.transaction() as conn:
            conn.execute(
                "INSERT INTO llm_calls(ts_ms, call_id, provider, model, purpose, attempt, outcome,"
                " status, failure, input_tokens, output_tokens, cost_usd, cost_exact, latency_ms,"
                " streamed, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (row.ts_ms, row.call_id, row.provider, row.model, row.purpose, row.attempt,
                 row.outcome, row.status, row.failure, row.input_tokens, row.output_tokens,
                 float(row.cost), str(row.cost), row.latency_ms, int(row.streamed),
                 row.error[:300] if row.error else None),
            )

    def add_transition(self, ts_ms: float, provider: str, from_state: str, to_state: str,
                       reason: str, failures: int) -> None:
        """Append one breaker transition."""
        if not self.writable:
            return
        with self.ledger.transaction() as conn:
            conn.execute(
                "INSERT INTO llm_breaker_transitions(ts_ms, provider, from_state, to_state,"
                " reason, failures_in_window) VALUES (?, ?, ?, ?, ?, ?)",
                (ts_ms, provider, from_state, to_state, reason, failures),
            )

    def add_alert(self, ts_ms: float, window_start_ms: float, threshold: int, spent: float,
                  budget: float) -> None:
        """Record an alert (idempotent per window and threshold)."""
        if not self.writable:
            return
        with self.ledger.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO llm_budget_alerts(ts_ms, window_start_ms, threshold,"
                " spent_usd, budget_usd) VALUES (?, ?, ?, ?, ?)",
                (ts_ms, window_start_ms, threshold, spent, budget),
            )

    def add_throttle(self, ts_ms: float, provider: str, decision: str,
                     utilization: float | None, projected_total: float | None,
                     wait_ms: float) -> None:
        """Record a throttle decision."""
        if not self.writable:
            return
        with self.ledger.transaction() as conn:
            conn.execute(
                "INSERT INTO llm_throttle(ts_ms, provider, decision, utilization_percent,"
                " projected_total, wait_ms) VALUES (?, ?, ?, ?, ?, ?)",
                (ts_ms, provider, decision, utilization, projected_total, wait_ms),
            )

    # -- restore -----------------------------------------------------------------------------
    def spend_since(self, window_start_ms: float) -> list[Decimal]:
        """Exact costs of every attempt since ``window_start_ms`` (all providers)."""
        if not self.ready:
            return []
        rows = self.ledger.query("SELECT cost_exact FROM llm_calls WHERE ts_ms >= ?",
                                 (window_start_ms,))
        return [Decimal(r["cost_exact"]) for r in rows]

    def alerts_for(self, window_start_ms: float) -> list[int]:
        """Thresholds already alerted in the window."""
        if not self.ready:
            return []
        rows = self.ledger.query(
            "SELECT threshold FROM llm_budget_alerts WHERE window_start_ms = ?",
            (window_start_ms,))
        return [int(r["threshold"]) for r in rows]

    def usage_since(self, since_ms: float, provider: str) -> list[tuple[float, int]]:
        """(ts, total tokens) of successful calls since ``since_ms`` for the token projector."""
        if not self.ready:
            return []
        rows = self.ledger.query(
            "SELECT ts_ms, input_tokens + output_tokens AS total FROM llm_calls"
            " WHERE ts_ms >= ? AND provider = ? AND outcome = 'ok' ORDER BY ts_ms",
            (since_ms, provider))
        return [(float(r["ts_ms"]), int(r["total"])) for r in rows]

    def failures_since(self, since_ms: float, provider: str) -> list[float]:
        """Timestamps of failed attempts since ``since_ms`` that count for the breaker
        (transport failures, 408, 429, 5xx — not configuration errors such as 401)."""
        if not self.ready:
            return []
        rows = self.ledger.query(
            "SELECT ts_ms FROM llm_calls WHERE ts_ms >= ? AND provider = ?"
            " AND outcome IN ('retry', 'failed') AND failure IS NOT NULL"
            " AND (status IS NULL OR status IN (408, 429) OR status >= 500) ORDER BY ts_ms",
            (since_ms, provider))
        return [float(r["ts_ms"]) for r in rows]

    def recent_latencies(self, limit: int) -> list[tuple[str, str, float]]:
        """(provider, purpose, latency ms) of the latest ``limit`` attempts that reached a
        provider, oldest first (seed 000 §11 summaries after a restart)."""
        if not self.ready:
            return []
        rows = self.ledger.query(
            "SELECT provider, purpose, latency_ms FROM llm_calls WHERE latency_ms IS NOT NULL"
            " ORDER BY id DESC LIMIT ?", (limit,))
        return [(str(r["provider"]), str(r["purpose"]), float(r["latency_ms"]))
                for r in reversed(rows)]

    def alert_counts(self) -> dict[int, int]:
        """Budget alerts ever raised, per threshold (``memory_llm_budget_alerts_total``)."""
        if not self.ready:
            return {}
        rows = self.ledger.query("SELECT threshold, COUNT(*) AS n FROM llm_budget_alerts"
                                 " GROUP BY threshold")
        return {int(r["threshold"]): int(r["n"]) for r in rows}

    def last_transition(self, provider: str) -> tuple[float, str] | None:
        """(ts, to_state) of the provider's latest breaker transition."""
        if not self.ready:
            return None
        rows = self.ledger.query(
            "SELECT ts_ms, to_state FROM llm_breaker_transitions WHERE provider = ?"
            " ORDER BY id DESC LIMIT 1", (provider,))
        return (float(rows[0]["ts_ms"]), str(rows[0]["to_state"])) if rows else None


# -- activity (what the Budget view and agents read) -----------------------------------------


@dataclass(frozen=True, slots=True)
class LLMCall:
    """One recorded attempt, as read back from ``llm_calls`` (no text, no keys).

    Attributes:
        ts_ms: When it was made (epoch ms).
        purpose: What it was for (``summarize``, ``extract``, ``connection-test`` ...).
        model: The model asked.
        attempt: 1 for the first try, then each retry.
        outcome: ``ok``, ``retry``, ``failed`` or ``rejected``.
        failure: The failure kind of an attempt that did not succeed, else None.
        input_tokens: Prompt tokens.
        output_tokens: Completion tokens.
        cost_usd: Its cost.
        latency_ms: Time to the answer; None when no provider was reached.
    """

    ts_ms: float
    purpose: str
    model: str
    attempt: int
    outcome: str
    failure: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_ms: float | None


@dataclass(frozen=True, slots=True)
class BreakerTransition:
    """One circuit breaker state change (``llm_breaker_transitions``)."""

    ts_ms: float
    from_state: str
    to_state: str
    reason: str


@dataclass(frozen=True, slots=True)
class LLMActivity:
    """The latest LLM calls and breaker transitions of a ledger, newest first."""

    calls: tuple[LLMCall, ...] = ()
    transitions: tuple[BreakerTransition, ...] = ()


def llm_activity(ledger: Ledger, limit: int = 50) -> LLMActivity:
    """The newest ``limit`` calls and breaker transitions recorded in ``ledger``.

    Read only: a ledger without the LLM tables (nothing ever called) gives an empty activity
    and is not migrated. Blocking (SQLite): run it on a worker.
    """
    if ledger.version(COMPONENT) < 1:
        return LLMActivity()
    calls = tuple(
        LLMCall(float(r["ts_ms"]), str(r["purpose"]), str(r["model"]), int(r["attempt"]),
                str(r["outcome"]), None if r["failure"] is None else str(r["failure"]),
                int(r["input_tokens"]), int(r["output_tokens"]), float(r["cost_usd"]),
                None if r["latency_ms"] is None else float(r["latency_ms"]))
        for r in ledger.query(
            "SELECT ts_ms, purpose, model, attempt, outcome, failure, input_tokens,"
            " output_tokens, cost_usd, latency_ms FROM llm_calls ORDER BY id DESC LIMIT ?",
            [limit]))
    transitions = tuple(
        BreakerTransition(float(r["ts_ms"]), str(r["from_state"]), str(r["to_state"]),
                          str(r["reason"]))
        for r in ledger.query(
            "SELECT ts_ms, from_state, to_state, reason FROM llm_breaker_transitions"
            " ORDER BY id DESC LIMIT ?", [limit]))
    return LLMActivity(calls, transitions)
