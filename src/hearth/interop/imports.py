"""Imports and exports for one user (X3, X4, A5, S8): the front door the CLI and server use.

``scope.imports.file(data, name)`` detects the format (or takes ``fmt``), parses the whole file
before writing anything, and writes it in ONE transaction, so a file is imported whole or not at
all. Every import is idempotent: what a file created is recorded in ``import_sources`` (cards,
chats) or carried by the rows themselves (fragment ``import_key``, archive content hashes), and a
second import of the same thing is reported as a duplicate. An interrupted multi-file import is
resumed by running it again.

Each file gets a :class:`FileReport`: imported / updated / duplicate / refused, with counts and,
when refused, the one-line reason. Nothing a report carries quotes the file's text.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator

from hearth.continuity.timeline import spans
from hearth.errors import HearthError, InvalidInput, NotFound
from hearth.prompt import prepared
from hearth.prompt.prepared import Ready
from hearth.store import utcnow
from hearth.store.queries import import_sources
from hearth.store.queries.interop_lookups import conversation_owned
from hearth.validation import load_json

if TYPE_CHECKING:
    from hearth.prompt.layers.fragments import Fragment, Fragments
    from hearth.records.context import Context
    from hearth.records.personas import Persona

Progress = Callable[[int, int], None]
FORMATS = ("auto", "card", "lorebook", "st-chat", "chatgpt", "claude", "labelled", "hearth", "hearth-chat")
# What importing a changed card of one's own persona does (X3): ask first, update it, or add a new one.
ON_MATCH = ("ask", "update", "new")
MAX_IMPORT_BYTES = 200_000_000
HEARTH_SCOPE = "hearth"  # a lorebook's extensions key for the scope Hearth gave the book


@dataclass
class FileReport:
    file: str
    format: str
    status: str = "imported"  # imported, updated, duplicate, refused
    reason: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    ids: dict[str, list[int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n


def digest(text: str | bytes) -> str:
    return hashlib.sha256(text.encode("utf-8") if isinstance(text, str) else text).hexdigest()


def detect(data: bytes, name: str = "") -> str:
    """The format of a file from its content (and, for zips, its name)."""
    from hearth.interop.importers.cards import is_png

    if is_png(data):
        return "card"
    if data[:4] == b"PK\x03\x04":
        return "chatgpt"  # zip exports: ChatGPT or Claude, told apart inside
    head = data[:4096].decode("utf-8", "ignore").lstrip("\ufeff \t\r\n")
    lower = name.lower()
    if lower.endswith(".jsonl") or (head.startswith("{") and "\n{" in head and '"user_name"' in head.split("\n")[0]):
        return "st-chat"
    if head.startswith('{"format":"hearth-export"') or head.replace(" ", "").startswith('{"format":"hearth-export"'):
        return "hearth"
    if head.replace(" ", "").replace("\n", "").startswith('{"format":"hearth-chat"'):
        return "hearth-chat"  # one conversation's export (W15)
    if head.startswith("{"):
        if '"chara_card_v' in head or '"first_mes"' in head:
            return "card"
        if '"entries"' in head:
            return "lorebook"
        if '"chat_messages"' in head:
            return "claude"
        # A big object: look further only as far as needed.
        body = data[:200_000].decode("utf-8", "ignore")
        if '"chara_card_v' in body or '"first_mes"' in body:
            return "card"
        if '"entries"' in body:
            return "lorebook"
        return "chatgpt"
    if head.startswith("["):
        return "claude" if '"chat_messages"' in data[:200_000].decode("utf-8", "ignore") else "chatgpt"
    return "labelled"


@contextlib.contextmanager
def _naming(where: str) -> Iterator[None]:
    """An entry refused when it is stored is named as the person finds it in their file (X5)."""
    try:
        yield
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc}") from None


def _json(data: bytes, name: str, *, paths: bool = False) -> Any:
    """Parsed JSON whose strings are storable (no NUL, no lone surrogate) and whose nesting is bounded."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{name} is not valid UTF-8 (byte {exc.start})") from None
    return load_json(text, name, paths=paths)


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-._")[:56]
    return slug or "character"


