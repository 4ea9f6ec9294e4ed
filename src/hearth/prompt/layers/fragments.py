"""Memory fragments (F1, F2): small durable anchors brought in when the latest message names them.

A fragment has a category, trigger words or phrases, a definition, optional secondary filters
(``all_of``, ``any_of``, ``none_of``), a priority and an enabled flag. Matching uses the compiled
``triggers.TriggerIndex`` (word boundaries, case-insensitive, phrases, simple plurals). The index
is built once per library change: every edit bumps a per-user library version in the same
transaction, and the compiled index is cached per store, user and persona under that version, so
edits are live and an unchanged library is never recompiled. A conversation's persona sees only
the books in scope for it (``books``: a card's own book is its character's).

The layer renders the matched fragments, trimmed to a per-message budget, as stable profile
context to be used before episodic recall (fifth in SPEC D2).
"""

from __future__ import annotations

import builtins
import json
import threading
import weakref
from typing import Any, Callable, Hashable, Sequence

from hearth.errors import InvalidInput, NotFound
from hearth.lorebook.controls import Activation, Activator, check_controls, check_keys
from hearth.lorebook.triggers import Match, normalise_trigger
from hearth.prompt import macros
from hearth.prompt.dynamic import Block, Turn
from hearth.prompt.layers.books import Books
from hearth.prompt.layers.settings import LayerSettings
from hearth.records import ledger, versions
from hearth.store import Connection, Store, utcnow
from hearth.store.queries import fragment_books, layer_messages
from hearth.store.queries import fragments as fragment_rows
from hearth.store.queries.fragments import Fragment, bump_version, library_version, timers
from hearth.validation import check_text

MAX_TRIGGERS = 50
MAX_FILTER_TERMS = 50
MAX_DEFINITION = 4_000
MAX_LORE_DEFINITION = 100_000  # lorebook entries are often longer than a fragment
MAX_CATEGORY = 60
MAX_FRAGMENTS = 20_000
MAX_PENDING = 1_000  # lorebook timers waiting for their turn's reply, per scope

LABEL = "MEMORY FRAGMENTS"
TRUST = ("Stable profile context written or approved by the person, brought in because the latest message "
         "mentions it. Treat it as reliable background and use it before episodic recall, unless the person "
         "explicitly asks about a past conversation.")


def _terms(items: Sequence[str] | None, what: str, *, required: bool = False, limit: int = MAX_FILTER_TERMS) -> tuple[str, ...]:
    if items is None:
        items = ()
    if isinstance(items, str) or not isinstance(items, (list, tuple)):
        raise InvalidInput(f"{what} must be a list of words or phrases")
    out: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for item in items:
        words = normalise_trigger(item)  # raises InvalidInput with the reason
        if words not in seen:
            seen.add(words)
            out.append(" ".join(item.split()))
    if required and not out:
        raise InvalidInput(f"a fragment needs at least one of its {what}")
    if len(out) > limit:
        raise InvalidInput(f"at most {limit} {what}")
    return tuple(out)


def _definition(text: Any, limit: int = MAX_DEFINITION, allow_empty: bool = False) -> str:
    if not isinstance(text, str) or not (text.strip() or allow_empty):
        raise InvalidInput("a fragment needs a definition")
    check_text(text, "a definition")
    text = text.strip()
    if len(text) > limit:
        raise InvalidInput(f"a definition may be at most {limit} characters")
    return text


def _lore_fields(triggers: Any, definition: Any, controls: dict[str, Any]) -> tuple[str, str]:
    """Triggers and definition of a fragment with lorebook controls: any key text, regex keys checked."""
    keys = check_keys(triggers)  # no keys is allowed: like SillyTavern, it then fires only if constant
    return json.dumps(keys, ensure_ascii=False), _definition(definition, MAX_LORE_DEFINITION, allow_empty=True)


def _category(text: Any) -> str:
    check_text(text, "category")
    text = " ".join(text.split())
    if len(text) > MAX_CATEGORY:
        raise InvalidInput(f"a category may be at most {MAX_CATEGORY} characters")
    return text


