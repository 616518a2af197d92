"""The MCP memory server: an agent's memory tools over the Model Context Protocol (issue 22).

``mnemoscope mcp`` (``app/cli/commands/mcp.py``) opens the selected store for writing, like any
writer (an embedded store's lock is taken; a second writer gets ``StoreLocked``), builds a
:class:`MemoryTools` over the engine and serves it with the official ``mcp`` SDK's
``MCPServer``, over stdio (what Claude Desktop and Cursor spawn) or streamable HTTP on loopback
behind a bearer token (:class:`BearerAuth`). No Qt is imported here: the server runs headless.

What a tool returns leaves the engine through the run's :class:`~engine.exits.ExitPolicy`,
exactly as ``serve``'s responses and the CLI's ``--json`` documents do: with redaction on, no
secret is shown, listing filters compare with the masked text, and error messages (which quote
input and stored text) are masked too — every tool error, the SDK's own included, leaves
through :meth:`MemoryServer.call_tool`. A bad argument is refused before anything is written:
the SDK checks each call against the published JSON schema (types, ranges, enums) and the error
names the field and the rule, never the value given; what only the engine can check (an
unknown id, metadata nested too deep, a lone surrogate) raises the engine's
``ValidationError`` / ``RecordNotFound`` before anything is written, which becomes a tool
error naming the field.

The desktop app sees what an MCP client writes by attaching to the introspection API the same
process serves beside the tools (``--api-port``; docs/architecture.md, "The MCP memory server
and the desktop app").
"""

from __future__ import annotations

import contextlib
import hmac
import socket
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import Field
from pydantic import ValidationError as ArgumentsInvalid

from engine import (
    SHOWN_STATES,
    Action,
    ExitPolicy,
    LifecycleScheduler,
    Purpose,
    RecordQuery,
    RetrievalRequest,
    SortKey,
)
from engine.errors import EngineError, ValidationError
from engine.introspection import is_loopback
from engine.records import (
    MAX_CONTENT_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    Category,
    Layer,
    MemoryRecord,
    NewMemory,
    Privacy,
    RecordState,
    TrustTier,
)

if TYPE_CHECKING:
    from engine import MemoryEngine

__all__ = ["MCP_PATH", "SERVER_NAME", "BearerAuth", "MemoryServer", "MemoryTools", "bind",
           "build_server", "engine_services", "rebinding_protection", "serve_http",
           "serve_stdio"]

SERVER_NAME = "mnemoscope"
MCP_PATH = "/mcp"
# What a returned record shows by default: enough for an agent to use and cite a memory, not
# the whole provenance (get_memory returns that).
_SUMMARY_KEYS = ("id", "content", "agent_id", "layer", "category", "importance", "confidence",
                 "tags", "state", "created_at", "version")
_INSTRUCTIONS = (
    "Long-term memory for this agent, kept by Mnemoscope. Before answering a question that "
    "may depend on what you were told earlier, call search_memories with the question. When "
    "you learn a durable fact, preference, skill or event worth keeping, call add_memory: it "
    "deduplicates (a paraphrase of a stored memory is merged into it or sent to the review "
    "queue, and the result says which). Use update_memory to correct a memory, pause_memory "
    "to stop using one without losing it, delete_memory only when asked to forget.")

# -- argument types: these become the tools' JSON schemas ----------------------------------------

RecordId = Annotated[str, Field(min_length=1, max_length=200,
                                description="A record id, as returned by another tool.")]
RecordIds = Annotated[list[RecordId], Field(min_length=1, max_length=500,
                                            description="One or more record ids.")]
Content = Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS,
                               description="The memory itself: one self-contained statement, "
                                           "written so it makes sense without the "
                                           "conversation (\"The user's daughter is called "
                                           "Mia\", not \"her name is Mia\").")]
AgentId = Annotated[str, Field(min_length=1, max_length=200,
                               description="Whose memory this is (your agent's id). Records of "
                                           "different agents never merge.")]
Unit = Annotated[float, Field(ge=0.0, le=1.0)]
Tags = Annotated[list[Annotated[str, Field(min_length=1, max_length=MAX_TAG_CHARS,
                                           pattern=r"^[^,]*$")]],
                 Field(max_length=MAX_TAGS, description="Free labels without commas, e.g. "
                                                        "[\"work\", \"travel\"].")]


