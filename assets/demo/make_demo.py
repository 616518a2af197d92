"""Regenerate the demo data set: ``python assets/demo/make_demo.py`` (deterministic).

Writes ``memories.jsonl`` (one record per line, the CLI's record JSON fields by name) and
``conversation.json`` (a list of ``{speaker, content, ts}``). The memories cover all six layers
and five agents, with exact duplicates, paraphrased near duplicates, contradictions and a few
FAKE secrets (an AWS-style key id, a GitHub-style token, emails) to exercise redaction.

For the layer views (docs/layers.md) it also holds:

* interactions with people (``metadata.social = {otherAgentId, sentiment}``) whose sentiment
  rises (Mia gets used to the robot), falls (Initech during an outage) or stays steady;
* whole episodes of recurring procedures (``metadata.episode = {id, steps, outcome}``), e.g.
  the support bot's password reset: 3 successes and 1 failure;
* the home robot's observations around the family flat with positions on its floor plan
  (``metadata.spatial``, metres; z is the height above the floor), over three months.

Every one of these is worded differently, so the ingest pipeline stores each (a near
duplicate would merge and an interaction or episode would be counted once).
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
     "Jordan likes the coffee machine started by 6:45."),
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


# The home robot's floor plan (metres): kitchen x 0-5 / y 0-4, living room x 0-5 / y 4-9,
# hallway x 5-7, bathroom x 7-9 / y 0-3.5, Mia's room x 9-12 / y 0-4.5, bedroom x 7-12 / y 5-9.
PLACES: dict[str, tuple[float, float, float]] = {
    "The charging dock is in the hallway next to the shoe rack.": (6.2, 1.0, 0.0),
    "The robot's charging dock stands in the hallway beside the shoe rack.": (6.2, 1.0, 0.0),
    "Mugs are in the upper cabinet to the left of the sink.": (0.6, 3.7, 1.8),
    "The living-room rug has a tassel edge that jams the brush; avoid the east side.":
        (4.2, 6.5, 0.0),
}

# (agent, person, days back, sentiment, what happened)
INTERACTIONS: list[tuple[str, str, float, float, str]] = [
    ("home-robot", "Mia", 84, -0.7, "Mia hid behind the sofa when I drove into the living room."),
    ("home-robot", "Mia", 71, -0.5, "Mia asked me to stay out of her room while she drew."),
    ("home-robot", "Mia", 58, -0.3, "Mia watched me empty the dust bin but kept her distance."),
    ("home-robot", "Mia", 43, 0.1, "Mia gave me a name: she calls me Rumble now."),
    ("home-robot", "Mia", 30, 0.35, "Mia asked me to find her lost hair clip under the bed."),
    ("home-robot", "Mia", 16, 0.6, "Mia taught Pixel to ride on top of me and laughed a lot."),
    ("home-robot", "Mia", 4, 0.8, "Mia said good night to me before going to bed."),
    ("home-robot", "Jordan", 80, 0.6, "Jordan thanked me for the spotless kitchen floor."),
    ("home-robot", "Jordan", 62, 0.5, "Jordan asked for a map of where the cat sheds most."),
    ("home-robot", "Jordan", 45, 0.3, "Jordan found the coffee lukewarm because I started it "
                                      "too early."),
    ("home-robot", "Jordan", 27, 0.6, "Jordan set a quiet schedule for his video calls."),
    ("home-robot", "Jordan", 9, 0.7, "Jordan showed guests how I avoid the rug tassels."),
    ("home-robot", "Chris", 77, 0.5, "Chris liked that the hallway was clean before the party."),
    ("home-robot", "Chris", 55, 0.3, "Chris asked me to skip the bedroom on Saturday mornings."),
    ("home-robot", "Chris", 38, 0.05, "Chris complained that my vacuum woke him at 7 am."),
    ("home-robot", "Chris", 21, -0.25, "Chris unplugged my dock to charge his e-bike battery."),
    ("home-robot", "Chris", 6, -0.45, "Chris said the robot is too loud during his yoga."),
    ("support-bot", "Dana Whitfield", 86, 0.6, "Dana Whitfield from Globex thanked me for a "
                                               "same-day fix to their SSO setup."),
    ("support-bot", "Dana Whitfield", 61, 0.75, "Dana praised the new CSV export in a reply."),
    ("support-bot", "Dana Whitfield", 33, 0.65, "Dana renewed Globex's annual plan without "
                                                "any questions."),
    ("support-bot", "Dana Whitfield", 12, 0.7, "Dana asked for ten extra seats for a new team."),
    ("support-bot", "Bill Lumbergh", 81, 0.2, "Bill Lumbergh of Initech asked about invoice "
                                              "dates, politely."),
    ("support-bot", "Bill Lumbergh", 52, 0.0, "Bill reported slow dashboards during their "
                                              "quarter close."),
    ("support-bot", "Bill Lumbergh", 35, -0.35, "Bill was angry about the 12-minute EU outage "
                                                "and wanted service credits."),
    ("support-bot", "Bill Lumbergh", 19, -0.55, "Bill threatened to cancel after a second "
                                                "outage hit Initech."),
    ("support-bot", "Bill Lumbergh", 3, -0.7, "Bill escalated to his account manager and "
                                              "copied legal."),
    ("support-bot", "Gavin Belson", 66, 0.4, "Gavin Belson of Hooli asked for a custom "
                                             "contract clause."),
    ("support-bot", "Gavin Belson", 24, -0.1, "Gavin pushed back on the price increase."),
    ("code-assistant", "Priya", 76, 0.0, "Priya rejected my first retry-queue patch as too "
                                         "clever."),
    ("code-assistant", "Priya", 50, 0.25, "Priya approved my second attempt, a plain lock "
                                          "around job pickup."),
    ("code-assistant", "Priya", 29, 0.5, "Priya asked me to pair on the webhook signer."),
    ("code-assistant", "Priya", 8, 0.7, "Priya credited me in the payments release notes."),
    ("code-assistant", "Marco", 70, 0.4, "Marco approved the orders-table migration plan."),
    ("code-assistant", "Marco", 47, 0.2, "Marco asked for a rollback script before merging."),
    ("code-assistant", "Marco", 26, -0.15, "Marco and I disagreed about index naming in "
                                           "review."),
    ("code-assistant", "Marco", 11, -0.2, "Marco rolled back last night's deploy: my index "
                                          "build blocked writes for minutes."),
    ("code-assistant", "Lena", 60, 0.5, "Lena liked the test fixtures I wrote for CSV export."),
    ("code-assistant", "Lena", 34, 0.55, "Lena asked how the auth middleware caches tokens."),
    ("code-assistant", "Lena", 14, 0.6, "Lena reused my pagination helper in the admin app."),
    ("travel-planner", "Sam", 79, 0.7, "Sam loved the quiet hotel I found in Lisbon."),
    ("travel-planner", "Sam", 57, 0.8, "Sam thanked me for catching the passport expiry date."),
    ("travel-planner", "Sam", 36, 0.3, "Sam was annoyed that the Kyoto fare expired before "
                                       "booking."),
    ("travel-planner", "Sam", 18, 0.75, "Sam approved the Porto plan in one message."),
    ("travel-planner", "Sam", 2, 0.85, "Sam said the Berlin trip was the smoothest yet."),
    ("travel-planner", "Alex", 48, 0.5, "Alex asked for a window seat for the first time."),
    ("travel-planner", "Alex", 15, 0.65, "Alex liked the vegetarian restaurant list for "
                                         "Porto."),
    ("research-agent", "Dr. Okafor", 74, 0.6, "Dr. Okafor shared the retrieval benchmark's "
                                              "hidden test split."),
    ("research-agent", "Dr. Okafor", 49, 0.7, "Dr. Okafor liked the dedup threshold analysis."),
    ("research-agent", "Dr. Okafor", 28, 0.45, "Dr. Okafor asked for more seeds before "
                                               "trusting the result."),
    ("research-agent", "Dr. Okafor", 7, 0.8, "Dr. Okafor invited me to co-author the "
                                             "workshop paper."),
]

PROCEDURES: dict[str, tuple[str, list[str]]] = {
    "evening-clean": ("home-robot", ["undock", "vacuum kitchen", "vacuum hallway",
                                     "empty dust bin", "dock"]),
    "morning-coffee": ("home-robot", ["wake at 6:40", "fill water tank", "start coffee machine",
                                      "notify Jordan"]),
    "password-reset": ("support-bot", ["verify identity", "send reset link", "confirm login"]),
    "refund": ("support-bot", ["check plan type", "compute prorated amount", "issue refund",
                               "send confirmation"]),
    "release": ("code-assistant", ["run tests", "bump version", "tag release", "push tag",
                                   "watch CI"]),
    "book-trip": ("travel-planner", ["search flights", "check change fee", "hold fare",
                                     "ask Sam to confirm", "book"]),
    "literature-review": ("research-agent", ["find a recent survey", "follow citations",
                                             "summarize papers", "write a brief"]),
}

# (procedure, days back, succeeded, what happened)
EPISODE_LOG: list[tuple[str, float, bool, str]] = [
    ("evening-clean", 82, True, "Cleaned after Monday dinner: kitchen and hallway done, bin "
                                "emptied, back on the dock by 20:10."),
    ("evening-clean", 68, True, "Thursday evening round went fine; crumbs under the table "
                                "took two passes."),
    ("evening-clean", 54, False, "Got tangled in a phone cable in the hallway and stopped "
                                 "before the dust bin."),
    ("evening-clean", 40, True, "Evening clean after the birthday party: lots of confetti, "
                                "still finished."),
    ("evening-clean", 23, False, "Dust bin was already full, so the hallway pass left dirt "
                                 "behind; no docking."),
    ("evening-clean", 10, True, "Quiet Sunday clean: kitchen, hallway, bin, dock, no "
                                "obstacles."),
    ("morning-coffee", 75, True, "Coffee ready at 6:45 for Jordan; he found it on the counter."),
    ("morning-coffee", 47, False, "Water tank was empty and the refill valve stuck; no coffee "
                                  "that morning."),
    ("morning-coffee", 31, True, "Made a double espresso for Jordan before his early flight."),
    ("morning-coffee", 5, True, "Started the machine at 7:15 as Jordan now asks; he thanked "
                                "me."),
    ("password-reset", 85, True, "Hooli admin locked out: verified via the account email, sent "
                                 "the link, login confirmed."),
    ("password-reset", 63, True, "Reset a Globex user's password after a phone verification."),
    ("password-reset", 39, False, "Initech user could not prove identity; reset refused and "
                                  "escalated."),
    ("password-reset", 13, True, "Vandelay's new hire got a reset link and logged in within "
                                 "minutes."),
    ("refund", 72, True, "Refunded Umbrella Health 9 months of an annual plan, prorated."),
    ("refund", 44, True, "Partial refund for Hooli after the seat downgrade, confirmed by "
                         "email."),
    ("refund", 17, True, "Refunded Initech the outage credits Bill asked for."),
    ("release", 80, True, "Released payments 2.4.0: tests green, tag pushed, CI published the "
                          "wheel."),
    ("release", 59, False, "Release 2.5.0 stalled: CI's integration job timed out twice."),
    ("release", 37, True, "Shipped 2.5.1 with the retry-queue fix after a clean CI run."),
    ("release", 15, False, "Tag v2.6.0 pushed, but CI rejected it: the changelog check "
                           "failed."),
    ("release", 4, True, "Re-released as 2.6.1 with the changelog fixed; CI went green."),
    ("book-trip", 78, True, "Booked Lisbon for Sam after checking the fare's change fee."),
    ("book-trip", 52, True, "Berlin long weekend held and booked the same afternoon."),
    ("book-trip", 36, False, "Searched flights to Kyoto and held a fare for 24 hours; the "
                             "hold lapsed unconfirmed."),
    ("book-trip", 18, True, "Porto for Sam and Alex: fare held overnight, confirmed, booked."),
    ("literature-review", 73, True, "Brief on memory consolidation: started from the 2024 "
                                    "survey, 14 papers."),
    ("literature-review", 46, True, "Reviewed the dense-retrieval literature for Dr. Okafor, "
                                    "beginning with the BEIR survey."),
    ("literature-review", 20, True, "Compared 9 long-context benchmarks in a brief, "
                                    "following citations from the RULER survey."),
]

# (days back, what the home robot noticed, (x, y, z))
OBSERVATIONS: list[tuple[float, str, tuple[float, float, float]]] = [
    (88, "Pixel's toy mouse was under the sofa again.", (2.3, 8.4, 0.0)),
    (85, "A slow water drip under the kitchen sink cabinet; told Jordan.", (1.2, 3.3, 0.0)),
    (81, "Mia's LEGO bricks cover her bedroom floor; steer around them.", (10.5, 2.0, 0.0)),
    (78, "The Wi-Fi signal is weak behind the hallway bookshelf.", (5.4, 6.8, 0.0)),
    (74, "Chris leaves a yoga mat by the living-room window.", (0.8, 5.2, 0.0)),
    (70, "The bathroom floor stays wet after showers; wait 30 minutes before mopping.",
     (8.0, 1.5, 0.0)),
    (66, "Breakfast crumbs pile up under the kitchen table on weekdays.", (2.6, 1.8, 0.0)),
    (63, "Pixel's litter box sits in the bathroom corner by the radiator.", (8.8, 0.4, 0.0)),
    (59, "The end of the hallway runner curls up and blocks my wheels.", (6.0, 4.5, 0.0)),
    (56, "The front door threshold is 2 cm high; approach it straight on.", (6.0, 0.2, 0.0)),
    (52, "A power strip under Jordan's desk: do not vacuum its cables.", (11.2, 8.4, 0.0)),
    (49, "Mia drops her school bag near the front door on weekdays.", (6.5, 0.9, 0.0)),
    (45, "A glass vase on the living-room side table; keep 30 cm away.", (4.4, 4.6, 0.8)),
    (41, "The balcony door is left open on warm evenings.", (0.2, 8.8, 0.0)),
    (38, "Biscuit, the neighbours' dog, sheds all over the rug on Sundays.", (2.7, 6.4, 0.0)),
    (34, "Jordan asked me not to scrub the wine stain near the sofa.", (2.1, 7.6, 0.0)),
    (31, "The kitchen smoke detector chirps: its battery is low.", (2.5, 2.0, 2.5)),
    (27, "The fern moved to the living-room windowsill.", (0.3, 6.0, 0.9)),
    (24, "Pixel tore open the cat food bag in the pantry's bottom drawer.", (4.6, 0.5, 0.2)),
    (20, "Boots left on the shoe rack block the approach to my dock.", (6.6, 1.4, 0.0)),
    (17, "The laundry basket in the bathroom overflows on Saturdays.", (7.6, 3.0, 0.0)),
    (13, "Mia's night light stays on until 21:30.", (11.6, 4.0, 0.6)),
    (10, "Only 4 cm under the bed: too low for me to enter.", (9.5, 7.5, 0.0)),
    (7, "Chris parks his bike in the hallway on rainy days.", (5.3, 2.8, 0.0)),
    (4, "A new plant pot on the kitchen floor by the balcony side.", (0.5, 3.9, 0.0)),
    (1, "Someone spilled cereal in front of the kitchen counter.", (1.8, 3.0, 0.0)),
]


def _record(agent: str, layer: str, category: str, importance: float, tags: list[str],
            content: str, when: datetime, source: str, tier: str, privacy: str,
            rng: random.Random, metadata: dict[str, object] | None = None) -> dict[str, object]:
    metadata = dict(metadata or {})
    place = PLACES.get(content)
    if place is not None:
        metadata["spatial"] = {"x": place[0], "y": place[1], "z": place[2]}
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
    out.extend(_layer_evidence(rng))
    out.sort(key=lambda r: str(r["created_at"]))
    return out


def _layer_evidence(rng: random.Random) -> list[dict[str, object]]:
    """Interactions, episodes and positioned observations (the layer views' data)."""
    out: list[dict[str, object]] = []

    def at(days_back: float) -> datetime:
        return END - timedelta(days=days_back, minutes=rng.randint(0, 600))

    for agent, person, days, sentiment, text in INTERACTIONS:
        out.append(_record(agent, "episodic", "episode", round(0.35 + 0.3 * abs(sentiment), 2),
                           ["interaction"], text, at(days), f"{agent}:session-{int(100 - days)}",
                           "agent", "PRIVATE", rng,
                           {"social": {"otherAgentId": person, "sentiment": sentiment}}))
    for number, (procedure, days, succeeded, text) in enumerate(EPISODE_LOG, 1):
        agent, steps = PROCEDURES[procedure]
        out.append(_record(agent, "episodic", "episode", 0.4, ["episode", procedure], text,
                           at(days), f"{agent}:session-{int(100 - days)}", "agent", "PRIVATE",
                           rng, {"episode": {"id": f"{procedure}-{number}", "steps": steps,
                                             "outcome": "success" if succeeded else "failure"}}))
    for days, text, (x, y, z) in OBSERVATIONS:
        out.append(_record("home-robot", "spatial", "fact", 0.45, ["floor-plan"], text,
                           at(days), f"home-robot:patrol-{int(100 - days)}", "agent",
                           "PRIVATE", rng, {"spatial": {"x": x, "y": y, "z": z}}))
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
