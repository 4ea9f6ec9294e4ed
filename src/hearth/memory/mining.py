"""Memories mined from imported archives (X4, G4): suggestions for the review queue, never facts.

After an import, an optional pass reads what the person said in each imported conversation and
asks the helper for durable memories (facts, preferences, people, dates): the offline helper
extracts them with plain patterns, the model helper writes them (each must quote the person's own
words). Every suggestion goes to the review queue as a ``memory_add`` proposal whose reason cites
the source conversation and its date; nothing is applied unless the owner approves it, or has
turned on ``auto_approve.memory``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hearth.errors import HearthError
from hearth.memory.helpers import skips
from hearth.memory.helpers.base import HelperOutputError, TurnText

if TYPE_CHECKING:
    from hearth.memory.helpers.base import Helper
    from hearth.records.context import Context

WINDOW_TURNS = 40  # the model reads a long conversation in windows of this many turns


@dataclass(frozen=True)
class Source:
    """One imported conversation or archive document, and what was said in it."""

    kind: str  # conversation | document
    id: int
    title: str
    date: str | None
    turns: tuple[TurnText, ...]


@dataclass
class MiningReport:
    sources: int = 0
    proposals: int = 0
    failed: int = 0  # windows the model answered unusably (left for a later run)


def mine(ctx: "Context", sources: list[Source], helper: "Helper") -> MiningReport:
    report = MiningReport()
    review = ctx.review()
    for source in sources:
        report.sources += 1
        when = (source.date or "")[:10] or "undated"
        for start in range(0, len(source.turns), WINDOW_TURNS):
            window = source.turns[start:start + WINDOW_TURNS]
            try:
                suggestions = helper.extract_memories(window)  # outside any transaction
            except HelperOutputError as exc:
                # Skipped (E13): recorded, and the other windows go on.
                report.failed += 1
                with ctx.store.write() as conn:
                    skips.record(conn, ctx.user_id, "mining", exc,
                                 conversation_id=source.id if source.kind == "conversation" else None)
                continue
            except HearthError:
                report.failed += 1
                continue
            for s in suggestions:
                proposal = review.propose(
                    "memory_add", {"text": s.text, "category": s.category},
                    f"{s.reason} Mined from \u201c{source.title}\u201d ({when}).", evidence=s.evidence,
                    source=s.source, conversation_id=source.id if source.kind == "conversation" else None)
                if proposal is not None:
                    report.proposals += 1
    return report