def _refusal(exc: EngineError) -> Exception:
    """An engine refusal as the SDK's ``ToolError``: the code, then the message (naming the
    field for a bad argument; :meth:`MemoryServer.call_tool` masks it, since it may quote
    stored text)."""
    return ToolError(f"{exc.code}: {exc}")


def _bug(exc: Exception, crash_dir: Path, policy: ExitPolicy) -> Exception:
    """A bug in a tool, reported as ``run_cli`` reports one: the traceback to a crash report
    (masked under redaction), a tool error naming the file to the client."""
    from app.crash import write_crash_report

    report = write_crash_report(exc, crash_dir, command="mcp",
                                mask=policy.text if policy.redacting else None)
    where = f"a crash report was written to {report}" if report is not None else \
        "no crash report could be written"
    return ToolError(f"INTERNAL_ERROR: unexpected {type(exc).__name__} (this is a bug; {where})")


@dataclass(frozen=True, slots=True)
class MemoryTools:
    """The memory tools over one engine, transport-free (what the MCP server calls).

    Every method returns a JSON document already built by :attr:`policy` and raises
    :class:`~engine.errors.EngineError` when the engine refuses (nothing is written then).
    Methods run on the SDK's worker threads; the engine is thread-safe and serializes writes.

    Attributes:
        engine: The engine, opened for writing on the selected store.
        policy: The exit policy of this run (``--redact`` / settings' redaction).
        source: Provenance source of what MCP clients add, and the actor of their edits.
        before_embedding: Called before a call that embeds text (add, search, a content
            update, a review decision): the server answers the handshake while the model
            loads, and its first embedding waits for it here, so no memory is stored with a
            pending vector that nothing would fill in later.
    """

    engine: MemoryEngine
    policy: ExitPolicy
    source: str = "mcp"
    before_embedding: Callable[[], None] = field(default=lambda: None)

    # -- writing ----------------------------------------------------------------------------

    def add_memory(self, content: str, *, agent_id: str = "default",
                   layer: Layer = Layer.SEMANTIC, category: Category = Category.FACT,
                   importance: float | None = None, confidence: float = 0.8,
                   tags: list[str] | None = None, privacy: Privacy = Privacy.PRIVATE,
                   source_tier: TrustTier = TrustTier.AGENT,
                   metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        """Ingest one memory; the decision, the stored record and what it matched."""
        new = NewMemory(content, agent_id=agent_id, layer=layer, category=category,
                        importance=importance, confidence=confidence, tags=tuple(tags or ()),
                        privacy=privacy, source=self.source, source_tier=source_tier,
                        metadata=metadata or {})  # validated here, before the store is touched
        self.before_embedding()
        result = self.engine.ingest(new)
        document: dict[str, Any] = {
            "decision": result.action.value, "reason": result.reason.value,
            "summary": _decision_sentence(result.action, result.reason.value),
            "record": None if result.record is None else _summary(result.record),
            "similarity": None if result.similarity is None else round(result.similarity, 4),
            "review_id": result.review_id,
        }
        if result.target_id is not None and result.action is not Action.INSERTED:
            try:
                matched = self.engine.get(result.target_id)
            except EngineError:  # deleted between the decision and this read
                document["matched"] = {"id": result.target_id, "content": None}
            else:
                document["matched"] = {"id": matched.id, "content": matched.content}
        return self._out(document)

    def update_memory(self, record_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Apply field changes to a record (content changes are re-embedded)."""
        if not changes:
            raise ValidationError("changes", changes, "give at least one field to change")
        if "content" in changes:
            self.before_embedding()
        record = self.engine.update(record_id, changes, actor=self.source)
        return self._out({"updated": _summary(record)})

    def delete_memory(self, record_ids: list[str]) -> dict[str, Any]:
        """Delete records (kept in the edit history: undoable from the app)."""
        deleted = self.engine.delete(record_ids, actor=self.source)
        return self._out({"deleted": [record.id for record in deleted]})

    def set_state(self, record_ids: list[str], state: RecordState) -> dict[str, Any]:
        """Pause, archive or resume records."""
        change = {RecordState.PAUSED: self.engine.pause, RecordState.ARCHIVED: self.engine.archive,
                  RecordState.ACTIVE: self.engine.resume}[state]
        records = change(record_ids, actor=self.source)
        return self._out({"records": [{"id": r.id, "state": r.state.value,
                                       "version": r.version} for r in records]})

    # -- reading ----------------------------------------------------------------------------

    def search_memories(self, query: str, *, agent_id: str | None = None,
                        max_tokens: int | None = None,
                        purpose: Purpose = Purpose.REASONING) -> dict[str, Any]:
        """Hybrid retrieval under a token budget; each record with a one-line why."""
        budget = max_tokens or self.engine.config.memory.max_context_tokens
        request = RetrievalRequest(max_tokens=budget, query=query,
                                   agent_id=self._agent(agent_id), purpose=purpose)
        self.before_embedding()
        bundle = self.engine.retrieve(request)  # counted as an access: the agent uses them
        diagnostics = bundle.diagnostics
        rows = {diagnostics.ids[row]: row for row in diagnostics.rows.tolist()}
        records = []
        for rank, record in enumerate(bundle.records, 1):
            row = rows.get(record.id)
            why = diagnostics.explain(row) if row is not None else "packed"
            records.append({**_summary(record), "rank": rank,
                            "score": None if row is None
                            else round(float(diagnostics.scores[row]), 4),
                            "why": why})
        return self._out({"records": records, "total_tokens": bundle.total_tokens,
                          "budget": diagnostics.budget, "truncated": bundle.truncated,
                          "candidates": diagnostics.candidate_count,
                          "semantic": diagnostics.semantic_mode.value})

    def get_memory(self, record_id: str) -> dict[str, Any]:
        """One record in full (provenance, related links, metadata)."""
        return self._out(self.engine.get(record_id).to_json())

    def list_memories(self, *, agent_id: str | None = None, layer: Layer | None = None,
                      category: Category | None = None, state: list[RecordState] | None = None,
                      text: str | None = None, limit: int = 20,
                      offset: int = 0) -> dict[str, Any]:
        """A page of records, newest first, filtered."""
        query = RecordQuery(agent_id=agent_id, layer=layer, category=category, text=text,
                            states=frozenset(state) if state else SHOWN_STATES,
                            sort_by=SortKey.CREATED, descending=True, offset=offset,
                            limit=limit)
        # With redaction on, the text and agent filters match the masked text the page shows.
        page = self.engine.list_records(query, shown=self.policy.shown)
        return self._out({"total": page.total, "offset": page.offset,
                          "records": [_summary(record) for record in page.records]})

    def list_review(self, limit: int = 20) -> dict[str, Any]:
        """Pending review items: an incoming memory, the record it would merge into, why."""
        items = self.engine.review_queue()
        shown = []
        for item in items[:limit]:
            try:
                target: MemoryRecord | None = self.engine.get(item.target_id)
            except EngineError:  # the target was deleted since: the item shows without it
                target = None
            shown.append({"review_id": item.id, "reason": item.reason,
                          "similarity": None if item.similarity is None
                          else round(item.similarity, 4),
                          "incoming": item.incoming.content,
                          "target_id": item.target_id,
                          "target": None if target is None else target.content,
                          "conflicts": [c.to_json() for c in item.conflicts]})
        return self._out({"pending": len(items), "items": shown})

    def resolve_review(self, review_id: str, *, approve: bool) -> dict[str, Any]:
        """Approve (merge) or reject (keep both) a pending review item."""
        self.before_embedding()
        result = self.engine.approve_review(review_id) if approve else \
            self.engine.reject_review(review_id)
        return self._out({"review_id": review_id, "decision": result.action.value,
                          "reason": result.reason.value,
                          "record": None if result.record is None else _summary(result.record)})

    # -- helpers ----------------------------------------------------------------------------

    def _agent(self, given: str | None) -> str | None:
        """An agent id as the client sees it → the stored one (with redaction on, clients see
        and give masked ids; a raw id that masking changes is refused, as in the CLI)."""
        if given is None or not self.policy.redacting:
            return given
        found = self.policy.resolve(given, self.engine.stats().by_agent)
        if found is None:
            raise ValidationError("agent_id", given, "no agent is shown with this id; with "
                                  "redaction on, give the id as the tools show it")
        return found

    def _out(self, document: dict[str, Any]) -> dict[str, Any]:
        shown: dict[str, Any] = self.policy.document(document)
        return shown


def _summary(record: MemoryRecord) -> dict[str, Any]:
    document = record.to_json()
    return {key: document[key] for key in _SUMMARY_KEYS}


def _decision_sentence(action: Action, reason: str) -> str:
    return {
        Action.INSERTED: "stored as a new memory",
        Action.MERGED: "merged into an existing memory that says the same (see matched)",
        Action.UPDATED: "the same memory was already stored; its confidence was raised",
        Action.SKIPPED: f"not stored ({reason})",
        Action.DEFERRED: "close to an existing memory (see matched): sent to the review queue "
                         "for a person to approve or reject the merge",
    }.get(action, f"{action.value} ({reason})")


# -- the MCP server ------------------------------------------------------------------------------

class MemoryServer(MCPServer[Any]):
    """The SDK's ``MCPServer`` whose tool errors leave through the exit policy.

    The SDK writes a refused call's message itself: for arguments that fail the schema it is
    pydantic's text, which quotes the value given (``input_value='sk-live-…'``), truncated in
    the middle for a long one (so a detector run over it afterwards can miss the cut secret);
    for an unknown tool it is the name given. Every tool error passes :meth:`call_tool`, the
    one place they leave, so none can forget the policy.

    Args:
        policy: The exit policy of the run; every tool error message is masked by it.
        **settings: What ``MCPServer`` takes (name, instructions, ...).
    """

    def __init__(self, policy: ExitPolicy, **settings: Any) -> None:
        super().__init__(**settings)
        self._policy = policy

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None
                        ) -> CallToolResult | InputRequiredResult:
        """Call a tool; a refusal's message names fields and rules, never values, and is
        masked by the policy (bugs keep the SDK's generic message: it quotes nothing)."""
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            cause = exc.__cause__
            message = (f"Error executing tool {name}: {_argument_errors(cause)}"
                       if isinstance(cause, ArgumentsInvalid) else str(exc))
            # ``from cause``: the SDK logs only the field names of a schema refusal.
            raise ToolError(self._policy.text(message)) from cause


def _argument_errors(error: ArgumentsInvalid) -> str:
    """What was wrong with each argument (``tags.0: String should match pattern …``) without
    the values: the rules name what was expected, the caller knows what it sent."""
    problems = [f"{'.'.join(str(part) for part in detail['loc']) or 'arguments'}: "
                f"{detail['msg']}"
                for detail in error.errors(include_url=False, include_input=False,
                                           include_context=False)]
    return "invalid arguments: " + "; ".join(problems)


def build_server(tools: MemoryTools, *, crash_dir: Path | None = None) -> MemoryServer:
    """An ``MCPServer`` publishing ``tools`` with schemas a model can use without a prompt.

    Args:
        tools: What the tools call.
        crash_dir: Where a bug in a tool writes its crash report (:mod:`app.crash`, as the
            CLI does); the client gets an ``INTERNAL_ERROR`` naming the file. None leaves
            bugs to the SDK (a generic tool error, the traceback in the server's log).
    """
    from mcp.types import ToolAnnotations

    from app import __version__

    server = MemoryServer(tools.policy, name=SERVER_NAME, title="Mnemoscope memory",
                          instructions=_INSTRUCTIONS, version=__version__, log_level="WARNING")
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    writing = ToolAnnotations(read_only_hint=False, destructive_hint=False,
                              open_world_hint=False)
    destructive = ToolAnnotations(read_only_hint=False, destructive_hint=True,
                                  open_world_hint=False)
    policy = tools.policy

    def call(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            return work()
        except EngineError as exc:
            raise _refusal(exc) from exc
        except Exception as exc:
            if crash_dir is None:
                raise
            raise _bug(exc, crash_dir, policy) from exc

    @server.tool(annotations=writing)
    def add_memory(
        content: Content,
        agent_id: AgentId = "default",
        layer: Annotated[Layer, Field(description="Memory layer: semantic (facts), episodic "
                                                  "(events), procedural (how to), social "
                                                  "(people), spatial (places), system.")
                         ] = Layer.SEMANTIC,
        category: Annotated[Category, Field(description="What kind of memory. Memories of "
                                                        "different categories rarely merge.")
                            ] = Category.FACT,
        importance: Annotated[Unit | None, Field(description="0..1; leave out to let the "
                                                             "engine derive it from novelty.")
                              ] = None,
        confidence: Annotated[Unit, Field(description="How sure you are, 0..1.")] = 0.8,
        tags: Tags | None = None,
        privacy: Annotated[Privacy, Field(description="PRIVATE (default) or PUBLIC; the two "
                                                      "never merge.")] = Privacy.PRIVATE,
        metadata: Annotated[dict[str, Any] | None, Field(description="Free JSON object kept "
                                                                     "with the memory.")
                            ] = None,
    ) -> dict[str, Any]:
        """Remember something. The memory goes through the deduplication pipeline: an exact or
        near duplicate of a stored memory is merged into it (decision "merged" or "updated"),
        a close call is sent to the review queue ("deferred"), an unsurprising repeat is
        skipped; otherwise it is stored ("inserted"). For a merge or deferral the result
        names the matched memory (id and text)."""
        return call(lambda: tools.add_memory(
            content, agent_id=agent_id, layer=layer, category=category, importance=importance,
            confidence=confidence, tags=tags, privacy=privacy, metadata=metadata))

    @server.tool(annotations=reading)
    def search_memories(
        query: Annotated[str, Field(min_length=1, max_length=2000,
                                    description="What you want to recall, in words.")],
        agent_id: Annotated[str | None, Field(description="Only this agent's memories "
                                                          "(default: every agent).")] = None,
        max_tokens: Annotated[int | None, Field(ge=1, le=100_000,
                                                description="Token budget of the returned "
                                                            "memories (default: the engine's "
                                                            "MEMORY_MAX_CONTEXT_TOKENS).")
                              ] = None,
        purpose: Annotated[Purpose, Field(description="What the memories are for; picks the "
                                                      "ranking weights.")] = Purpose.REASONING,
    ) -> dict[str, Any]:
        """Recall memories relevant to a query: hybrid ranking (meaning, keywords, importance,
        recency, layer) packed into a token budget, best first. Each record carries a one-line
        "why" (its score and the components that contributed most). Paused and archived
        memories are never returned."""
        return call(lambda: tools.search_memories(query, agent_id=agent_id,
                                                  max_tokens=max_tokens, purpose=purpose))

    @server.tool(annotations=reading)
    def get_memory(record_id: RecordId) -> dict[str, Any]:
        """One memory in full: text, scores, provenance (who said it, when), related memories,
        metadata and state."""
        return call(lambda: tools.get_memory(record_id))

    @server.tool(annotations=reading)
    def list_memories(
        agent_id: Annotated[str | None, Field(description="Only this agent's memories.")
                            ] = None,
        layer: Annotated[Layer | None, Field(description="Only this layer.")] = None,
        category: Annotated[Category | None, Field(description="Only this category.")] = None,
        state: Annotated[list[RecordState] | None, Field(
            description="States to list (default active and paused; archived memories are "
                        "hidden unless asked for).")] = None,
        text: Annotated[str | None, Field(min_length=1, max_length=500,
                                          description="Only memories whose text contains "
                                                      "this (case-insensitive).")] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="Page size.")] = 20,
        offset: Annotated[int, Field(ge=0, description="Records to skip (paging).")] = 0,
    ) -> dict[str, Any]:
        """Browse stored memories, newest first, with filters and paging (no ranking: use
        search_memories to recall by meaning). Returns the total matching and one page."""
        return call(lambda: tools.list_memories(agent_id=agent_id, layer=layer,
                                                category=category, state=state, text=text,
                                                limit=limit, offset=offset))

    @server.tool(annotations=writing)
    def update_memory(
        record_id: RecordId,
        content: Annotated[Content | None, Field(description="New text (re-embedded).")
                           ] = None,
        importance: Annotated[Unit | None, Field(description="New importance, 0..1.")] = None,
        confidence: Annotated[Unit | None, Field(description="New confidence, 0..1.")] = None,
        category: Annotated[Category | None, Field(description="New category.")] = None,
        layer: Annotated[Layer | None, Field(description="New layer.")] = None,
        tags: Annotated[Tags | None, Field(description="Replaces the tags.")] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="Replaces the metadata.")
                            ] = None,
    ) -> dict[str, Any]:
        """Correct a stored memory: give its id and only the fields to change. The change is
        kept in the edit history (undoable from the Mnemoscope app)."""
        given = {"content": content, "importance": importance, "confidence": confidence,
                 "category": category, "layer": layer, "tags": tags, "metadata": metadata}
        changes = {name: value for name, value in given.items() if value is not None}
        return call(lambda: tools.update_memory(record_id, changes))

    @server.tool(annotations=destructive)
    def delete_memory(record_ids: RecordIds) -> dict[str, Any]:
        """Forget memories for good (only when asked to forget; pause_memory keeps them).
        An unknown id refuses the whole call."""
        return call(lambda: tools.delete_memory(record_ids))

    @server.tool(annotations=writing)
    def pause_memory(record_ids: RecordIds) -> dict[str, Any]:
        """Stop recalling memories without losing them: paused memories stay listed but are
        never returned by search_memories until resumed."""
        return call(lambda: tools.set_state(record_ids, RecordState.PAUSED))

    @server.tool(annotations=writing)
    def archive_memory(record_ids: RecordIds) -> dict[str, Any]:
        """Archive memories: kept, hidden from list_memories by default, never recalled until
        resumed."""
        return call(lambda: tools.set_state(record_ids, RecordState.ARCHIVED))

    @server.tool(annotations=writing)
    def resume_memory(record_ids: RecordIds) -> dict[str, Any]:
        """Make paused or archived memories active (recalled) again."""
        return call(lambda: tools.set_state(record_ids, RecordState.ACTIVE))

    @server.tool(annotations=reading)
    def list_review(limit: Annotated[int, Field(ge=1, le=200, description="Most items shown.")
                                     ] = 20) -> dict[str, Any]:
        """The review queue: memories that came close to a stored one and wait for a decision
        (merge or keep both), with the stored memory's text and why they were deferred."""
        return call(lambda: tools.list_review(limit))

    @server.tool(annotations=writing)
    def approve_review(review_id: Annotated[str, Field(min_length=1, max_length=200,
                                                       description="A review_id from "
                                                                   "list_review.")]
                       ) -> dict[str, Any]:
        """Merge a deferred memory into the stored one it matched."""
        return call(lambda: tools.resolve_review(review_id, approve=True))

    @server.tool(annotations=writing)
    def reject_review(review_id: Annotated[str, Field(min_length=1, max_length=200,
                                                      description="A review_id from "
                                                                  "list_review.")]
                      ) -> dict[str, Any]:
        """Keep a deferred memory as a memory of its own (the pair is not proposed again)."""
        return call(lambda: tools.resolve_review(review_id, approve=False))

    return server


# -- long-lived services -------------------------------------------------------------------------

@contextlib.contextmanager
def engine_services(engine: MemoryEngine) -> Iterator[None]:
    """The background services a long-lived writer runs while it serves: the one place they
    start and stop for ``mnemoscope mcp``, entered after the engine opens and left before it
    closes. The layer service, so social summaries and procedural patterns stay current as MCP
    clients write (as under ``serve --writable``), and the lifecycle scheduler
    (:class:`~engine.LifecycleScheduler`: expiry, retention caps, pruning and compaction on
    its interval, ``MEMORY_LIFECYCLE_*``; off with ``MEMORY_LIFECYCLE_ENABLED=off``)."""
    engine.start_layers()
    lifecycle = LifecycleScheduler.for_engine(engine)
    lifecycle.start()  # False (nothing runs) read-only or switched off
    try:
        yield
    finally:
        lifecycle.stop()
        engine.close_layers()


# -- transports ----------------------------------------------------------------------------------

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]


class BearerAuth:
    """ASGI middleware: every HTTP request needs ``Authorization: Bearer <token>``.

    A request without it, or with another token, gets ``401`` with a ``WWW-Authenticate``
    header and a JSON error, before the MCP app sees it. The comparison takes constant time.
    Lifespan events pass through (the MCP app starts its session manager on them).
    """

    def __init__(self, app: Asgi, token: str) -> None:
        self._app = app
        self._token = token.encode()

    def authorized(self, header: bytes) -> bool:
        """True when ``header`` is ``Bearer <the token>`` (the scheme in any case, as the
        introspection API accepts it)."""
        scheme, _, presented = header.partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(presented.strip(),
                                                                   self._token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        header = dict(scope.get("headers") or ()).get(b"authorization", b"")
        if scope["type"] == "http" and not self.authorized(header):
            body = (b'{"error": {"code": "UNAUTHORIZED", "message": "missing or wrong '
                    b'bearer token"}}')
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode()),
                                    (b"www-authenticate", b'Bearer realm="mnemoscope"')]})
            await send({"type": "http.response.body", "body": body})
            return
        await self._app(scope, receive, send)