def _macros(text: str, name: str) -> str:
    """Card text as a persona keeps it: its macros ({{user}}, {{char}}, ...) stay as written and are
    filled when the text is placed in a prompt (``prompt.macros``), so the person's display name and
    the persona's own display name apply."""
    return text


def identity_from_card(name: str, fields: dict[str, Any]) -> str:
    """The persona identity a card gives: description, personality and scenario, macros kept."""
    parts = []
    if fields.get("description"):
        parts.append(fields["description"].strip())
    if fields.get("personality"):
        parts.append(f"{{{{char}}}}'s personality: {fields['personality'].strip()}")
    if fields.get("scenario"):
        parts.append(f"Scenario: {fields['scenario'].strip()}")
    return _macros("\n\n".join(parts), name) or "You are {{char}}."


def _card_values(card: Any) -> dict[str, Any]:
    """The persona settings a card gives, the same for a new persona and an updated one."""
    return {"identity": identity_from_card(card.name, card.fields),
            "custom_instructions": _macros(card.fields.get("system_prompt", ""), card.name), "card": card.fields}


class Imports:
    def __init__(self, ctx: "Context", fragments: "Fragments", update_persona: Callable[..., Any]):
        self._ctx = ctx
        self._fragments = fragments
        self._update_persona = update_persona  # a settings save that rebuilds the persona's prompts (P5)
        self.store = ctx.store
        self.user_id = ctx.user_id

    # -- the front door ---------------------------------------------------------------------------
    def file(self, data: bytes, name: str = "upload", *, fmt: str = "auto", persona: "Persona | None" = None,
             collection: str = "imports", document_date: str | None = None, progress: Progress | None = None,
             mine: bool = False, on_match: str = "ask") -> FileReport:
        """Import one file whole or not at all; refusals come back as a report, not an exception.

        The CLI and the server both call this, so a file imports the same way from either; what it
        added is embedded by the background worker (S7)."""
        if fmt not in FORMATS:
            raise InvalidInput(f"unknown import format {fmt!r}; expected one of {', '.join(FORMATS)}")
        if on_match not in ON_MATCH:
            raise InvalidInput(f"on_match must be one of {', '.join(ON_MATCH)}")
        if len(data) > MAX_IMPORT_BYTES:
            return FileReport(name, fmt, "refused", f"{name} is larger than {MAX_IMPORT_BYTES} bytes")
        fmt = detect(data, name) if fmt == "auto" else fmt
        try:
            if fmt == "card":
                return self.card(data, name, on_match=on_match)
            if fmt == "lorebook":
                return self.lorebook(data, name, progress=progress)
            if fmt == "st-chat":
                return self.st_chat(data, name, persona=persona, progress=progress, mine=mine)
            if fmt == "hearth-chat":
                return self.hearth_chat(data, name, persona=persona)
            if fmt == "hearth":
                from hearth.interop.export import import_user

                counts = import_user(self.store, self.user_id, data)
                with self.store.write() as conn:
                    self._queue_embedding(conn)
                return FileReport(name, fmt, counts=dict(counts))
            return self.archive(data, name, fmt=fmt, persona=persona, collection=collection,
                                document_date=document_date, progress=progress, mine=mine)
        except HearthError as exc:
            return FileReport(name, fmt, "refused", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    # -- sources: what an import created, so the same source is not imported twice ---------------
    def _seen(self, conn: Any, kind: str, key: str) -> int | None:
        found = import_sources.target(conn, self.user_id, kind, key)
        return None if found is None else (found[0] if found[0] is not None else 0)

    def _record(self, conn: Any, kind: str, key: str, target_id: int | None) -> None:
        import_sources.record(conn, self.user_id, kind, key, target_id, utcnow())

    # -- character cards (X3) ---------------------------------------------------------------------
    def card(self, data: bytes, name: str = "card", *, on_match: str = "ask") -> FileReport:
        """A character card becomes a persona, its book fragments, its image the avatar.

        A card exported from one of this user's personas (its Hearth mark names the persona's
        uuid) is that persona again: a ``duplicate`` when nothing changed; when something did,
        ``on_match`` decides: ``update`` it in place, import it as a ``new`` persona, or ``ask``
        (refused, nothing written, ``ids["existing"]`` names the persona)."""
        from hearth.interop.importers import card_identity, cards
        from hearth.interop.importers.lorebook import parse_character_book

        if on_match not in ON_MATCH:
            raise InvalidInput(f"on_match must be one of {', '.join(ON_MATCH)}")
        card = cards.read(data, name)
        card.avatar = card_identity.picture(card.avatar)
        mark = card_identity.take_mark(card)
        book = parse_character_book(card.book, card.name, name) if card.book else None
        key = card_identity.content_hash(card)
        personas = self._ctx.personas

        def attempt(ready: Ready | None) -> FileReport:
            report = FileReport(name, "card")
            with self.store.write() as conn:
                own = personas.by_uuid(mark.uuid) if mark else None
                if own is not None and on_match != "new":
                    return self._card_again(report, own, card, book, key, mark, on_match, ready)
                # Cards imported before content hashes were normalised are known by their old key.
                for known in ((key, digest(card.canonical())) if on_match != "new" else ()):
                    existing = self._seen(conn, "card", known)
                    if existing:
                        try:
                            personas.get(existing)
                            report.status = "duplicate"
                            report.ids["personas"] = [existing]
                            return report
                        except NotFound:
                            pass  # the persona was removed since; import it again
                taken = {p.name for p in personas.list(include_archived=True)}
                base = _slug(card.name)
                slug, n = base, 2
                while slug in taken:
                    slug, n = f"{base}-{n}", n + 1
                persona = personas.create(slug, card.name, **_card_values(card))
                if card.avatar:
                    personas.set_avatar(persona.id, card.avatar, "image/png")
                report.ids["personas"] = [persona.id]
                report.add("personas")
                shelf = self._character_book(persona.id, book.name, card.name) if book and book.entries else ""
                for n, entry in enumerate(book.entries if book else ()):
                    with _naming(f"character_book.entries[{n}] in {name}"):
                        f = self._card_fragment(persona.id, shelf, entry)
                    report.ids.setdefault("fragments", []).append(f.id)
                    report.add("fragments")
                self._record(conn, "card", key, persona.id)
            return report

        # A persona updated in place rebuilds its prompts, filled outside the write lock (U5).
        return prepared.run(self.store, attempt)

    def _card_fragment(self, persona_id: int, book_name: str, entry: Any) -> "Fragment":
        return self._fragments.add(entry.keys, entry.content, book_name, enabled=entry.enabled,
                                               controls=entry.controls, import_key=f"card:{persona_id}:{entry.uid}")

    def _card_again(self, report: FileReport, own: "Persona", card: Any, book: Any, key: str, mark: Any,
                    on_match: str, ready: Ready | None = None) -> FileReport:
        """A card of this user's own persona, met again: the same, an update, or a question."""
        from hearth.interop.importers.card_identity import pixels
        from hearth.lorebook.controls import check_controls

        report.ids["personas"] = [own.id]
        same_text = self.card_hash(own.id) == key
        new_picture = card.avatar is not None and pixels(card.avatar) != pixels(self._avatar(own.id))
        if same_text and not new_picture:
            report.status = "duplicate"
            return report
        if on_match == "ask":
            report.status = "refused"
            report.ids = {"existing": [own.id]}
            why = ("an earlier export of it (the persona has changed since)" if mark.hash == key
                   else "the card differs from it")
            report.reason = (f"{report.file}: this character is already here (persona {own.id}) and {why}; "
                             "choose to update it or to import the card as a new persona")
            return report
        if not same_text:
            self._update_persona(own.id, ready=ready, display_name=card.name, **_card_values(card))
            report.add("personas_updated")
        if new_picture:
            self._ctx.personas.set_avatar(own.id, card.avatar, "image/png")
            report.add("avatars_updated")
        fragments = self._fragments
        current = {f.import_key: f for f in self._card_fragments(own.id)}
        shelf = self._character_book(own.id, book.name, card.name) if book and book.entries else ""
        for entry in book.entries if book else ():
            have = current.pop(f"card:{own.id}:{entry.uid}", None)
            if have is None:
                report.ids.setdefault("fragments", []).append(self._card_fragment(own.id, shelf, entry).id)
                report.add("fragments_added")
            elif not (list(have.triggers) == entry.keys and have.definition == entry.content.strip()
                      and have.enabled == entry.enabled and have.category == shelf
                      and have.controls == check_controls(entry.controls)):
                fragments.edit(have.id, triggers=entry.keys, definition=entry.content, category=shelf,
                               enabled=entry.enabled, controls=entry.controls, change="card import")
                report.add("fragments_updated")
        for gone in current.values():  # entries the card no longer has: the card is what was chosen
            fragments.remove(gone.id)
            report.add("fragments_removed")
        self._record(self.store.connection(), "card", key, own.id)  # the write's own connection
        report.status = "updated"
        return report

    def card_hash(self, persona_id: int) -> str:
        """The normalised content hash of the persona's card as it would be exported now."""
        from hearth.interop.importers import card_identity, cards

        payload = self.card_json(persona_id, mark=False)
        return card_identity.content_hash(cards.from_json(payload))

    def card_png(self, persona_id: int) -> bytes:
        """A persona as a V3 character card PNG (``chara`` and ``ccv3`` chunks)."""
        from hearth.interop.importers import cards

        return cards.write_png(self.card_json(persona_id), self._avatar(persona_id))

    def card_json(self, persona_id: int, *, mark: bool = True) -> dict[str, Any]:
        """A persona as a V3 card; ``mark`` adds the Hearth mark (``extensions.hearth``: the persona's
        uuid and the content hash) by which importing the card again finds this persona."""
        from hearth.interop.importers import card_identity, cards
        from hearth.interop.importers.lorebook import character_book

        persona = self._ctx.personas.get(persona_id)
        fields = dict(persona.card)
        if isinstance(fields.get("extensions"), dict):
            fields["extensions"] = {k: v for k, v in fields["extensions"].items() if k != card_identity.KEY}
        # A persona made in Hearth has no card text: its identity becomes the description. One
        # made from a card whose text was personality or scenario only keeps that shape, so an
        # update from the card does not fold the identity into it again.
        if not any(fields.get(k) for k in ("description", "personality", "scenario")) and persona.identity:
            fields["description"] = persona.identity
        if not fields.get("system_prompt") and persona.custom_instructions:
            fields["system_prompt"] = persona.custom_instructions
        book = character_book(self._own_book(persona_id))
        payload = cards.v3_json(persona.display_name, fields, book)
        if mark and persona.uuid:
            digest_now = card_identity.content_hash(cards.from_json(payload))
            payload["data"]["extensions"] = {**payload["data"]["extensions"],
                                             card_identity.KEY: {"uuid": persona.uuid, "hash": digest_now}}
        return payload

    def _avatar(self, persona_id: int) -> bytes | None:
        found = self._ctx.personas.avatar(persona_id)
        return found[0] if found else None

    def _card_fragments(self, persona_id: int) -> list["Fragment"]:
        prefix = f"card:{persona_id}:"
        return [f for f in self._fragments.list() if (f.import_key or "").startswith(prefix)]

    def _character_book(self, persona_id: int, wanted: str, character: str) -> str:
        """The category a card's own book takes: the book its earlier entries are in, else a new
        book scoped to the persona (``layers.books``)."""
        books = self._fragments.books
        own = set(books.of_character(persona_id))
        held = [f.category for f in self._card_fragments(persona_id) if f.category in own]
        return held[0] if held else books.for_character(wanted, persona_id, character)

    def _own_book(self, persona_id: int) -> list["Fragment"]:
        """What a card export writes back as its character book: the persona's own books, with
        fragments added to them by hand, and any its card brought in that were moved elsewhere."""
        prefix = f"card:{persona_id}:"
        own = set(self._fragments.books.of_character(persona_id))
        return [f for f in self._fragments.list()
                if f.category in own or (f.import_key or "").startswith(prefix)]

    # -- lorebooks (X3) -----------------------------------------------------------------------------
    def lorebook(self, data: bytes, name: str = "lorebook", *, progress: Progress | None = None) -> FileReport:
        from hearth.interop.importers.lorebook import parse_world_info

        stem = re.sub(r"\.json$", "", name.rsplit("/", 1)[-1], flags=re.I) or "lorebook"
        book = parse_world_info(_json(data, name, paths=True), stem, name)
        recorded = _take_scope(book.extra)
        report = FileReport(name, "lorebook")
        fragments = self._fragments
        total = len(book.entries)
        if progress:
            progress(0, total)
        with self.store.write():
            current = {f.import_key: f for f in fragments.list() if f.import_key}
            shelf = fragments.books.for_world_info(book.name, f"lorebook:{book.name}:")
            if book.entries and book.extra:
                # The book's own settings travel with its first entry, for export.
                book.entries[0].controls["extra"]["book_meta"] = book.extra
            for i, entry in enumerate(book.entries, start=1):
                key = f"lorebook:{book.name}:{entry.uid}"
                have = current.get(key)
                if have is None:
                    with _naming(f"entries[{json.dumps(entry.uid)}] in {name}"):
                        f = fragments.add(entry.keys, entry.content, shelf, enabled=entry.enabled,
                                          controls=entry.controls, import_key=key)
                    report.add("imported")
                    report.ids.setdefault("fragments", []).append(f.id)
                else:
                    from hearth.lorebook.controls import check_controls

                    same = (list(have.triggers) == entry.keys and have.definition == entry.content.strip()
                            and have.enabled == entry.enabled and have.controls == check_controls(entry.controls))
                    if same:
                        report.add("duplicates")
                    else:
                        fragments.edit(have.id, triggers=entry.keys, definition=entry.content, enabled=entry.enabled,
                                       controls=entry.controls)
                        report.add("updated")
                if progress and (i % 200 == 0 or i == total):
                    progress(i, total)
            if recorded is not None and shelf:
                # A Hearth export records who the book was for; without that, a new book is for
                # everyone and a book imported before keeps the scope it was given since.
                missing = fragments.books.restore(shelf, recorded)
                if missing:
                    report.add("scope_personas_missing", missing)
        if not report.counts.get("imported") and not report.counts.get("updated"):
            report.status = "duplicate" if total else "imported"
        elif not report.counts.get("imported"):
            report.status = "updated"
        return report

    def lorebook_json(self, book: str | None = None) -> dict[str, Any]:
        """Fragments as a SillyTavern World Info file: one book's (by category), or all of them."""
        from hearth.interop.importers.lorebook import world_info

        fragments = self._fragments
        chosen = [f for f in fragments.list() if book is None or f.category == book]
        if book is not None and not chosen:
            raise NotFound(f"no fragments in lorebook {book!r}")
        out = world_info(chosen, book or "Hearth fragments")
        if book is not None:
            # Who the book is for, so importing this file into Hearth again restores it.
            extensions = out.get("extensions")
            out["extensions"] = {**(extensions if isinstance(extensions, dict) else {}),
                                 HEARTH_SCOPE: fragments.books.describe(book)}
        return out

    # -- SillyTavern chats (X3) -------------------------------------------------------------------
    def _persona_for(self, character: str) -> "Persona":
        wanted = character.casefold()
        for persona in self._ctx.personas.list():
            if wanted in (persona.display_name.casefold(), persona.name.casefold(), _slug(character).casefold()):
                return persona
        raise InvalidInput(f"no persona is called {character[:60]!r}: import its character card first, "
                           "or name the persona to use")

    def st_chat(self, data: bytes, name: str, *, persona: "Persona | None" = None,
                progress: Progress | None = None, mine: bool = False) -> FileReport:
        from hearth.interop.importers import st_chat
        from hearth.memory.mining import Source

        chat = st_chat.parse(data, name)
        target = persona or self._persona_for(chat.character_name)
        key = digest(json.dumps([chat.character_name, [(m.role, m.text, m.created_at) for m in chat.messages]],
                                ensure_ascii=False))
        report = FileReport(name, "st-chat")
        conversations = self._ctx.conversations
        total = len(chat.messages)
        if progress:
            progress(0, total)
        with self.store.write() as conn:
            existing = self._seen(conn, "st-chat", key)
            if existing and conversation_owned(conn, existing, self.user_id):
                report.status = "duplicate"
                report.ids["conversations"] = [existing]
                return report
            started = chat.created_at or chat.messages[0].created_at
            title = f"{chat.character_name} ({(started or '')[:10]})" if started else chat.character_name
            conversation = conversations.create(target.id, title=title[:200], channel="import", created_at=started)
            with self._span(conn, target.id) as span_id:
                for i, m in enumerate(chat.messages, start=1):
                    conversations.add_message(conversation.id, m.role, m.text, channel="import",
                                              metadata=m.metadata, created_at=m.created_at, span_id=span_id)
                    if progress and (i % 100 == 0 or i == total):
                        progress(i, total)
            self._record(conn, "st-chat", key, conversation.id)
            self._queue_embedding(conn)
        report.counts = {"conversations": 1, "messages": total}
        if chat.skipped_system:
            report.counts["system_skipped"] = chat.skipped_system
        report.ids["conversations"] = [conversation.id]
        if mine:
            from hearth.memory.helpers.base import TurnText

            turns = tuple(TurnText(m.role, m.text) for m in chat.messages)
            self._mine(report, [Source("conversation", conversation.id, title, started, turns)])
        return report

    def hearth_chat(self, data: bytes, name: str, *, persona: "Persona | None" = None) -> FileReport:
        """One conversation Hearth exported as JSON (W15), back as a read-only thread with its
        attachments, continued with Branch like any imported thread. Its persona is the one named
        ``persona``, else the one the export names, else the default; importing it again is a duplicate."""
        from hearth.interop import chat_export
        from hearth.records import attachments

        chat = chat_export.parse(_json(data, name), name, self._ctx.settings, self._ctx.settings.max_message_chars)
        if persona is None and chat.persona_name:
            try:
                persona = self._persona_for(chat.persona_name)
            except InvalidInput:
                persona = None
        target = persona or self._ctx.personas.default()
        key = digest(data)
        report = FileReport(name, "hearth-chat")
        conversations = self._ctx.conversations
        with self.store.write() as conn:
            existing = self._seen(conn, "hearth-chat", key)
            if existing and conversation_owned(conn, existing, self.user_id):
                report.status = "duplicate"
                report.ids["conversations"] = [existing]
                return report
            conversation = conversations.create(target.id, title=(chat.title or name)[:200], channel="import",
                                                created_at=chat.created_at)
            files = 0
            with self._span(conn, target.id) as span_id:
                for turn in chat.turns:
                    message = conversations.add_message(conversation.id, turn.role, turn.content, channel="import",
                                                        created_at=turn.created_at, span_id=span_id)
                    files += attachments.add(conn, self.user_id, conversation.id, message.id, turn.attached)
            self._record(conn, "hearth-chat", key, conversation.id)
            self._queue_embedding(conn)
        report.counts = {"conversations": 1, "messages": len(chat.turns), "attachments": files}
        report.ids["conversations"] = [conversation.id]
        return report

    # -- archives: ChatGPT (.zip or conversations.json), Claude, labelled text (A5, X4) --------------
    def archive(self, data: bytes, name: str, *, fmt: str, persona: "Persona | None" = None,
                collection: str = "imports", document_date: str | None = None, progress: Progress | None = None,
                mine: bool = False) -> FileReport:
        from hearth.interop.importers import chatgpt, claude, decode, labelled, zips
        from hearth.memory.mining import Source
        from hearth.retrieval.archive import Archive

        speaker = persona or self._ctx.personas.default()
        labels = {"user": speaker.user_label, "assistant": speaker.assistant_label}
        if zips.is_zip(data):
            data = zips.read_member(data, "conversations.json", name)
            head = data[:200_000].decode("utf-8", "ignore")
            fmt = "claude" if '"chat_messages"' in head else "chatgpt"
        archive = Archive(self.store, self.user_id)
        if fmt in ("chatgpt", "claude"):
            payload = _json(data, name)
            try:
                documents = (chatgpt.parse(payload, labels) if fmt == "chatgpt" else claude.parse(payload, labels))
            except (TypeError, AttributeError, KeyError, ValueError, RecursionError) as exc:
                # A shape the parser did not foresee: refuse the file rather than guess.
                raise InvalidInput(f"{name} is not a {fmt} export this version can read ({type(exc).__name__})") \
                    from None
        else:
            text = decode(data, name)
            if not text.strip():
                raise InvalidInput(f"{name} is empty")
            documents = labelled.parse(text, archive.labels(), title=name, document_date=document_date)
        report = FileReport(name, fmt, counts={"documents": 0, "duplicates": 0, "chunks": 0})
        total = len(documents)
        if progress:
            progress(0, total)
        sources = []
        with self.store.write() as conn:
            for i, doc in enumerate(documents, start=1):
                # The persona whose labels the turns carry is the one a continuation speaks as.
                metadata = {**doc.metadata, "persona_id": speaker.id}
                result = archive.add_turns(doc.title, doc.turns, collection=collection, source=fmt,
                                           document_date=doc.date, metadata=metadata, hash_text=doc.hash_text)
                if result.created:
                    report.add("documents")
                    report.ids.setdefault("documents", []).append(result.document.id)
                    sources.append(Source("document", result.document.id, doc.title, doc.date,
                                          tuple(_turn_text(t) for t in doc.turns)))
                elif result.turns_added:
                    # Imported before documents kept their turns: now it opens as a thread.
                    report.add("documents_updated")
                    report.ids.setdefault("documents", []).append(result.document.id)
                else:
                    report.add("duplicates")
                report.add("chunks", result.chunks_added)
                if progress:
                    progress(i, total)
            if report.counts["documents"]:
                with self._span(conn, speaker.id):
                    pass  # archive documents are not ledger events: the span records that the import happened
                self._queue_embedding(conn)
        if not report.counts["documents"] and report.counts.get("documents_updated"):
            report.status = "updated"
        elif not report.counts["documents"] and report.counts["duplicates"]:
            report.status = "duplicate"
        if mine and sources:
            self._mine(report, sources)
        return report

    # -- after an import ----------------------------------------------------------------------------
    def _span(self, conn: Any, persona_id: int | None) -> AbstractContextManager[int]:
        """An import is a burst of activity (E1): its own span, opened and closed in the import's
        transaction, with no idle checkpoint (imported turns are history, not a conversation that
        went quiet; ``mine`` is how they reach memory extraction)."""
        return spans.burst(conn, self._ctx, persona_id, "import", reason="imported")

    def _queue_embedding(self, conn: Any) -> None:
        """Embedding starts at once in the background, so search ranks the new text semantically."""
        from hearth.ops.jobs import enqueue
        from hearth.retrieval.embedding_job import EMBED_JOB, EMBED_JOB_SLICE

        enqueue(conn, self.user_id, EMBED_JOB, {"limit": EMBED_JOB_SLICE}, dedupe_key="embed")

    def _mine(self, report: FileReport, sources: list[Any]) -> None:
        from hearth.memory.helpers import helper_for
        from hearth.memory.mining import mine

        mined = mine(self._ctx, sources, helper_for(self._ctx))
        report.counts["proposals"] = mined.proposals
        if mined.failed:
            report.counts["mining_failed"] = mined.failed


def _take_scope(extra: dict[str, Any]) -> dict[str, Any] | None:
    """Take the scope a Hearth lorebook export recorded (``extensions.hearth``) out of a book's
    settings, so it is applied rather than kept as a setting to write back."""
    extensions = extra.get("extensions")
    if not isinstance(extensions, dict) or HEARTH_SCOPE not in extensions:
        return None
    rest = {k: v for k, v in extensions.items() if k != HEARTH_SCOPE}
    if rest:
        extra["extensions"] = rest
    else:
        del extra["extensions"]
    recorded = extensions[HEARTH_SCOPE]
    if not isinstance(recorded, dict):
        raise InvalidInput("extensions.hearth of a lorebook must be an object")
    return recorded


def _turn_text(turn: Any) -> Any:
    from hearth.memory.helpers.base import TurnText

    return TurnText(turn.role if turn.role in ("user", "assistant") else "assistant", turn.text)
