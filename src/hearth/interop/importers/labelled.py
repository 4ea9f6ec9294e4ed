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

SEPARATOR = re.compile(r"^={3,}\s*(.*?)\s*={0,}\s*$")
DATED = re.compile(r"^(.*?)\s*\((\d{4}-\d{2}-\d{2})\)\s*$")


def _sections(text: str, title: str) -> list[tuple[str, str]]:
    sections: list[tuple[str, list[str]]] = [(title, [])]
    for line in normalise(text).split("\n"):
        m = SEPARATOR.match(line)
        if m:
            sections.append((m.group(1).strip("= ").strip() or title, []))
        else:
            sections[-1][1].append(line)
    return [(t, "\n".join(lines).strip()) for t, lines in sections if "\n".join(lines).strip()]


def parse(text: str, labels: Labels, *, title: str, document_date: str | None = None) -> list[ParsedDocument]:
    documents = []
    for section_title, body in _sections(text, title):
        day = document_date
        m = DATED.match(section_title)
        if m:
            section_title, day = m.group(1).strip() or title, m.group(2)
        turns = [Turn(t.label, t.role, t.text, day) for t in parse_turns(body, labels)]
        if turns:
            documents.append(ParsedDocument(section_title, turns, day, {"turns": len(turns)}, body))
    if not documents:
        raise InvalidInput("the file holds no text to import")
    return documents
