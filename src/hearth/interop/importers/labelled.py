"""Plain-text archives with speaker labels (A5): old portal threads, pasted transcripts.

Speaker lines are the personas' current and legacy labels ("Elion Voicefire said:", an older
"Voicefire 5.1 said:") or any plain "Name said:" line; text before the first label is kept as
prose. A file may hold several conversations separated by a line of three or more ``=`` signs
with an optional title line ("=== Title ===" or "=== Title (2024-03-02) ==="); otherwise the file
is one document named after the file.
"""

from __future__ import annotations

import re

from hearth.errors import InvalidInput
from hearth.retrieval.archive import Labels, ParsedDocument, Turn, normalise, parse_turns

# A section line "=== Title (2024-03-02) ===" is read by plain string steps, not a pattern with a
# lazy group between runs of spaces (quadratic in a long line of them: U5).
_DAY = re.compile(r"\((\d{4}-\d{2}-\d{2})\)")


def _separator(line: str) -> str | None:
    """The title of a section line (three or more "=" first), or None for any other line."""
    return line.strip().strip("= \t").strip() if line.startswith("===") else None


def _dated(title: str) -> tuple[str, str] | None:
    """(title, day) of a title that ends in "(YYYY-MM-DD)"."""
    body = title.rstrip()
    found = _DAY.fullmatch(body[-12:]) if len(body) >= 12 else None
    return (body[:-12].strip(), found.group(1)) if found else None


def _sections(text: str, title: str) -> list[tuple[str, str]]:
    sections: list[tuple[str, list[str]]] = [(title, [])]
    for line in normalise(text).split("\n"):
        heading = _separator(line)
        if heading is not None:
            sections.append((heading or title, []))
        else:
            sections[-1][1].append(line)
    return [(t, "\n".join(lines).strip()) for t, lines in sections if "\n".join(lines).strip()]


def parse(text: str, labels: Labels, *, title: str, document_date: str | None = None) -> list[ParsedDocument]:
    documents = []
    for section_title, body in _sections(text, title):
        day = document_date
        dated = _dated(section_title)
        if dated:
            section_title, day = dated[0] or title, dated[1]
        turns = [Turn(t.label, t.role, t.text, day) for t in parse_turns(body, labels)]
        if turns:
            documents.append(ParsedDocument(section_title, turns, day, {"turns": len(turns)}, body))
    if not documents:
        raise InvalidInput("the file holds no text to import")
    return documents
