"""Finding a thread in the sidebar (W4): the search box's words and ``tag:NAME`` filters.

The words match a thread's title (contains, as before) or the text of its messages. Message text is
found through the keyword index every chat turn already has (FTS5 on SQLite, the GIN index on
PostgreSQL): one indexed query for the words, grouped by conversation so each thread counts once and
names its newest matching message, joined to the thread list's own paged query. Nothing reads
every message. The matching message is shown as a short plain-text snippet.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass
from typing import Any

from hearth.errors import InvalidInput
from hearth.store import Connection, engine_of
from hearth.text import STOPWORDS

MAX_TAG = 40
MAX_TAGS = 20
MAX_WORDS = 8  # words of the search box asked of the index; more only narrow an AND further
SNIPPET_CHARS = 160
PREFIX_MIN = 3  # the last word is a prefix (it may still be being typed) once it has this many letters

# The index's tokens: letters and digits, as FTS5's unicode61 and PostgreSQL's simple parser cut them.
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
# Letters, digits, "_", "-" and "." (at least one letter or digit): a tag is safe in a URL path and
# ends where a word of the search box ends.
_TAG = re.compile(r"^(?=.*[^\W_])[\w.\-]+$", re.UNICODE)
# Markdown marks a snippet leaves out: a line's heading, quote or list mark; emphasis, code and
# strike marks; a link keeps its text. What is left is shown as written. Each pattern is linear in
# the text (U5): a link's text and address stop at the next "[", and a run of underscores is taken
# whole (possessive), so a run of "[" or of "_" is not read again from each of its characters.
_LINE_MARK = re.compile(r"^[ \t]{0,3}(?:#{1,6}|>+|[-*+]|\d{1,3}[.)])[ \t]+", re.MULTILINE)
_LINK = re.compile(r"!?\[([^\[\]\n]*)\]\([^)\s\[]*\)")
_INLINE_MARK = re.compile(r"\*+|`+|~~|(?<![^\W_])_+|_++(?![^\W_])")


@dataclass(frozen=True)
class Query:
    text: str  # what the title must contain (the words, without the tag filters)
    words: tuple[str, ...]  # what the message text must contain, each word
    tags: tuple[str, ...]


@dataclass(frozen=True)
class ThreadMatch:
    """Why a thread matched: its newest message holding every word, cut to a short snippet."""

    message_id: int
    role: str
    created_at: str
    snippet: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_tag(name: Any) -> str:
    """A tag as stored: trimmed, lower case, 1-40 letters, digits, "_", "-" or "."."""
    if not isinstance(name, str):
        raise InvalidInput("a tag must be text")
    tag = name.strip().lower()
    if tag.startswith("tag:"):
        tag = tag[4:]
    if not tag or len(tag) > MAX_TAG or not _TAG.fullmatch(tag):
        raise InvalidInput(f"a tag is 1-{MAX_TAG} letters, digits, '_', '-' or '.' (no spaces)")
    return tag


def parse(q: str) -> Query:
    """``tag:NAME`` parts of the search box become tag filters; the rest is text."""
    tags: list[str] = []
    rest: list[str] = []
    for part in (q or "").split():
        if part.lower().startswith("tag:") and len(part) > 4:
            tag = check_tag(part)
            if tag not in tags:
                tags.append(tag)
        else:
            rest.append(part)
    text = " ".join(rest)
    tokens = _TOKEN.findall(text.lower())  # lower, not casefold: the index keeps ß
    words = [t for t in dict.fromkeys(tokens) if len(t) > 1 and t not in STOPWORDS]
    if not words and tokens:
        words = [t for t in dict.fromkeys(tokens) if len(t) > 1]  # "we" alone is still a search
    return Query(text, tuple(words[:MAX_WORDS]), tuple(tags))


def _prefix(words: tuple[str, ...], i: int) -> bool:
    return i == len(words) - 1 and len(words[i]) >= PREFIX_MIN


def hits_sql(conn: Connection, user_id: int, words: tuple[str, ...]) -> tuple[str, list[Any]]:
    """A CTE ``hits(cid, mid)``: each of the user's conversations with a chat turn holding every
    word, and its newest such turn. One query on the keyword index, grouped by conversation."""
    if engine_of(conn).keyword_index == "tsvector":
        query = " & ".join("'" + w + "'" + (":*" if _prefix(words, i) else "") for i, w in enumerate(words))
        return ("hits AS MATERIALIZED (SELECT m.conversation_id AS cid, max(m.id) AS mid FROM messages m"
                " WHERE hearth_words(m.content) @@ to_tsquery('simple', hearth_fold(?))"
                " AND m.kind = 'chat' AND m.role IN ('user', 'assistant') AND m.user_id = ?"
                " GROUP BY m.conversation_id)"), [query, user_id]
    match = " AND ".join(f'"{w}"' + ("*" if _prefix(words, i) else "") for i, w in enumerate(words))
    return ("hits AS MATERIALIZED (SELECT m.conversation_id AS cid, max(m.id) AS mid"
            " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
            " WHERE messages_fts MATCH ? AND m.user_id = ? GROUP BY m.conversation_id)"), [match, user_id]


def _fold(ch: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", ch) if not unicodedata.combining(c)).lower()


def snippet(content: str, words: tuple[str, ...], width: int = SNIPPET_CHARS) -> str:
    """About ``width`` characters of a message around its first matching word, as one line of plain
    text without Markdown marks (the page shows it as text, never as HTML)."""
    text = " ".join(_INLINE_MARK.sub("", _LINK.sub(r"\1", _LINE_MARK.sub("", content))).split())
    # Fold accents and case as the index does, keeping where each folded letter came from.
    folded: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        for f in _fold(ch):
            folded.append(f)
            origin.append(i)
    haystack = "".join(folded)
    found = [p for p in (_word_at(haystack, w) for w in words) if p >= 0]
    centre = origin[min(found)] if found else 0
    if len(text) <= width:
        return text
    start = max(0, min(centre - width // 3, len(text) - width))
    if start:  # begin at a word
        space = text.find(" ", start, centre)
        start = space + 1 if space >= 0 else start
    end = start + width
    if end < len(text):
        space = text.rfind(" ", start + width // 2, end)
        end = space if space > 0 else end
    return ("…" if start else "") + text[start:end].strip() + ("…" if end < len(text) else "")


def _word_at(haystack: str, word: str) -> int:
    """Where ``word`` starts a word of ``haystack`` (the index matches whole words or prefixes)."""
    for m in re.finditer(re.escape(word), haystack):
        if m.start() == 0 or not haystack[m.start() - 1].isalnum():
            return m.start()
    return -1
