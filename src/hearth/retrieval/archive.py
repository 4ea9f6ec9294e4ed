"""The deep archive (A1): documents cut into labelled chunks, deduplicated by content hash.

A document is an imported ChatGPT conversation, an old portal thread, a paper or a testimony. Its
text is kept as chunks of a few speaker turns each, with the speaker labels as written ("Elion
Voicefire said:", or a legacy "Voicefire 5.1 said:"), so a chunk reads the way the person
remembers it. Labels are persona configuration (G6): the parser accepts every persona's current
user and assistant labels and legacy labels, and any plain "Name said:" line.

Re-uploading the same document adds nothing: the document's normalised text has a hash, and so
does each chunk, both unique per user. A document also keeps its turns as they came (speaker label,
role, time, text; ``archive_turns``), so an imported conversation can be read as a thread, page by
page. The chunks stay the one searchable copy: turns are not indexed, so a recall hit never
appears twice. One document is one transaction (S3), so a large import that
is interrupted resumes with the next document and never duplicates the finished ones (S8).
"""

from __future__ import annotations

import builtins
import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterable

from hearth.store.queries import archive_chunks as stored
from hearth.store.queries import personas
from hearth.store.queries.archive_chunks import Document

from ..errors import InvalidInput, NotFound
from ..store import Connection, Store, utcnow
from ..validation import check_text

CHUNK_TARGET = 1_200  # characters: a few turns, enough context for a match to be read alone
CHUNK_MAX = 2_000
TURN_PAGE = 100  # turns a thread view reads at once; a 5,000-turn conversation is read in pages
MAX_TURN_PAGE = 500
# Sources whose documents are conversations from another app: listed as imported threads.
CONVERSATION_SOURCES = ("chatgpt", "claude")
MAX_TITLE = 300
MAX_COLLECTION = 100
PRONOUNS = frozenset("he she they it i we you someone everyone nobody".split())
GENERIC_LABEL = re.compile(r"^\s*([A-Z][\w.'’-]*(?: [\w.'’-]+){0,3}) said:\s*", re.UNICODE)


@dataclass(frozen=True)
class Turn:
    """One speaker's contribution in a transcript."""

    label: str  # "Elion Voicefire said:" as written; "" for unlabelled prose
    role: str  # "user", "assistant", or "" when unknown
    text: str
    date: str | None = None


@dataclass(frozen=True)
class ParsedDocument:
    """One document an importer read from an outside file, before it is added to the archive."""

    title: str
    turns: list[Turn]
    date: str | None
    metadata: dict[str, Any]
    hash_text: str


@dataclass(frozen=True)
class Chunk:
    position: int
    text: str
    speakers: tuple[str, ...]
    date: str | None


@dataclass(frozen=True)
class AddResult:
    document: Document
    created: bool  # False: the same content was already in the archive
    chunks_added: int
    chunks_skipped: int  # identical chunks already present from another document
    # Turns kept for the thread view; for a document already there, the turns it lacked (it was
    # added before turns were kept), so importing an export again gives old imports their turns.
    turns_added: int = 0


@dataclass(frozen=True)
class TurnPage:
    """A page of a document's turns, oldest first, for the read-only thread view."""

    document: Document
    turns: list[dict[str, Any]]  # position, role, speaker, label, text, created_at
    total: int
    has_earlier: bool
    has_later: bool
    # True for a document added before turns were kept: its chunks (passages of a few turns, the
    # labels in their text) stand in for the turns, in order.
    passages: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"document": self.document.to_dict(), "turns": self.turns, "total": self.total,
                "has_earlier": self.has_earlier, "has_later": self.has_later, "passages": self.passages}


# -- labels and parsing -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Labels:
    """Known speaker labels mapped to roles, longest first so "X Y said:" wins over "Y said:"."""

    known: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_personas(cls, personas: Iterable[Any]) -> "Labels":
        pairs: dict[str, str] = {}
        for p in personas:
            pairs.setdefault(p.user_label.strip(), "user")
            pairs.setdefault(p.assistant_label.strip(), "assistant")
            for legacy in p.legacy_labels:
                pairs.setdefault(legacy.strip(), "assistant")
        return cls(tuple(sorted(pairs.items(), key=lambda kv: -len(kv[0]))))

    def match(self, line: str) -> tuple[str, str, str] | None:
        """(label, role, rest of line) when the line opens a new speaker turn."""
        stripped = line.lstrip()
        for label, role in self.known:
            if stripped.casefold().startswith(label.casefold()):
                return stripped[:len(label)], role, stripped[len(label):].strip()
        m = GENERIC_LABEL.match(line)
        if m and m.group(1).casefold() not in PRONOUNS:
            return m.group(0).strip(), "", line[m.end():].strip()
        return None


