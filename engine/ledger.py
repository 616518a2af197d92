"""The ledger: one SQLite file beside the Chroma directory for what Chroma is not for.

Events, the review queue, edit history (undo), LLM spend and summarization tasks live here
(DESIGN: Storage). Each subsystem owns its tables and migrates them through :meth:`Ledger.migrate`
under its own component name, so the schema grows without one shared migration list: the table
``schema_versions`` records how many migrations of each component have been applied. A ledger
written by a newer Mnemoscope (more migrations applied than this version knows) raises
:class:`~engine.errors.SchemaMismatch` instead of being silently misread.

One connection, WAL mode, ``synchronous=NORMAL`` (durable across process crashes; the last
transaction may be lost on power loss), guarded by a lock so worker threads can share it; writes
run in ``BEGIN IMMEDIATE`` transactions that commit or roll back whole.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from engine.errors import SchemaMismatch, StoreReadOnly, StoreUnavailable

__all__ = ["LEDGER_FILENAME", "Ledger", "Params"]

LEDGER_FILENAME = "mnemoscope-ledger.sqlite3"

Params = Sequence[object] | Mapping[str, object]

_BOOTSTRAP = """
CREATE TABLE IF NOT EXISTS schema_versions (
    component TEXT PRIMARY KEY,
    version   INTEGER NOT NULL
);
"""


class Ledger:
    """A thread-safe SQLite ledger.

    Args:
        path: The database file, or None for an in-memory ledger (tests, read-only views of
            foreign stores).
        read_only: Open without writing; :meth:`transaction` and :meth:`migrate` then raise
            :class:`StoreReadOnly` (migrate only when a migration is actually missing).
    """

    def __init__(self, path: str | Path | None, *, read_only: bool = False) -> None:
        self._path = Path(path) if path is not None else None
        self._read_only = read_only
        self._lock = threading.RLock()
        try:
            if self._path is None:
                self._conn = sqlite3.connect(":memory:", check_same_thread=False,
                                             isolation_level=None)
            elif read_only:
                if not self._path.exists():
                    self._conn = sqlite3.connect(":memory:", check_same_thread=False,
                                                 isolation_level=None)
                else:
                    uri = f"{self._path.resolve().as_uri()}?mode=ro"
                    self._conn = sqlite3.connect(uri, uri=True, check_same_thread=False,
                                                 isolation_level=None)
            else:
                # 0700: a server store's ledger (data dir) holds review items and edit
                # history in clear, as an embedded store's folder does
                self._path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                self._conn = sqlite3.connect(str(self._path), check_same_thread=False,
                                             isolation_level=None, timeout=10.0)
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.row_factory = sqlite3.Row
            self._conn.execute("PRAGMA foreign_keys=ON")
            if not read_only or self._path is None or not self._path.exists():
                self._conn.executescript(_BOOTSTRAP)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open ledger {self._path}: {exc}") from exc

    @property
    def path(self) -> Path | None:
        """The database file (None when in memory)."""
        return self._path

    def damaged(self, table: str, key: object, problem: BaseException) -> StoreUnavailable:
        """The error for a row of ``table`` that cannot be read: a damaged file, or a store
        folder from someone else. Names the file, the table, the row and what is wrong, so
        the command says that instead of reporting a bug.

        Args:
            table: The table the row is in.
            key: The row's key (sequence number, id).
            problem: What reading it raised.
        """
        where = self._path if self._path is not None else "(in memory)"
        detail = str(problem)
        detail = detail if len(detail) <= 120 else detail[:117] + "..."
        return StoreUnavailable(
            f"the ledger {where} is damaged: {table} row {key!r} cannot be read "
            f"({type(problem).__name__}: {detail}); the records are not affected. Restore the "
            "ledger from a backup")

    @property
    def read_only(self) -> bool:
        """True when opened read-only."""
        return self._read_only

    def version(self, component: str) -> int:
        """Number of migrations applied for ``component`` (0 when none)."""
        try:
            rows = self.query("SELECT version FROM schema_versions WHERE component = ?",
                              (component,))
        except StoreUnavailable:
            return 0
        return int(rows[0]["version"]) if rows else 0

    def migrate(self, component: str, migrations: Sequence[str]) -> None:
        """Apply the not-yet-applied SQL scripts of ``component``, each in its own transaction.

        Raises:
            SchemaMismatch: the ledger has more migrations applied than ``migrations`` lists
                (it was written by a newer Mnemoscope).
            StoreReadOnly: a migration is missing and the ledger is read-only.
        """
        with self._lock:
            applied = self.version(component)
            if applied > len(migrations):
                raise SchemaMismatch(
                    f"ledger {self._path}: component {component!r} is at schema version "
                    f"{applied}, this Mnemoscope knows {len(migrations)}; upgrade Mnemoscope"
                )
            for number, script in enumerate(migrations[applied:], start=applied + 1):
                with self.transaction() as conn:
                    for statement in _split_statements(script):
                        conn.execute(statement)
                    conn.execute(
                        "INSERT INTO schema_versions(component, version) VALUES (?, ?) "
                        "ON CONFLICT(component) DO UPDATE SET version = excluded.version",
                        (component, number),
                    )

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``) that commits on success, rolls back on error.

        Raises:
            StoreReadOnly: the ledger is read-only.
            StoreUnavailable: SQLite failed (disk full, I/O error); nothing was committed.
        """
        if self._read_only:
            raise StoreReadOnly(f"ledger {self._path} is open read-only")
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"ledger {self._path}: {exc}") from exc
            try:
                yield self._conn
            except sqlite3.Error as exc:  # a write in the body failed (disk full, I/O error)
                self._rollback()
                raise StoreUnavailable(f"ledger {self._path}: {exc}; nothing was committed"
                                       ) from exc
            except BaseException:
                self._rollback()
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise StoreUnavailable(f"ledger {self._path}: commit failed: {exc}; nothing "
                                       "was committed") from exc

    def _rollback(self) -> None:
        """Roll back the open transaction, if SQLite has not already done so.

        On some errors (SQLITE_FULL, SQLITE_IOERR) SQLite rolls the transaction back itself; a
        second ROLLBACK would raise "no transaction is active" and hide the real error.
        """
        if self._conn.in_transaction:
            # if even that fails the connection is unusable; the original error is what matters
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")

    def query(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        """Run a read query and return all rows.

        Raises:
            StoreUnavailable: SQLite failed.
        """
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"ledger {self._path}: {exc}") from exc

    def close(self) -> None:
        """Close the connection (checkpointing the WAL). Safe to call twice."""
        with self._lock:
            try:
                if not self._read_only and self._path is not None:
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                self._conn.close()
            except sqlite3.Error:
                pass


def _split_statements(script: str) -> list[str]:
    """Split a migration script into complete statements (sqlite3.complete_statement aware)."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements
