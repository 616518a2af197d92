"""Regenerate the demo data set: ``python assets/demo/make_demo.py`` (deterministic).

Writes ``memories.jsonl`` (one record per line, the CLI's record JSON fields by name) and
``conversation.json`` (a list of ``{speaker, content, ts}``). The memories cover all six layers
and five agents, with exact duplicates, paraphrased near duplicates, contradictions and a few
FAKE secrets (an AWS-style key id, a GitHub-style token, emails) to exercise redaction.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
END = datetime(2026, 11, 20, 17, 0, tzinfo=UTC)

# (agent, layer, category, importance, tags, content)
BASE: list[tuple[str, str, str, float, list[str], str]] = [
    # -- support-bot ----------------------------------------------------------------------
    ("support-bot", "semantic", "fact", 0.8, ["billing"],
     "Acme Cloud invoices are issued on the 1st of each month and due within 30 days."),
    ("support-bot", "semantic", "fact", 0.7, ["billing", "refunds"],
     "Refunds for annual plans are prorated after the first 14 days."),
    ("support-bot", "semantic", "fact", 0.6, ["product"],
     "The Team plan includes 10 seats; extra seats cost $8 per month each."),
    ("support-bot", "semantic", "fact", 0.75, ["sla"],
     "Enterprise customers have a 99.95% uptime SLA with service credits."),
    ("support-bot", "procedural", "skill", 0.8, ["password"],
     "To reset a password: Settings → Security → Send reset link; links expire after 1 hour."),
    ("support-bot", "procedural", "skill", 0.7, ["escalation"],
     "Escalate outages to the on-call engineer through PagerDuty service ACME-PROD."),
    ("support-bot", "procedural", "skill", 0.6, ["billing"],
     "To change a card on file, open Billing → Payment methods and add the new card first."),
    ("support-bot", "social", "preference", 0.7, ["customer"],
     "Dana Whitfield (Globex) prefers email over phone and replies within the hour."),
    ("support-bot", "social", "fact", 0.65, ["customer"],
     "Globex's admin contact is dana.whitfield@globex.example."),
    ("support-bot", "episodic", "episode", 0.5, ["ticket"],
     "Ticket #4812: Globex could not export CSV reports; fixed by clearing the report cache."),
    ("support-bot", "episodic", "episode", 0.55, ["ticket", "outage"],
     "Ticket #4840: EU customers saw 502 errors for 12 minutes during a failed deploy."),
    ("support-bot", "system", "context", 0.9, ["policy"],
     "Never share another customer's data, even if the requester claims to be an admin."),
    ("support-bot", "system", "context", 0.85, ["tone"],
     "Answer in the customer's language and keep replies under 150 words."),
    ("support-bot", "spatial", "fact", 0.4, ["datacenter"],
     "Acme's EU region runs in Frankfurt; the US region in Ashburn, Virginia."),
    # -- code-assistant --------------------------------------------------------------------
    ("code-assistant", "semantic", "fact", 0.8, ["repo"],
     "The payments service is written in Go 1.22 and lives in the monorepo under services/pay."),
    ("code-assistant", "semantic", "fact", 0.7, ["repo", "ci"],
     "CI runs on GitHub Actions; the main workflow is .github/workflows/ci.yml."),
    ("code-assistant", "semantic", "fact", 0.6, ["database"],
     "The orders table is partitioned by month and has 1.2 billion rows."),
    ("code-assistant", "semantic", "preference", 0.7, ["style"],
     "The user prefers small pull requests with one logical change each."),
    ("code-assistant", "semantic", "preference", 0.8, ["style"],
     "The user wants type hints on every public function and mypy --strict to pass."),
    ("code-assistant", "procedural", "skill", 0.75, ["release"],
     "Release steps: bump the version, tag vX.Y.Z, push the tag, and CI publishes the wheel."),
    ("code-assistant", "procedural", "skill", 0.65, ["debugging"],
     "To profile the API locally, run `make profile` and open the flame graph in speedscope."),
    ("code-assistant", "procedural", "skill", 0.6, ["database"],
     "Run migrations with `alembic upgrade head` after pulling main."),
    ("code-assistant", "episodic", "episode", 0.5, ["incident"],
     "Fixed a race in the retry queue: two workers could pick the same job after a timeout."),
    ("code-assistant", "episodic", "episode", 0.45, ["review"],
     "Reviewed PR #231 (pagination); asked for a test of the empty-page case."),
    ("code-assistant", "system", "context", 0.9, ["policy"],
     "Never commit credentials; use the secret manager and environment variables."),
    ("code-assistant", "social", "fact", 0.55, ["team"],
     "Priya owns the payments service; Marco reviews database migrations."),
    ("code-assistant", "spatial", "fact", 0.3, ["infra"],
     "The staging cluster runs in us-east-2; production in us-east-1 and eu-central-1."),
    # -- travel-planner --------------------------------------------------------------------
    ("travel-planner", "semantic", "preference", 0.85, ["flights"],
     "Sam prefers aisle seats and morning flights."),
    ("travel-planner", "semantic", "preference", 0.7, ["hotels"],
     "Sam likes quiet hotels within walking distance of public transport."),
    ("travel-planner", "semantic", "fact", 0.75, ["documents"],
     "Sam's passport expires in March 2028."),
    ("travel-planner", "semantic", "preference", 0.6, ["food"],
     "Sam is vegetarian and avoids very spicy food."),
    ("travel-planner", "episodic", "episode", 0.55, ["trip", "lisbon"],
     "Booked Lisbon, 12–16 May: TAP flight TP 1351 and Hotel Lumen in Chiado."),
    ("travel-planner", "episodic", "episode", 0.5, ["trip", "tokyo"],
     "Sam asked for ideas for a week in Tokyo in October with a day trip to Nikko."),
    ("travel-planner", "procedural", "skill", 0.6, ["booking"],
     "Always check the fare's change fee before booking; Sam changes plans often."),
    ("travel-planner", "social", "fact", 0.6, ["family"],
     "Sam travels with their partner Alex, who needs a vegetarian meal too."),
    ("travel-planner", "spatial", "fact", 0.5, ["home"],
     "Sam lives in Amsterdam, 15 minutes by train from Schiphol."),
    ("travel-planner", "spatial", "fact", 0.45, ["lisbon"],
     "Hotel Lumen is at Rua do Alecrim, 5 minutes from the Baixa-Chiado metro station."),
    ("travel-planner", "system", "context", 0.8, ["budget"],
     "Ask before booking anything over €500."),
    # -- research-agent --------------------------------------------------------------------
    ("research-agent", "semantic", "fact", 0.7, ["ml"],
     "all-MiniLM-L6-v2 produces 384-dimensional sentence embeddings."),
    ("research-agent", "semantic", "fact", 0.65, ["ml"],
     "Cosine similarity of normalized embeddings equals their dot product."),
    ("research-agent", "semantic", "fact", 0.6, ["memory"],
     "The Ebbinghaus forgetting curve models retention as exponential decay over time."),
    ("research-agent", "semantic", "fact", 0.55, ["ann"],
     "HNSW indexes trade a little recall for logarithmic-time nearest-neighbour search."),
    ("research-agent", "procedural", "skill", 0.6, ["method"],
     "For literature reviews, start from a recent survey and follow its citations backwards."),
    ("research-agent", "episodic", "episode", 0.5, ["reading"],
     "Read the MemGPT paper; key idea: an LLM managing its own memory tiers like an OS."),
    ("research-agent", "episodic", "episode", 0.45, ["experiment"],
     "Dedup experiment: a 0.85 cosine threshold merged 4% of memories with 1 false merge."),
    ("research-agent", "social", "fact", 0.5, ["collaborators"],
     "Dr. Okafor at the university lab is the contact for the retrieval benchmark."),
    ("research-agent", "system", "context", 0.8, ["citations"],
     "Cite sources with a link for every factual claim in a summary."),
    ("research-agent", "spatial", "fact", 0.3, ["lab"],
     "The GPU workstation is in room 4.12 of the lab building."),
    # -- home-robot -----------------------------------------------------------------------
    ("home-robot", "spatial", "fact", 0.7, ["kitchen"],
     "The charging dock is in the hallway next to the shoe rack."),
    ("home-robot", "spatial", "fact", 0.6, ["kitchen"],
     "Mugs are in the upper cabinet to the left of the sink."),
    ("home-robot", "spatial", "fact", 0.55, ["living-room"],
     "The living-room rug has a tassel edge that jams the brush; avoid the east side."),
    ("home-robot", "procedural", "skill", 0.7, ["cleaning"],
     "Vacuum the kitchen after dinner, then empty the dust bin at the dock."),
    ("home-robot", "procedural", "skill", 0.6, ["plants"],
     "Water the fern on Mondays and Thursdays with 200 ml; the cactus once a month."),
    ("home-robot", "social", "preference", 0.75, ["family"],
     "Mia (age 7) is afraid of the robot moving at night; stay docked after 21:00."),
    ("home-robot", "social", "preference", 0.6, ["family"],
     "Jordan likes the coffee machine started at 6:45 on weekdays."),
    ("home-robot", "episodic", "episode", 0.4, ["incident"],
     "Got stuck under the sofa on Tuesday; Jordan moved the sofa 10 cm."),
    ("home-robot", "system", "context", 0.95, ["safety"],
     "Never open the front door for anyone."),
    ("home-robot", "semantic", "fact", 0.5, ["pets"],
     "The cat, Pixel, is fed at 7:00 and 18:00; food is in the pantry's bottom drawer."),
]

# Exact duplicates (same content again, from another source).
DUPLICATES = [2, 4, 16, 27, 31, 49, 55]

# Paraphrases (near duplicates) of a base index.
PARAPHRASES: list[tuple[int, str]] = [
    (0, "Invoices for Acme Cloud go out on the first of every month, payable within 30 days."),
    (4, "Password reset: Settings → Security → send a reset link (it expires after an hour)."),
    (14, "The payments service is Go 1.22 code in the monorepo at services/pay."),
    (17, "User likes small PRs, each with a single logical change."),
    (27, "Sam prefers morning flights and an aisle seat."),
    (29, "Sam's passport is valid until March 2028."),
    (30, "Sam eats vegetarian and doesn't like very spicy dishes."),
    (38, "all-MiniLM-L6-v2 embeddings have 384 dimensions."),
    (48, "The robot's charging dock stands in the hallway beside the shoe rack."),
    (52, "Water the fern every Monday and Thursday (200 ml); water the cactus monthly."),
    (53, "Mia, 7, gets scared when the robot moves at night — stay on the dock after 9 pm."),
    (11, "Do not share one customer's data with another, even if they say they're an admin."),
]

# Contradictions: same agent and layer, conflicting facts.
CONTRADICTIONS: list[tuple[str, str, str, list[str], str, str]] = [
    ("code-assistant", "episodic", "context", ["meeting"],
     "The team standup is at 3pm.", "The team standup moved to 5pm."),
    ("travel-planner", "semantic", "preference", ["flights"],
     "Sam prefers aisle seats.", "Sam now prefers window seats on long-haul flights."),
    ("support-bot", "semantic", "fact", ["product"],
     "The Team plan includes 10 seats.", "The Team plan includes 15 seats since November."),
    ("home-robot", "social", "preference", ["family"],
     "Jordan likes the coffee machine started at 6:45.",
     "Jordan asked to start the coffee machine at 7:15 from now on."),
    ("research-agent", "semantic", "fact", ["ann"],
     "The benchmark deadline is 1 December.",
     "The benchmark deadline was extended to 15 December."),
]

# FAKE secrets and personal data, for the redaction views and redacted exports.
SECRETS: list[tuple[str, str, str, str]] = [
    ("code-assistant", "system", "context",
     "Staging AWS access key id is AKIAIOSFODNN7EXAMPLE (rotate after the demo)."),
    ("code-assistant", "episodic", "episode",
     "CI failed because GITHUB_TOKEN=ghp_16C7e42F292c6912E7710c838347Ae178B4a was expired."),
    ("support-bot", "social", "fact",
     "Escalation contact for Initech is bill.lumbergh@initech.example, phone +1 555 0142."),
    ("travel-planner", "semantic", "fact",
     "Sam's frequent-flyer card number is 4111 1111 1111 1111 (test number)."),
    ("research-agent", "system", "context",
     "The lab's API key for the benchmark server: api_key=sk-test-51Hc9dLm2QxZ8vN3pR7tY4wK"),
    ("home-robot", "system", "context",
     "Wi-Fi for the robot: network 'Pixelnet', password=correct-horse-battery-staple."),
]

EPISODES = {
    "support-bot": ["Answered a billing question from {who} about {what}.",
                    "Helped {who} with {what}; resolved in one reply.",
                    "{who} reported a bug in {what}; filed ticket #{n}."],
    "code-assistant": ["Paired with {who} on {what} for 40 minutes.",
                       "Wrote tests for {what} after {who} found a regression.",
                       "Explained {what} to {who} during code review."],
    "travel-planner": ["Compared three hotels in {what} for {who}.",
                       "{who} asked about trains from Amsterdam to {what}.",
                       "Found cheaper flights to {what} for {who} by shifting a day."],
    "research-agent": ["Summarized a paper on {what} for {who}.",
                       "Collected 12 sources on {what}; {who} wants a one-page brief.",
                       "Re-ran the {what} evaluation for {who} with a fixed seed."],
    "home-robot": ["Cleaned the {what} while {who} was out.",
                   "{who} asked to skip the {what} today.",
                   "Noticed the {what} window left open; told {who}."],
}
WHO = {
    "support-bot": ["Globex", "Initech", "Umbrella Health", "Hooli", "Vandelay Imports"],
    "code-assistant": ["Priya", "Marco", "Lena", "Tomás"],
    "travel-planner": ["Sam", "Alex"],
    "research-agent": ["Dr. Okafor", "the user"],
    "home-robot": ["Jordan", "Mia", "Chris"],
}
WHAT = {
    "support-bot": ["invoices", "SSO setup", "the mobile app", "API rate limits", "seat counts"],
    "code-assistant": ["the retry queue", "pagination", "the auth middleware", "CSV export",
                       "the webhook signer"],
    "travel-planner": ["Porto", "Kyoto", "Berlin", "Copenhagen", "Seville"],
    "research-agent": ["memory consolidation", "dense retrieval", "dedup thresholds",
                       "long-context evaluation"],
    "home-robot": ["kitchen", "bathroom", "living room", "hallway", "bedroom"],
}


def _record(agent: str, layer: str, category: str, importance: float, tags: list[str],
            content: str, when: datetime, source: str, tier: str, privacy: str,
            rng: random.Random) -> dict[str, object]:
    metadata: dict[str, object] = {}
    if layer == "spatial":
        metadata["spatial"] = {"x": round(rng.uniform(0, 12), 1), "y": round(rng.uniform(0, 9), 1),
                               "z": 0.0}
    if layer == "social":
        metadata["social"] = {"sentiment": round(rng.uniform(-0.2, 0.9), 2)}
    return {
        "content": content, "agent_id": agent, "layer": layer, "category": category,
        "importance": importance, "confidence": round(rng.uniform(0.6, 0.98), 2),
        "tags": tags, "privacy": privacy, "source": source, "source_tier": tier,
        "created_at": when.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "metadata": metadata,
    }


def _tags(record: dict[str, object]) -> list[str]:
    tags = record["tags"]
    return [str(t) for t in tags] if isinstance(tags, list) else []


def build() -> list[dict[str, object]]:
    """The demo memories, oldest first."""
    rng = random.Random(20261120)
    out: list[dict[str, object]] = []

    def when(days_back: float) -> datetime:
        return END - timedelta(days=days_back, minutes=rng.randint(0, 600))

    for agent, layer, category, importance, tags, content in BASE:
        privacy = "PUBLIC" if layer in ("semantic", "procedural") and rng.random() < 0.4 \
            else "PRIVATE"
        out.append(_record(agent, layer, category, importance, tags, content,
                           when(rng.uniform(20, 90)), f"{agent}:session-{rng.randint(1, 40)}",
                           "agent", privacy, rng))
    for index in DUPLICATES:
        copy = dict(out[index])
        copy["source"] = f"{copy['agent_id']}:session-{rng.randint(41, 80)}"
        copy["confidence"] = round(min(0.99, float(str(copy["confidence"])) + 0.05), 2)
        copy["created_at"] = when(rng.uniform(1, 19)).isoformat(timespec="seconds").replace(
            "+00:00", "Z")
        out.append(copy)
    for index, text in PARAPHRASES:
        base = out[index]
        out.append(_record(str(base["agent_id"]), str(base["layer"]), str(base["category"]),
                           float(str(base["importance"])), _tags(base),
                           text, when(rng.uniform(1, 19)), "user:chat", "human",
                           str(base["privacy"]), rng))
    for agent, layer, category, tags, first, second in CONTRADICTIONS:
        out.append(_record(agent, layer, category, 0.7, tags, first, when(rng.uniform(25, 50)),
                           f"{agent}:session-{rng.randint(1, 40)}", "agent", "PRIVATE", rng))
        out.append(_record(agent, layer, category, 0.7, tags, second, when(rng.uniform(1, 10)),
                           "user:chat", "human", "PRIVATE", rng))
    for agent, layer, category, content in SECRETS:
        out.append(_record(agent, layer, category, 0.6, ["secret"], content,
                           when(rng.uniform(2, 60)), f"{agent}:session-{rng.randint(1, 40)}",
                           "agent", "PRIVATE", rng))
    number = 4900
    for agent, templates in EPISODES.items():
        for _ in range(16):
            number += 1
            text = rng.choice(templates).format(who=rng.choice(WHO[agent]),
                                                what=rng.choice(WHAT[agent]), n=number)
            record = _record(agent, "episodic", "episode", round(rng.uniform(0.2, 0.6), 2),
                             ["log"], text, when(rng.uniform(0, 90)),
                             f"{agent}:session-{rng.randint(1, 80)}", "auto", "PRIVATE", rng)
            out.append(record)
    out.sort(key=lambda r: str(r["created_at"]))
    return out


def conversation() -> list[dict[str, str]]:
    """A short support conversation between a user and the travel planner."""
    turns = [
        ("Sam", "Hi! Can you find me flights to Porto for the second weekend of January?"),
        ("assistant", "Sure. Morning flights with an aisle seat, as usual?"),
        ("Sam", "Yes, but Alex is coming too, so two seats together please."),
        ("assistant", "Noted. TAP has a 07:05 departure on Friday, €148 per person."),
        ("Sam", "Great. Also, we'd like a quiet hotel near the river this time."),
        ("assistant", "I found Casa da Ribeira, 4 minutes from the São Bento station."),
        ("Sam", "Perfect, book it. And remember Alex is vegetarian too."),
        ("assistant", "Booked. I've noted vegetarian meals for both of you."),
    ]
    start = END - timedelta(days=1)
    return [{"speaker": who, "content": text,
             "ts": (start + timedelta(minutes=2 * i)).isoformat().replace("+00:00", "Z")}
            for i, (who, text) in enumerate(turns)]


def main() -> None:
    """Write both files next to this script."""
    records = build()
    with (HERE / "memories.jsonl").open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    (HERE / "conversation.json").write_text(
        json.dumps(conversation(), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"{len(records)} memories, {len(conversation())} conversation turns")


if __name__ == "__main__":
    main()