def speaker_name(label: str) -> str:
    """The name a label speaks for: "Elion Voicefire said:" -> "Elion Voicefire"."""
    return re.sub(r"\s*said:\s*$", "", label.strip(), flags=re.IGNORECASE).rstrip(":").strip()


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()


def content_hash(text: str) -> str:
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()


def parse_turns(text: str, labels: Labels) -> list[Turn]:
    """Split a labelled transcript into turns; text before the first label is a prose turn."""
    turns: list[Turn] = []
    label, role = "", ""
    lines: list[str] = []

    def flush() -> None:
        body = "\n".join(lines).strip()
        if body or label:
            turns.append(Turn(label, role, body))

    for line in normalise(text).split("\n"):
        found = labels.match(line)
        if found:
            flush()
            label, role, rest = found
            lines = [rest] if rest else []
        else:
            lines.append(line)
    flush()
    return [t for t in turns if t.text or t.label]


def _split_long(text: str, limit: int) -> list[str]:
    """Paragraphs, then sentences, then hard cuts: pieces of at most ``limit`` characters."""
    pieces: list[str] = []
    for para in re.split(r"\n{2,}", text):
        if len(para) <= limit:
            pieces.append(para)
            continue
        sentence_buf = ""
        for sentence in re.split(r"(?<=[.!?])\s+", para):
            if len(sentence) > limit:
                if sentence_buf:
                    pieces.append(sentence_buf)
                    sentence_buf = ""
                # Hard cuts by index: cutting the rest off again after each piece was quadratic (U5).
                cut = len(sentence) - len(sentence) % limit if len(sentence) % limit else len(sentence) - limit
                pieces.extend(sentence[i:i + limit] for i in range(0, cut, limit))
                sentence = sentence[cut:]
            if len(sentence_buf) + len(sentence) + 1 > limit and sentence_buf:
                pieces.append(sentence_buf)
                sentence_buf = sentence
            else:
                sentence_buf = f"{sentence_buf} {sentence}".strip()
        if sentence_buf:
            pieces.append(sentence_buf)
    merged: list[str] = []
    for piece in pieces:
        if merged and len(merged[-1]) + len(piece) + 2 <= limit:
            merged[-1] += "\n\n" + piece
        else:
            merged.append(piece)
    return [p for p in merged if p.strip()]


def chunk_turns(turns: list[Turn], *, target: int = CHUNK_TARGET, maximum: int = CHUNK_MAX) -> list[Chunk]:
    """Consecutive turns grouped up to ``target`` characters; a long turn is split and relabelled."""
    chunks: list[Chunk] = []
    buf: list[str] = []
    speakers: dict[str, None] = {}
    day: str | None = None
    size = 0

    def flush() -> None:
        nonlocal buf, speakers, day, size
        if buf:
            chunks.append(Chunk(len(chunks), "\n\n".join(buf), tuple(speakers), day))
        buf, speakers, day, size = [], {}, None, 0

    for turn in turns:
        head = turn.label
        body_limit = maximum - len(head) - 16
        pieces = _split_long(turn.text, body_limit) if turn.text else [""]
        for i, piece in enumerate(pieces):
            label = head if i == 0 or not head else f"{head} (continued)"
            rendered = f"{label}\n{piece}".strip() if label else piece
            if buf and size + len(rendered) > target:
                flush()
            buf.append(rendered)
            size += len(rendered) + 2
            if turn.label:
                speakers.setdefault(turn.label, None)
            day = day or turn.date
    flush()
    return chunks


# -- the store ----------------------------------------------------------------------------------------
def check_document(title: str, collection: str) -> tuple[str, str]:
    """A document's title and collection as stored, or ``InvalidInput`` (importers check first)."""
    if not isinstance(title, str) or not title.strip():
        raise InvalidInput("a document needs a title")
    check_text(title, "the document title")
    if not isinstance(collection, str) or not collection.strip() or len(collection) > MAX_COLLECTION:
        raise InvalidInput(f"collection must be 1-{MAX_COLLECTION} characters")
    check_text(collection, "the collection")
    return " ".join(title.split())[:MAX_TITLE], collection.strip()