def _priority(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not -1000 <= value <= 1000:
        raise InvalidInput("priority must be a whole number from -1000 to 1000")
    return value


# -- the compiled index cache: store -> (user id, persona id or None for the whole library) ->
# (library version, index, fragments by id) --------------------------------------------------------
_Compiled = tuple[int, Activator, dict[Hashable, Fragment]]
_cache: "weakref.WeakKeyDictionary[Store, dict[tuple[int, int | None], _Compiled]]" = weakref.WeakKeyDictionary()
_cache_lock = threading.Lock()
builds = {"count": 0}  # how many indexes were compiled (tests and diagnostics)


def compiled(store: Store, conn: Connection, user_id: int,
             persona_id: int | None = None) -> tuple[Activator, dict[Hashable, Fragment]]:
    """The compiled index of a user's enabled fragments, rebuilt only when the library changed.

    With ``persona_id``, only the books in scope for that persona (``books``); without, the whole
    library (the editor's test box). Scope changes bump the library version too."""
    version = library_version(conn, user_id)
    key = (user_id, persona_id)
    with _cache_lock:
        hit = _cache.get(store, {}).get(key)
    if hit is not None and hit[0] == version:
        return hit[1], hit[2]
    if persona_id is not None and not fragment_books.any_scoped(conn, user_id):
        # No book leaves anyone out: every persona shares the whole library's index.
        index, by_id = compiled(store, conn, user_id)
    else:
        found = (fragment_books.in_scope(conn, user_id, persona_id) if persona_id is not None else
                 fragment_rows.enabled(conn, user_id))
        by_id = {f.id: f for f in found}
        index = Activator.build(by_id.values())
        builds["count"] += 1
    with _cache_lock:
        _cache.setdefault(store, {})[key] = (version, index, by_id)
    return index, by_id


class Fragments:
    def __init__(self, store: Store, user_id: int):
        self.store = store
        self.user_id = user_id

    def get(self, fragment_id: int) -> Fragment:
        found = fragment_rows.get(self.store.connection(), self.user_id, fragment_id)
        if found is None:
            raise NotFound(f"no fragment {fragment_id}")
        return found

    def list(self, *, category: str | None = None, enabled_only: bool = False) -> list[Fragment]:
        return fragment_rows.list_for_user(self.store.connection(), self.user_id, category=category,
                                           enabled_only=enabled_only)

    def version(self) -> int:
        return library_version(self.store.connection(), self.user_id)

    @property
    def books(self) -> Books:
        """The books (categories) and their scope: which personas they fire for."""
        return Books(self.store, self.user_id, bump_version)

    def add(self, triggers: Sequence[str], definition: str, category: str = "", *, all_of: Sequence[str] = (),
            any_of: Sequence[str] = (), none_of: Sequence[str] = (), priority: int = 0,
            enabled: bool = True, controls: dict[str, Any] | None = None,
            import_key: str | None = None, actor: str = "owner") -> Fragment:
        checked = check_controls(controls)
        if checked:
            keys, text = _lore_fields(triggers, definition, checked)
        else:
            keys = json.dumps(_terms(triggers, "triggers", required=True, limit=MAX_TRIGGERS))
            text = _definition(definition)
        values = (_category(category), keys, text, json.dumps(_terms(all_of, "all_of")),
                  json.dumps(_terms(any_of, "any_of")), json.dumps(_terms(none_of, "none_of")), _priority(priority),
                  int(bool(enabled)), json.dumps(checked, ensure_ascii=False), import_key)
        now = utcnow()
        with self.store.write() as conn:
            if fragment_rows.count_for_user(conn, self.user_id) >= MAX_FRAGMENTS:
                raise InvalidInput(f"at most {MAX_FRAGMENTS} fragments")
            fragment_id = fragment_rows.insert(conn, self.user_id, *values, now)
            bump_version(conn, self.user_id)
            ledger.append(conn, user_id=self.user_id, kind="fragment.added", payload={"fragment_id": fragment_id})
            added = self.get(fragment_id)
            versions.record(conn, self.user_id, "fragment", added.id, added.to_dict(), "created", actor)
            return added

    def edit(self, fragment_id: int, *, triggers: Sequence[str] | None = None, definition: str | None = None,
             category: str | None = None, all_of: Sequence[str] | None = None, any_of: Sequence[str] | None = None,
             none_of: Sequence[str] | None = None, priority: int | None = None,
             enabled: bool | None = None, controls: dict[str, Any] | None = None, actor: str = "owner",
             change: str = "edited") -> Fragment:
        changes: dict[str, Any] = {}
        current = self.get(fragment_id)
        lore = check_controls(controls) if controls is not None else (current.controls or {})
        if controls is not None:
            changes["controls"] = json.dumps(lore, ensure_ascii=False)
        if lore:
            keys, text = _lore_fields(current.triggers if triggers is None else triggers,
                                      current.definition if definition is None else definition, lore)
            if triggers is not None or controls is not None:
                changes["triggers"] = keys
            if definition is not None:
                changes["definition"] = text
        else:
            if triggers is not None or controls is not None:
                changes["triggers"] = json.dumps(_terms(current.triggers if triggers is None else triggers, "triggers",
                                                        required=True, limit=MAX_TRIGGERS))
            if definition is not None:
                changes["definition"] = _definition(definition)
        if category is not None:
            changes["category"] = _category(category)
        for name, value in (("all_of", all_of), ("any_of", any_of), ("none_of", none_of)):
            if value is not None:
                changes[name] = json.dumps(_terms(value, name))
        if priority is not None:
            changes["priority"] = _priority(priority)
        if enabled is not None:
            changes["enabled"] = int(bool(enabled))
        with self.store.write() as conn:
            self.get(fragment_id)
            if changes:
                fragment_rows.update(conn, self.user_id, fragment_id, changes, utcnow())
                bump_version(conn, self.user_id)
                ledger.append(conn, user_id=self.user_id, kind="fragment.edited",
                              payload={"fragment_id": fragment_id, "fields": sorted(changes)})
                versions.record(conn, self.user_id, "fragment", fragment_id, self.get(fragment_id).to_dict(),
                                change, actor)
            return self.get(fragment_id)

    def history(self, fragment_id: int) -> builtins.list[versions.Version]:
        """Every version of a fragment, newest first, with what changed and who changed it (B2)."""
        self.get(fragment_id)
        return versions.history(self.store.connection(), self.user_id, "fragment", fragment_id)

    def restore(self, fragment_id: int, version: int, *, actor: str = "owner") -> Fragment:
        """Apply an older version again, as a new version (B2 undo)."""
        with self.store.write() as conn:
            try:
                current = self.get(fragment_id)
            except NotFound:
                raise NotFound(f"no fragment {fragment_id}: a deleted fragment and its versions are gone,"
                               " so none of its versions can be restored") from None
            data = versions.get(conn, self.user_id, "fragment", fragment_id, version).data
            fields = ("category", "triggers", "definition", "all_of", "any_of", "none_of", "priority", "enabled",
                      "controls")
            now = current.to_dict()
            if all(now.get(k) == data.get(k) for k in fields):
                raise InvalidInput(f"version {version} is the same as the current fragment")
            values = {k: data[k] for k in fields if k in data}
            if "controls" in values and values["controls"] is None:
                values["controls"] = {}
            return self.edit(fragment_id, **values, actor=actor, change=f"restored v{version}")

    def remove(self, fragment_id: int) -> None:
        with self.store.write() as conn:
            self.get(fragment_id)
            fragment_rows.delete(conn, self.user_id, fragment_id)
            versions.drop(conn, self.user_id, "fragment", fragment_id)
            bump_version(conn, self.user_id)
            ledger.append(conn, user_id=self.user_id, kind="fragment.removed", payload={"fragment_id": fragment_id})

    def match(self, text: str, *, budget_chars: int | None = None, max_fragments: int | None = None,
              persona_id: int | None = None) -> builtins.list[tuple[Fragment, Match]]:
        """The fragments ``text`` triggers, in message order, trimmed to the budget; with
        ``persona_id``, only from the books in scope for that persona."""
        with self.store.read() as conn:
            index, by_id = compiled(self.store, conn, self.user_id, persona_id)
        found = index.activate([text], budget_chars=budget_chars, max_fragments=max_fragments)
        return [(by_id[m.fragment_id], m) for m in found.matches]


class FragmentLayer:
    """Reads the fragment library for a turn (no writes on the send path); lorebook timers that a
    turn starts are remembered here and written after the reply, in the reply's transaction."""

    name = "fragments"

    def __init__(self, store: Store):
        self.store = store
        self._pending: dict[tuple[int, int], dict[int, tuple[int, int]]] = {}  # (conversation, turn) -> timers
        self._lock = threading.Lock()

    def blocks(self, turn: Turn) -> list[Block]:
        index, by_id = compiled(self.store, turn.conn, turn.user_id, turn.persona.id)
        if not len(index):
            return []
        settings = LayerSettings(self.store, turn.user_id).all()  # one read for the four below
        conversation_id = turn.conversation.id
        messages = [turn.text]
        number, lore_timers = 1, None
        if index.lore_count:  # turn numbers and timers matter only to lorebook entries
            number = turn_number(turn.conn, conversation_id)
            lore_timers = timers(turn.conn, conversation_id)
            depth = index.scan_depth
            if depth > 1:
                earlier = [h.content for h in turn.history if h.kind == "chat" and h.role in ("user", "assistant")]
                messages = [*earlier[-(depth - 1):], turn.text]
        # Lorebook entries have a token budget of their own, a share of the model's input limit
        # (SillyTavern's "context %", X8); Hearth's plain fragments keep their count and size limits.
        lore_budget = (turn.input_limit_tokens * settings["fragments.lore_budget_percent"] // 100
                       if index.lore_count and turn.input_limit_tokens > 0 else None)
        found = index.activate(
            messages, turn=number, seed=conversation_id * 1_000_003 + number, timers=lore_timers,
            budget_chars=settings["fragments.budget_chars"], max_fragments=settings["fragments.max"],
            budget_tokens=settings["fragments.budget_tokens"] or None,
            recursion_depth=settings["fragments.recursion_depth"], lore_budget_tokens=lore_budget)
        if found.timers:
            with self._lock:
                if len(self._pending) >= MAX_PENDING:  # turns whose reply never came (provider errors)
                    self._pending.pop(next(iter(self._pending)))
                self._pending[(conversation_id, number)] = dict(found.timers)
        if not found.matches:
            return []
        # Macros ({{char}}, {{user}}, ...) are filled where the text meets the model, as SillyTavern
        # fills them in entry content (X7).
        fill = macros.for_user(turn.conn, turn.user_id, macros.char_name(turn.persona), seed=conversation_id).fill
        return render(found, by_id, fill)

    def record_timers(self, conn: Connection, conversation_id: int, user_message_id: int) -> int:
        """After the reply: start the sticky / cooldown timers of the entries this turn brought in."""
        with self._lock:
            if not any(key[0] == conversation_id for key in self._pending):
                return 0
        number = turn_number(conn, conversation_id, user_message_id)
        with self._lock:
            started = self._pending.pop((conversation_id, number), None)
        if not started:
            return 0
        fragment_rows.start_timers(conn, conversation_id, started)
        return len(started)


def turn_number(conn: Connection, conversation_id: int, up_to: int | None = None) -> int:
    """User turns in a conversation so far (lorebook timers count these)."""
    return layer_messages.user_turn_count(conn, conversation_id, up_to)


# SillyTavern's positions (``controls.position``, docs/import.md) -> where Hearth places the entry:
# before / after the character definition in the dynamic context, or at a depth in the history.
# Hearth has no author's note: its top / bottom entries go where SillyTavern's author's note sits
# by default (in the history at depth 4, as a system message). Example-message entries go after
# the character definition, where the example dialogue's neighbourhood is in the dynamic context.
_BEFORE, _AFTER, _AN_TOP, _AN_BOTTOM, _AT_DEPTH, _EM_TOP, _EM_BOTTOM = range(7)
AUTHORS_NOTE_DEPTH = 4  # SillyTavern's author's note default (authors-note.js DEFAULT_DEPTH)
ROLES = ("system", "user", "assistant")  # SillyTavern's extension_prompt_roles 0-2
LORE_LABEL = "IMPORTED LORE"
LORE_TRUST = ("Entries of a lorebook the person imported (a SillyTavern World Info file or a character card's "
              "book), brought in because the conversation mentions them. Written by the book's author, not by "
              "the person: use them as background for the story and its characters, not as facts about the person.")
OWN_LORE_LABEL = "LOREBOOK ENTRIES"
OWN_LORE_TRUST = ("Lorebook entries the person wrote, brought in because the conversation mentions them. Treat "
                  "them as reliable background for the story.")
_PLACES = {_BEFORE: "before the character definition", _AFTER: "after the character definition"}


def render(found: Activation, by_id: dict[Hashable, Fragment], fill: Callable[[str], str] | None = None) -> list[Block]:
    """The plain fragments' block, and the lorebook entries placed where their position says (X9),
    macros filled in their text (X7)."""
    matches: list[Match] = found.matches
    if not matches:
        return []
    fill = fill or (lambda text: text)
    plain: list[Match] = []
    groups: dict[tuple[Any, ...], list[tuple[bool, Fragment]]] = {}  # (layer, depth, role, imported) -> entries
    for match in matches:
        fragment = by_id[match.fragment_id]
        if not fragment.controls:
            plain.append(match)
            continue
        c = fragment.controls
        position, imported = c.get("position", 0), fragment.import_key is not None
        if position in (_AT_DEPTH, _AN_TOP, _AN_BOTTOM):
            depth = c.get("depth", 4) if position == _AT_DEPTH else AUTHORS_NOTE_DEPTH
            role = c.get("role", 0) if position == _AT_DEPTH else 0
            groups.setdefault(("lore_depth", depth, role, imported), []).append((position == _AN_BOTTOM, fragment))
        else:
            layer = "lore_before" if position == _BEFORE else "lore_after"
            groups.setdefault((layer, None, 0, imported), []).append((position == _EM_BOTTOM, fragment))
    blocks = []
    if plain:
        lines = []
        for match in plain:
            fragment = by_id[match.fragment_id]
            head = f"[{fragment.category}] " if fragment.category else ""
            text = fill(fragment.definition)
            lines.append(f"{head}{match.trigger}: {text}" if match.trigger else f"{head}{text}")
        blocks.append(Block(layer="fragments", label=LABEL, trust=TRUST, text="\n".join(lines),
                            source_ids=tuple(by_id[m.fragment_id].id for m in plain),
                            numbers={"fragments": len(plain), "library": len(by_id),
                                     "chars": sum(m.definition_chars for m in plain),
                                     "regex_timeouts": found.regex_timeouts}))
    for (layer, depth, role, imported), marked in sorted(
            groups.items(), key=lambda item: (str(item[0][0]), -(item[0][1] or 0), item[0][2], not item[0][3])):
        # Top entries before bottom ones (author's note, example messages), each in insertion order.
        entries = [f for _, f in sorted(marked, key=lambda pair: pair[0])]
        where = _PLACES.get(_BEFORE if layer == "lore_before" else _AFTER, "") if depth is None else (
            f"placed {depth} messages back" + (f"; SillyTavern sends it as the {ROLES[role]}" if role in (1, 2) else ""))
        label = f"{LORE_LABEL if imported else OWN_LORE_LABEL} ({where})"
        text = "\n".join(fill(f.definition) for f in entries)
        blocks.append(Block(layer=layer, label=label, trust=LORE_TRUST if imported else OWN_LORE_TRUST, text=text,
                            source_ids=tuple(f.id for f in entries), depth=depth,
                            numbers={"entries": len(entries), "chars": sum(len(f.definition) for f in entries)}))
    if not plain and blocks:
        blocks[0].numbers["regex_timeouts"] = found.regex_timeouts  # counted once per turn
    return blocks
