"""Household status (HS1, HS2): present-tense practical facts, second in the dynamic context.

A status field has a name ("Children", "Fleur"), optional options for toggles ("with me", "with
their dad") and optional aliases used when spotting it in conversation ("kids"). Its value is set
by a toggle, the CLI or the API; a new value retires the old one (``valid_to``) instead of
overwriting it, so the history of what was true when stays readable.

State-change detection runs as a background job after replies: a helper reads the person's new
messages and may notice a change; the change becomes a ``status_change`` proposal in the review
queue with its reason and the quoted words that suggested it, and nothing changes until the owner
approves it (or has turned on auto-approve for status changes, G4).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from hearth.errors import Conflict, InvalidInput, NotFound
from hearth.memory.helpers import skips
from hearth.memory.helpers.base import HelperOutputError, StatusField, TurnText
from hearth.prompt.dynamic import Block, Turn
from hearth.records import ledger, versions
from hearth.records.temporal import check_mode, parse_moment
from hearth.store import Connection, Row, Store, inserted_id, utcnow
from hearth.validation import check_text

if TYPE_CHECKING:
    from hearth.memory.helpers.base import Helper
    from hearth.records.context import Context
    from hearth.records.conversations import Conversations

JOB_KIND = "status.detect"
MAX_NAME = 60
MAX_VALUE = 200
MAX_OPTIONS = 20
MAX_FIELDS = 50
DETECT_MESSAGES = 20  # newest unread user messages one detection looks at

LABEL = "HOUSEHOLD STATUS (CURRENT)"
TRUST = ("Current household status, set by the person. It is true right now and overrides older memory "
         "for practical suggestions. Assume nothing about where anyone is or what is happening at home "
         "beyond what this block says.")


# The HTTP API answers with StatusFieldInfo and StatusValue as they are (one definition per record).
@dataclass(frozen=True)
class StatusFieldInfo:
    id: int
    name: str
    options: tuple[str, ...]
    aliases: tuple[str, ...]
    position: int
    value: str | None
    valid_from: str | None
    source: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "options": list(self.options), "aliases": list(self.aliases),
                "position": self.position, "value": self.value, "valid_from": self.valid_from,
                "source": self.source}


@dataclass(frozen=True)
class StatusValue:
    id: int
    field_id: int
    field: str
    value: str
    source: str
    proposal_id: int | None
    valid_from: str
    valid_to: str | None
    recorded_at: str | None = None
    retired_at: str | None = None
    valid_until: str | None = None  # valid_to under the name memories use (B1)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _clean(text: Any, what: str, limit: int) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(f"{what} must be non-empty text")
    check_text(text, what)
    text = " ".join(text.split())
    if len(text) > limit:
        raise InvalidInput(f"{what} may be at most {limit} characters")
    return text


def _clean_list(items: Sequence[str] | None, what: str) -> tuple[str, ...]:
    if items is None:
        return ()
    if isinstance(items, str):
        raise InvalidInput(f"{what} must be a list")
    out: list[str] = []
    for item in items:
        value = _clean(item, what[:-1] if what.endswith("s") else what, MAX_VALUE)
        if value.casefold() not in (o.casefold() for o in out):
            out.append(value)
    if len(out) > MAX_OPTIONS:
        raise InvalidInput(f"at most {MAX_OPTIONS} {what}")
    return tuple(out)


_FIELD_SQL = (
    "SELECT f.id, f.name, f.options, f.aliases, f.position, v.value, v.valid_from, v.source"
    " FROM status_fields f LEFT JOIN status_values v ON v.field_id = f.id AND v.valid_to IS NULL"
    " WHERE f.user_id = ? AND f.retired_at IS NULL"
)


def _field_from_row(row: Row) -> StatusFieldInfo:
    return StatusFieldInfo(row[0], row[1], tuple(json.loads(row[2])), tuple(json.loads(row[3])), row[4],
                           row[5], row[6], row[7])


def fields(conn: Connection, user_id: int) -> list[StatusFieldInfo]:
    return [_field_from_row(r) for r in conn.execute(_FIELD_SQL + " ORDER BY f.position, f.id", (user_id,))]


def has_fields(conn: Connection, user_id: int) -> bool:
    return conn.execute("SELECT 1 FROM status_fields WHERE user_id = ? AND retired_at IS NULL LIMIT 1",
                        (user_id,)).fetchone() is not None


class Household:
    def __init__(self, store: Store, user_id: int, conversations: "Conversations | None" = None):
        self.store = store
        self.user_id = user_id
        self.conversations = conversations

    # -- fields ------------------------------------------------------------------------------------
    def fields(self) -> list[StatusFieldInfo]:
        return fields(self.store.connection(), self.user_id)

    def field(self, key: int | str) -> StatusFieldInfo:
        """A field by id, or by name (case-insensitive)."""
        conn = self.store.connection()
        if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
            row = conn.execute(_FIELD_SQL + " AND f.id = ?", (self.user_id, int(key))).fetchone()
        else:
            row = conn.execute(_FIELD_SQL + " AND lower(f.name) = lower(?)", (self.user_id, str(key).strip())).fetchone()
        if row is None:
            raise NotFound(f"no status field {key}")
        return _field_from_row(row)

    def add_field(self, name: str, options: Sequence[str] | None = None, aliases: Sequence[str] | None = None,
                  value: str | None = None) -> StatusFieldInfo:
        name = _clean(name, "a field name", MAX_NAME)
        options_, aliases_ = _clean_list(options, "options"), _clean_list(aliases, "aliases")
        with self.store.write() as conn:
            if conn.execute("SELECT 1 FROM status_fields WHERE user_id = ? AND retired_at IS NULL"
                            " AND lower(name) = lower(?)", (self.user_id, name)).fetchone():
                raise Conflict(f"a status field named {name!r} already exists")
            count, position = conn.execute(
                "SELECT count(*), coalesce(max(position), 0) + 1 FROM status_fields"
                " WHERE user_id = ? AND retired_at IS NULL", (self.user_id,)).fetchone()
            if count >= MAX_FIELDS:
                raise InvalidInput(f"at most {MAX_FIELDS} status fields")
            cur = conn.execute(
                "INSERT INTO status_fields (user_id, name, options, aliases, position, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (self.user_id, name, json.dumps(options_), json.dumps(aliases_), position, utcnow()))
            field_id = inserted_id(cur)
            ledger.append(conn, user_id=self.user_id, kind="status.field_added", payload={"field_id": field_id})
            versions.record(conn, self.user_id, "status_field", field_id,
                            {"name": name, "options": list(options_), "aliases": list(aliases_)}, "created")
            if value is not None:
                self.set(field_id, value)
            return self.field(field_id)

    def edit_field(self, key: int | str, *, name: str | None = None, options: Sequence[str] | None = None,
                   aliases: Sequence[str] | None = None, change: str = "edited") -> StatusFieldInfo:
        with self.store.write() as conn:
            current = self.field(key)
            new_name = _clean(name, "a field name", MAX_NAME) if name is not None else current.name
            if new_name.casefold() != current.name.casefold() and conn.execute(
                    "SELECT 1 FROM status_fields WHERE user_id = ? AND retired_at IS NULL AND lower(name) = lower(?)",
                    (self.user_id, new_name)).fetchone():
                raise Conflict(f"a status field named {new_name!r} already exists")
            conn.execute(
                "UPDATE status_fields SET name = ?, options = ?, aliases = ? WHERE id = ?",
                (new_name, json.dumps(_clean_list(options, "options") if options is not None else current.options),
                 json.dumps(_clean_list(aliases, "aliases") if aliases is not None else current.aliases), current.id))
            after = self.field(current.id)
            if (after.name, after.options, after.aliases) != (current.name, current.options, current.aliases):
                versions.record(conn, self.user_id, "status_field", current.id,
                                {"name": after.name, "options": list(after.options), "aliases": list(after.aliases)},
                                change)
            return after

    def field_history(self, key: int | str) -> list[versions.Version]:
        """Versions of a field's definition (name, options, aliases), newest first (B2). Its values
        have their own history (``history``)."""
        field_id = self.field(key).id
        return versions.history(self.store.connection(), self.user_id, "status_field", field_id)

    def _live(self, key: int | str) -> StatusFieldInfo:
        try:
            return self.field(key)
        except NotFound:
            raise NotFound(f"no status field {key}: a removed field's versions cannot be restored") from None

    def restore_field(self, key: int | str, version: int) -> StatusFieldInfo:
        """Apply an older definition of a field again, as a new version (B2)."""
        with self.store.write() as conn:
            current = self._live(key)
            data = versions.get(conn, self.user_id, "status_field", current.id, version).data
            if (data["name"], tuple(data["options"]), tuple(data["aliases"])) == (
                    current.name, current.options, current.aliases):
                raise InvalidInput(f"version {version} is the same as the current field")
            return self.edit_field(current.id, name=data["name"], options=data["options"], aliases=data["aliases"],
                                   change=f"restored v{version}")

    def restore_value(self, key: int | str, value_id: int) -> StatusFieldInfo:
        """Make an earlier value of a field current again, as a new value from now (B2 undo)."""
        with self.store.write() as conn:
            current = self._live(key)
            row = conn.execute("SELECT value FROM status_values WHERE id = ? AND field_id = ? AND user_id = ?",
                               (value_id, current.id, self.user_id)).fetchone()
            if row is None:
                raise NotFound(f"status field {current.name} has no value {value_id}")
            if row[0] == current.value:
                raise InvalidInput(f"{current.name} is already {row[0]!r}")
            return self.set(current.id, row[0])

    def remove_field(self, key: int | str) -> None:
        """Retire a field: it leaves the prompt, its history stays."""
        now = utcnow()
        with self.store.write() as conn:
            current = self.field(key)
            conn.execute("UPDATE status_values SET valid_to = ? WHERE field_id = ? AND valid_to IS NULL", (now, current.id))
            conn.execute("UPDATE status_fields SET retired_at = ? WHERE id = ?", (now, current.id))
            ledger.append(conn, user_id=self.user_id, kind="status.field_removed", payload={"field_id": current.id})

    # -- values ------------------------------------------------------------------------------------
    def set(self, key: int | str, value: str | None, *, source: str = "manual", proposal_id: int | None = None,
            create: bool = False, valid_from: Any = None, correction: bool = False) -> StatusFieldInfo:
        """Set a field's current value (``None`` clears it). The old value is retired, never overwritten.

        Bi-temporal (B1): the old value stays valid until ``valid_from`` (default now, never in the
        future) and the new value is valid from then. ``correction=True`` fixes a wrongly entered
        value instead: the wrong row is retired (Hearth no longer holds it) and the new one takes
        over its valid-from time, as if it had always said so.
        """
        if source not in ("manual", "approved", "auto"):
            raise InvalidInput("unknown status source")
        value = _clean(value, "a status value", MAX_VALUE) if value is not None else None
        now = utcnow()
        with self.store.write() as conn:
            try:
                current = self.field(key)
            except NotFound:
                if not create or isinstance(key, int):
                    raise
                current = self.add_field(str(key))
            if value is not None and current.options and value.casefold() not in (o.casefold() for o in current.options):
                raise InvalidInput(f"{current.name} must be one of: {', '.join(current.options)}")
            if value is not None and current.options:
                value = next(o for o in current.options if o.casefold() == value.casefold())
            if correction:
                if current.value is None or value is None:
                    raise InvalidInput("a correction replaces a current value with another value")
                if valid_from is not None:
                    raise InvalidInput("a correction keeps the corrected value's valid-from time")
                if value == current.value:
                    raise InvalidInput("the corrected value is identical to the current one")
                start = current.valid_from or now
                # valid_to closes the row for the one-current-value index; retired_at says it was wrong.
                conn.execute("UPDATE status_values SET valid_to = ?, superseded_at = ?, retired_at = ?"
                             " WHERE field_id = ? AND valid_to IS NULL", (now, now, now, current.id))
            else:
                if value == current.value:
                    return current
                start = now if valid_from is None else parse_moment(valid_from, "valid_from", end_of_day=False)
                if current.valid_from and start < current.valid_from:
                    raise InvalidInput("a new value cannot become true before the value it replaces")
                conn.execute("UPDATE status_values SET valid_to = ?, superseded_at = ?"
                             " WHERE field_id = ? AND valid_to IS NULL", (start, now, current.id))
            if value is not None:
                conn.execute(
                    "INSERT INTO status_values (user_id, field_id, value, source, proposal_id, valid_from, recorded_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)", (self.user_id, current.id, value, source, proposal_id, start, now))
            ledger.append(conn, user_id=self.user_id, kind="status.changed",
                          payload={"field_id": current.id, "source": source, "cleared": value is None,
                                   "correction": correction})
            return self.field(current.id)

    def history(self, key: int | str | None = None, limit: int = 200) -> list[StatusValue]:
        """Every value a field (or every field) has had, newest first, retired ones included."""
        sql = ("SELECT v.id, v.field_id, f.name, v.value, v.source, v.proposal_id, v.valid_from, v.valid_to,"
               " v.recorded_at, v.retired_at, v.valid_to FROM status_values v JOIN status_fields f ON f.id = v.field_id"
               " WHERE v.user_id = ?")
        args: list[Any] = [self.user_id]
        if key is not None:
            sql += " AND v.field_id = ?"
            args.append(self.field(key).id)
        sql += " ORDER BY v.recorded_at DESC, v.id DESC LIMIT ?"
        args.append(limit)
        return [StatusValue(*r) for r in self.store.connection().execute(sql, args)]

    def as_of(self, when: Any, mode: str = "valid") -> dict[str, str]:
        """What the status said at a moment: what was true then (``valid``, today's knowledge)
        or what Hearth knew then (``known``: corrections and back-dated changes made later do
        not count). Takes an ISO date or date-time; not in the future."""
        mode = check_mode(mode)
        moment = parse_moment(when, "as-of date")
        if mode == "valid":
            cond = "v.retired_at IS NULL AND v.valid_from <= :t AND (v.valid_to IS NULL OR v.valid_to > :t)"
        else:
            cond = ("v.recorded_at <= :t AND (v.retired_at IS NULL OR v.retired_at > :t) AND v.valid_from <= :t"
                    " AND (v.valid_to IS NULL OR v.superseded_at > :t OR v.valid_to > :t)")
        rows = self.store.connection().execute(
            "SELECT f.name, v.value FROM status_values v JOIN status_fields f ON f.id = v.field_id"
            f" WHERE v.user_id = :u AND {cond} ORDER BY f.position, f.id", {"u": self.user_id, "t": moment}).fetchall()
        return {r[0]: r[1] for r in rows}


def render(items: list[StatusFieldInfo]) -> str:
    return "\n".join(f"{f.name}: {f.value}" for f in items if f.value is not None)


class HouseholdLayer:
    name = "household"

    def blocks(self, turn: Turn) -> list[Block]:
        items = [f for f in fields(turn.conn, turn.user_id) if f.value is not None]
        if not items:
            return []
        return [Block(layer=self.name, label=LABEL, trust=TRUST, text=render(items),
                      source_ids=tuple(f.id for f in items), numbers={"fields": len(items)})]


def detect_job(ctx: "Context", payload: dict[str, Any], helper: "Helper") -> None:
    """Read the person's new messages in a conversation and propose status changes (HS2)."""
    from hearth.ops.jobs import cursor, set_cursor

    conversation_id = int(payload["conversation_id"])
    ctx.conversations.get(conversation_id)
    store = ctx.store
    with store.read() as conn:
        since = cursor(conn, conversation_id, JOB_KIND)
        rows = conn.execute(
            "SELECT id, role, content FROM messages WHERE conversation_id = ? AND id > ? AND kind = 'chat'"
            " AND role = 'user' ORDER BY id DESC LIMIT ?", (conversation_id, since, DETECT_MESSAGES)).fetchall()
        current = fields(conn, ctx.user_id)
    if not rows:
        return
    turns = [TurnText(r["role"], r["content"], r["id"]) for r in reversed(rows)]
    status_fields = [StatusField(f.name, f.value, f.options, f.aliases) for f in current]
    skipped: HelperOutputError | None = None
    try:
        changes = helper.detect_state_change(status_fields, turns) if status_fields else []  # no transaction held
    except HelperOutputError as exc:
        changes, skipped = [], exc  # skipped (E13): these messages are not read again
    by_name = {f.name: f for f in current}
    with store.write() as conn:
        if skipped is not None:
            skips.record(conn, ctx.user_id, "household", skipped, conversation_id=conversation_id)
        for change in changes:
            target = by_name.get(change.field)
            if target is None:
                continue
            ctx.review().propose(
                "status_change",
                {"field_id": target.id, "field": target.name, "from": target.value, "to": change.value},
                change.reason, evidence=change.evidence, source=change.source, conversation_id=conversation_id)
        set_cursor(conn, ctx.user_id, conversation_id, JOB_KIND, turns[-1].message_id)