class Archive:
    """One user's archive documents and chunks."""

    def __init__(self, store: Store, user_id: int):
        self.store = store
        self.user_id = user_id

    def labels(self) -> Labels:
        return Labels.from_personas(personas.for_user(self.store.connection(), self.user_id, include_archived=True))

    def add_text(self, title: str, text: str, *, collection: str = "default", source: str = "upload",
                 document_date: str | None = None, metadata: dict[str, Any] | None = None) -> AddResult:
        """A labelled transcript or plain prose; labels come from the user's personas."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("the document is empty")
        turns = parse_turns(text, self.labels())
        turns = [Turn(t.label, t.role, t.text, document_date) for t in turns]
        return self.add_turns(title, turns, collection=collection, source=source, document_date=document_date,
                              metadata=metadata, hash_text=text)

    def add_turns(self, title: str, turns: list[Turn], *, collection: str = "default", source: str = "upload",
                  document_date: str | None = None, metadata: dict[str, Any] | None = None,
                  hash_text: str | None = None) -> AddResult:
        """Store a document made of turns, unless the same content is already there."""
        title, collection = check_document(title, collection)
        if not turns:
            raise InvalidInput("the document has no text")
        rendered = hash_text if hash_text is not None else "\n\n".join(f"{t.label}\n{t.text}" for t in turns)
        digest = content_hash(rendered)
        chunks = chunk_turns(turns)
        with self.store.write() as conn:
            found = stored.by_hash(conn, self.user_id, digest)
            if found is not None:
                return AddResult(found, False, 0, 0, self._keep_turns(conn, found.id, turns, only_if_none=True))
            document_id = stored.insert_document(conn, self.user_id, collection, title, source, document_date, digest,
                                                 json.dumps(metadata or {}, ensure_ascii=False), utcnow())
            added = skipped = 0
            for chunk in chunks:
                inserted = int(stored.insert_chunk(
                    conn, self.user_id, document_id, added, chunk.text,
                    json.dumps(list(chunk.speakers), ensure_ascii=False), chunk.date or document_date,
                    content_hash(chunk.text)))
                added += inserted
                skipped += 1 - inserted
            stored.set_chunk_count(conn, document_id, added)
            kept = self._keep_turns(conn, document_id, turns)
            return AddResult(self.get(document_id), True, added, skipped, kept)

    def _keep_turns(self, conn: Connection, document_id: int, turns: builtins.list[Turn], *,
                    only_if_none: bool = False) -> int:
        """Store the document's turns in order (not indexed: the chunks are what search reads)."""
        if only_if_none and stored.has_turns(conn, document_id):
            return 0
        stored.insert_turns(conn, self.user_id, document_id, [(t.role, t.label, t.text, t.date) for t in turns])
        return len(turns)

    def get(self, document_id: int) -> Document:
        found = stored.get(self.store.connection(), self.user_id, document_id)
        if found is None:
            raise NotFound(f"no archive document {document_id}")
        return found

    def list(self, collection: str | None = None, limit: int = 200, offset: int = 0,
             sources: tuple[str, ...] = ()) -> list[Document]:
        return stored.documents(self.store.connection(), self.user_id, limit, offset, collection=collection,
                                sources=sources)

    def collections(self) -> builtins.list[dict[str, Any]]:
        return stored.collections(self.store.connection(), self.user_id)

    def chunks(self, document_id: int) -> builtins.list[dict[str, Any]]:
        self.get(document_id)
        return stored.chunks(self.store.connection(), self.user_id, document_id)

    def turns(self, document_id: int, *, limit: int = TURN_PAGE, before: int | None = None,
              start: int | None = None) -> TurnPage:
        """A page of the document's turns: the newest ``limit``, those before position ``before``,
        or those from position ``start`` on. Another user's document is unknown (``NotFound``)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_TURN_PAGE:
            raise InvalidInput(f"limit must be 1-{MAX_TURN_PAGE}")
        if before is not None and start is not None:
            raise InvalidInput("give before or start, not both")
        document = self.get(document_id)
        conn = self.store.connection()
        total = stored.turn_count(conn, self.user_id, document_id)
        passages = total == 0
        if passages:  # added before turns were kept: its chunks, in order
            total = stored.chunk_count(conn, self.user_id, document_id)
        rows = stored.turn_page(conn, self.user_id, document_id, limit, passages=passages, before=before, start=start)
        turns = [{"position": r["position"], "role": r["role"], "speaker": speaker_name(r["label"]),
                  "label": r["label"], "text": r["text"], "created_at": r["created_at"]} for r in rows]
        # Positions run 0..total-1 (turns by their order, chunks as they were stored).
        return TurnPage(document, turns, total, bool(turns) and turns[0]["position"] > 0,
                        bool(turns) and turns[-1]["position"] < total - 1, passages)

    def delete(self, document_id: int) -> None:
        with self.store.write() as conn:
            self.get(document_id)
            stored.delete_document(conn, self.user_id, document_id)