def serve_stdio(server: MCPServer) -> None:
    """Serve over stdin/stdout until the client closes stdin."""
    server.run("stdio")


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0 = any free port), so the address is known
    (and can be printed) before the server starts.

    Raises:
        ConfigInvalid: the address cannot be bound (in use, not an address of this machine).
    """
    from engine.errors import ConfigInvalid

    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(info[0], socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(info[4])
        sock.listen(128)
    except OSError as exc:
        raise ConfigInvalid("--port", port, f"cannot listen on {host}:{port}: "
                                            f"{exc.strerror or exc}") from exc
    return sock


def serve_http(server: MCPServer, sock: socket.socket, token: str, host: str, *,
               ready: Callable[[], None] = lambda: None) -> None:
    """Serve streamable HTTP at ``/mcp`` on the bound ``sock`` until SIGINT/SIGTERM.

    Requests need the bearer ``token``; on a loopback ``host`` only loopback ``Host`` and
    ``Origin`` headers are accepted (:func:`rebinding_protection`).

    Args:
        ready: Called once a stop signal is handled (announce the address here): a client
            connecting after it waits in the socket's backlog for the server, and a SIGTERM
            sent as soon as the address is known stops the server cleanly.
    """
    import signal

    import anyio
    import uvicorn

    app = BearerAuth(server.streamable_http_app(
        streamable_http_path=MCP_PATH, host=host,
        transport_security=rebinding_protection(host)), token)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)

    def stopped(_signum: int, _frame: object) -> None:
        # Before uvicorn has put in its own handlers (while it starts), a stop asks it to exit
        # as soon as it has started; a handler that did nothing here swallowed a SIGTERM sent
        # right after the start-up lines, and the server ran on. After, uvicorn shuts down
        # gracefully on the signal and raises it again for this handler: returning lets the
        # caller close the engine (ledger, Chroma, lock) instead of the process dying.
        web.should_exit = True

    stops = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, stopped) for sig in stops}
    try:
        ready()
        anyio.run(lambda: web.serve(sockets=[sock]))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def rebinding_protection(host: str) -> TransportSecuritySettings | None:
    """The DNS-rebinding protection of a server bound to ``host``: for a loopback address,
    only requests whose ``Host`` (and ``Origin``, when sent) name a loopback address are
    served (``421`` / ``403`` otherwise), so a web page whose name was re-pointed at
    127.0.0.1 cannot reach the tools from the user's browser. None (no check) for an address
    bound on purpose with ``--allow-remote``: its clients' names are not known here.

    The SDK turns the protection on by itself only for the exact strings ``127.0.0.1``,
    ``localhost`` and ``::1``; every other spelling ``check_bind`` accepts as loopback
    (``127.0.0.2``, ``LOCALHOST``) left it off.
    """
    if not is_loopback(host):
        return None
    bound = host.strip().lower()
    names = dict.fromkeys(["127.0.0.1", "localhost", "[::1]",
                           f"[{bound.strip('[]')}]" if ":" in bound else bound])
    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=[f"{name}:*" for name in names],
                                     allowed_origins=[f"http://{name}:*" for name in names])

