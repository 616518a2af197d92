"""What every CLI command handler gets: output helpers and the engine for the chosen store.

Every byte a command writes goes through :meth:`CliContext.print`, :meth:`CliContext.warn`,
:meth:`CliContext.write` or :meth:`CliContext.emit_json`, which apply the exit policy
(:mod:`engine.exits`: with redaction on, secrets and personal data are masked) and make the
text safe for a terminal (control characters and escape sequences are shown escaped, so a
stored memory cannot retitle, clear or overwrite the user's terminal). Masking fails closed:
identifiers in human output are masked like any text unless the command marks them with
:meth:`CliContext.ident` (kept only if they have the shape of an id this engine makes).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from app.log_masking import masked_log_handlers
from app.settings import Settings, server_ledger_path
from app.terminal import escape_controls
from engine import (
    ExitPolicy,
    MemoryEngine,
    RedactingLogFilter,
    SentenceTransformerEmbedder,
    StoreSpec,
    engine_config_from_env,
)
from engine.errors import EngineError, ValidationError

__all__ = ["CliContext", "escape_controls"]

MODEL_WAIT_SECONDS = 180.0
NOTICE_AFTER_SECONDS = 1.0
"""How long a command waits for the model quietly before saying what takes long."""
_AGENTS_NAMED = 10  # agents a note names before "…"

# The control characters of app.terminal minus what json.dumps already escapes (every C0
# control).
_JSON_UNSAFE = re.compile(r"[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@dataclass
class CliContext:
    """Per-invocation state shared by command handlers.

    Attributes:
        settings: The resolved settings (file ← env ← options); ``settings.redaction`` turns
            the exit policy on (``MNEMOSCOPE_REDACTION``, settings.json or ``--redact``).
        json: ``--json`` was given: print exactly one JSON document on stdout.
        load_model: Load the embedding model for commands that embed (``--no-model`` clears it).
        collection: Chroma collection to open.
        config_dir: The settings folder (``MNEMOSCOPE_CONFIG_DIR`` or the per-user one), for
            commands that save a setting.
    """

    settings: Settings
    json: bool = False
    load_model: bool = True
    collection: str | None = None
    config_dir: Path | None = None
    stdout: IO[str] = field(default_factory=lambda: sys.stdout)
    stderr: IO[str] = field(default_factory=lambda: sys.stderr)
    _engine: MemoryEngine | None = None
    _model: SentenceTransformerEmbedder | None = None
    _waited: bool = False
    _closers: list[Callable[[], None]] = field(default_factory=list)
    _policy: ExitPolicy | None = None
    _verbatim: dict[str, str] = field(default_factory=dict)

    @property
    def policy(self) -> ExitPolicy:
        """The exit policy of this run (the configured patterns; on when redaction is on).

        Raises:
            ConfigInvalid / RedactionPatternInvalid: a bad ``MEMORY_*`` variable or pattern.
        """
        if self._policy is None:
            # Off needs no configuration: commands that never open a store do not read MEMORY_*.
            self._policy = ExitPolicy(None) if not self.settings.redaction else \
                ExitPolicy.for_config(engine_config_from_env(os.environ, redaction=True))
        return self._policy

    @property
    def redacting(self) -> bool:
        """True when redaction is on and its patterns are valid (else nothing can mask)."""
        try:
            return self.policy.redacting
        except EngineError:
            return False

    @contextlib.contextmanager
    def masked_logs(self) -> Iterator[None]:
        """While a command runs, log records reach stderr with control characters escaped,
        and masked with redaction on (:func:`app.log_masking.masked_log_handlers`).

        Installed with redaction off too: a log line can quote what a client sent (``mcp``:
        the SDK logs an unknown prompt's name), and without this handler Python's last-resort
        one, or the handler a library configures, wrote it to the terminal as it came.
        """
        log_filter = RedactingLogFilter(self.policy) if self.redacting else logging.Filter()
        with masked_log_handlers(log_filter, self.stderr):
            yield

    def policy_for(self, *, redact: bool) -> ExitPolicy:
        """This run's policy, or a redacting one with the same patterns when ``redact`` asks
        for it (``export --redact`` with redaction otherwise off)."""
        if self.policy.redacting or not redact:
            return self.policy
        config = engine_config_from_env(os.environ, redaction=True)
        return ExitPolicy.for_config(config)

    def agent(self, engine: MemoryEngine, given: str | None) -> str | None:
        """An ``--agent`` option of a reading command → the stored agent id.

        With redaction on the user sees masked agent ids and gives those; a raw id that masking
        changes is refused (it would confirm the raw text by what the command finds).

        Raises:
            ValidationError: no agent is shown with ``given``.
        """
        if given is None or not self.policy.redacting:
            return given
        found = self.policy.resolve(given, engine.stats().by_agent)
        if found is None:
            raise ValidationError("--agent", given, "no agent is shown with this id; with "
                                  "redaction on, give the id as the output shows it")
        return found

    def note_unknown_agent(self, engine: MemoryEngine, agent: str | None) -> None:
        """After a reading command found nothing for ``--agent``: say on stderr when the store
        has no records of that agent at all (a misspelt id, or one copied from an example),
        naming the agents it has, rather than leave an empty answer unexplained."""
        if agent is None:
            return
        agents = engine.stats().by_agent
        if agent in agents:
            return
        known = sorted(agents)
        listed = ", ".join(known[:_AGENTS_NAMED]) + (", …" if len(known) > _AGENTS_NAMED else "")
        self.warn(f"note: this store has no records of agent {agent!r} "
                  f"(its agents: {listed or 'none'})")

    def ident(self, value: str) -> str:
        """Mark ``value`` as an identifier in human output: shown as is when it has the shape
        of an id this engine makes (as in JSON documents), masked otherwise."""
        if self.policy.redacting and self.policy.is_identifier(value):
            self._keep(value)
        return value

    def issued(self, value: str) -> str:
        """Mark ``value`` as a credential this command made for its user (``serve``'s API
        token): shown as is, since masking it would make it useless."""
        if self.policy.redacting:
            self._keep(value)
        return value

    def _keep(self, value: str) -> None:
        from engine import placeholder_for

        self._verbatim[placeholder_for(value)] = value

    def _shown(self, text: str) -> str:
        """``text`` masked by the policy, with the values the command vouched for restored."""
        masked = self.policy.text(text)
        for placeholder, value in self._verbatim.items():
            masked = masked.replace(placeholder, value)
        return masked

    def preview(self, text: str, width: int) -> str:
        """``text`` on one line, at most ``width`` characters, masked BEFORE it is cut.

        Cutting first would hide a secret from the detectors while showing part of it (the
        first digits of an IBAN, a card number cut to 12 digits). A cut never splits a
        placeholder: it ends before one it would cut.
        """
        flat = " ".join(self.policy.text(text).split())
        if len(flat) <= width:
            return flat
        cut = flat[:width - 1]
        opened = cut.rfind("<REDACT:")
        if opened >= 0 and ">" not in cut[opened:]:
            cut = cut[:opened].rstrip()
        return cut + "…"

    def quoted(self, text: str, width: int = 72) -> str:
        """``text`` as :meth:`preview` shows it, in double quotes: a record named by its text.

        Masked before it is quoted: JSON's escapes (``\\"``) would hide a quoted password
        from the detectors when :meth:`print` masks the line.
        """
        return json.dumps(self.preview(text, width), ensure_ascii=False)

    def print(self, text: str = "") -> None:
        """Human output on stdout: masked by the exit policy, control characters escaped."""
        print(escape_controls(self._shown(text)), file=self.stdout)

    def write(self, text: str) -> None:
        """Human output on stdout without an added newline (masked and escaped as print)."""
        self.stdout.write(escape_controls(self._shown(text)))

    def warn(self, text: str) -> None:
        """A notice on stderr (never mixes with JSON on stdout); masked and escaped."""
        print(escape_controls(self._shown(text)), file=self.stderr)

    def emit_json(self, document: Any) -> None:
        """The one JSON document of a ``--json`` run, built by the exit policy.

        JSON escapes C0 controls itself; DEL, C1 controls and bidirectional overrides are
        escaped too (``\\u009b``), which changes no value a parser reads.
        """
        self.stdout.write(self._json_text(document, indent=2))
        self.stdout.write("\n")

    def emit_json_line(self, document: Any) -> None:
        """One compact JSON document on its own line, flushed at once (``--stream``: a reader
        sees each line as soon as it is true, and a killed run leaves whole lines); built by
        the exit policy as :meth:`emit_json`."""
        self.stdout.write(self._json_text(document, indent=None) + "\n")
        self.stdout.flush()

    def _json_text(self, document: Any, *, indent: int | None) -> str:
        """``document`` as JSON text: masked by the exit policy (the values the command
        vouched for restored), unsafe characters escaped."""
        if self.policy.redacting:
            document = self.policy.document(document)
        text = json.dumps(document, indent=indent, ensure_ascii=False, allow_nan=False,
                          default=str)
        if self.policy.redacting:
            for placeholder, value in self._verbatim.items():
                text = text.replace(placeholder, value)
        return _JSON_UNSAFE.sub(_json_escaped, text)

    def store_spec(self, *, read_only: bool = False) -> StoreSpec:
        """The store selected by ``--store`` / ``MNEMOSCOPE_STORE`` / the default."""
        kwargs: dict[str, Any] = {}
        if self.collection:
            kwargs["collection"] = self.collection
        return self.settings.with_store_timeouts(StoreSpec(
            self.settings.store, token=self.settings.store_token, read_only=read_only,
            **kwargs))

    def open_engine(self, *, read_only: bool = False, embed: bool = False) -> MemoryEngine:
        """Open (once) the engine on the selected store.

        Args:
            embed: The command embeds text: load the model and wait for it (unless
                ``--no-model``), so records get real embeddings rather than the fallback.
        """
        if self._engine is None:
            self._engine = self._open(self.store_spec(read_only=read_only), embed=embed)
        return self._engine

    def open_other_engine(self, spec: StoreSpec, *, embed: bool = True) -> MemoryEngine:
        """Open an engine on a second store (``adopt --into``), with this run's settings and
        model; it is closed when the command finishes."""
        engine = self._open(self.settings.with_store_timeouts(spec), embed=embed)
        self.on_close(engine.close)
        return engine

    def wait_for_model(self) -> None:
        """Wait (once) for the run's model, as ``open_engine(embed=True)`` does, for a
        long-lived command that opened its engine without waiting (``mcp`` answers the client's
        handshake while the model loads, and waits here before its first embedding)."""
        self._embedder(True)

    def _embedder(self, embed: bool) -> SentenceTransformerEmbedder | None:
        """The run's one model (loaded once, shared by the engines it opens)."""
        if not (self.load_model and self.settings.load_model):
            return None
        if self._model is None:
            self._model = self.settings.model_spec().embedder()
        if embed and not self._waited:
            self._waited = True
            if not self._model.wait_ready(NOTICE_AFTER_SECONDS):
                # a first run converts the model for this machine (~10 s): say so rather
                # than sit silent; a later run's load is over before this
                reason = self._model.status().reason
                if reason and not self._model.is_ready():
                    self.warn(f"note: {reason}…")
            if not self._model.wait_ready(MODEL_WAIT_SECONDS):
                self.warn(f"note: embedding model unavailable "
                          f"({self._model.status().reason or 'still loading'}); "
                          "using token Jaccard similarity")
        return self._model

    def _open(self, spec: StoreSpec, *, embed: bool) -> MemoryEngine:
        embedder = self._embedder(embed)
        ledger = server_ledger_path(self.settings, spec.location, spec.collection) \
            if spec.is_remote else None
        config = engine_config_from_env(os.environ, sampling_rate=self.settings.sampling_rate,
                                        redaction=self.settings.redaction)
        return MemoryEngine.open(spec, ledger_path=ledger, embedder=embedder, config=config)

    def close(self) -> None:
        """Close what was opened."""
        for closer in reversed(self._closers):
            closer()
        self._closers.clear()
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def on_close(self, closer: Callable[[], None]) -> None:
        """Run ``closer`` when the command finishes."""
        self._closers.append(closer)


def _json_escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"
