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

from typing import TYPE_CHECKING, Any, Sequence

from hearth.errors import Conflict, InvalidInput, NotFound
from hearth.memory.helpers import skips
from hearth.memory.helpers.base import HelperOutputError, StatusField, TurnText
from hearth.prompt.dynamic import Block, Turn
from hearth.records import ledger, versions
from hearth.records.temporal import check_mode, parse_moment
from hearth.store import Connection, Store, utcnow
from hearth.store.queries import household_status as queries
from hearth.store.queries.household_status import StatusFieldInfo, StatusValue
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


def fields(conn: Connection, user_id: int) -> list[StatusFieldInfo]:
    return queries.fields(conn, user_id)


def has_fields(conn: Connection, user_id: int) -> bool:
    return queries.has_fields(conn, user_id)


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
            found = queries.field_by_id(conn, self.user_id, int(key))
        else:
            found = queries.field_by_name(conn, self.user_id, str(key).strip())
        if found is None:
            raise NotFound(f"no status field {key}")
        return found

    def add_field(self, name: str, options: Sequence[str] | None = None, aliases: Sequence[str] | None = None,
                  value: str | None = None) -> StatusFieldInfo:
        name = _clean(name, "a field name", MAX_NAME)
        options_, aliases_ = _clean_list(options, "options"), _clean_list(aliases, "aliases")
        with self.store.write() as conn:
            if queries.name_taken(conn, self.user_id, name):
                raise Conflict(f"a status field named {name!r} already exists")
            count, position = queries.count_and_next_position(conn, self.user_id)
            if count >= MAX_FIELDS:
                raise InvalidInput(f"at most {MAX_FIELDS} status fields")
            field_id = queries.insert_field(conn, self.user_id, name, options_, aliases_, position, utcnow())
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
            if new_name.casefold() != current.name.casefold() and queries.name_taken(conn, self.user_id, new_name):
                raise Conflict(f"a status field named {new_name!r} already exists")
            queries.update_field(conn, current.id, new_name,
                                 _clean_list(options, "options") if options is not None else current.options,
                                 _clean_list(aliases, "aliases") if aliases is not None else current.aliases)
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
            earlier = queries.value_of(conn, self.user_id, current.id, value_id)
            if earlier is None:
                raise NotFound(f"status field {current.name} has no value {value_id}")
            if earlier == current.value:
                raise InvalidInput(f"{current.name} is already {earlier!r}")
            return self.set(current.id, earlier)

    def remove_field(self, key: int | str) -> None:
        """Retire a field: it leaves the prompt, its history stays."""
        now = utcnow()
        with self.store.write() as conn:
            current = self.field(key)
            queries.retire_field(conn, current.id, now)
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
                queries.retire_current_value(conn, current.id, now)
            else:
                if value == current.value:
                    return current
                start = now if valid_from is None else parse_moment(valid_from, "valid_from", end_of_day=False)
                if current.valid_from and start < current.valid_from:
                    raise InvalidInput("a new value cannot become true before the value it replaces")
                queries.supersede_current_value(conn, current.id, start, now)
            if value is not None:
                queries.insert_value(conn, self.user_id, current.id, value, source, proposal_id, start, now)
            ledger.append(conn, user_id=self.user_id, kind="status.changed",
                          payload={"field_id": current.id, "source": source, "cleared": value is None,
                                   "correction": correction})
            return self.field(current.id)

    def history(self, key: int | str | None = None, limit: int = 200) -> list[StatusValue]:
        """Every value a field (or every field) has had, newest first, retired ones included."""
        field_id = self.field(key).id if key is not None else None
        return queries.history(self.store.connection(), self.user_id, limit, field_id=field_id)

    def as_of(self, when: Any, mode: str = "valid") -> dict[str, str]:
        """What the status said at a moment: what was true then (``valid``, today's knowledge)
        or what Hearth knew then (``known``: corrections and back-dated changes made later do
        not count). Takes an ISO date or date-time; not in the future."""
        mode = check_mode(mode)
        moment = parse_moment(when, "as-of date")
        return queries.as_of(self.store.connection(), self.user_id, moment, mode)


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
        rows = queries.user_turns_after(conn, conversation_id, since, DETECT_MESSAGES)
        current = fields(conn, ctx.user_id)
    if not rows:
        return
    turns = [TurnText(role, content, message_id) for message_id, role, content in reversed(rows)]
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
