"""Autonomous activations (E11): the companion reaching out on its own, off unless the owner asks.

Kinds, each per persona:

- ``morning``: a message at a local time, on a standard recurrence rule (RFC 5545 RRULE, read by
  python-dateutil; no date arithmetic of our own);
- ``reflection``: a short note once the person has been quiet for ``idle_minutes``;
- ``checkins``: the persona notices dates and promises the person mentions ("my exam is on
  Friday", "remind me to call Mum tomorrow") and *proposes* a check-in in the review queue (G4);
- ``checkin``: one approved check-in, fired once.

A durable ``activations.tick`` job per user (it queues its own successor, so the schedule lives in
the database and survives restarts) fires what is due. Firing inserts the run under a unique
(activation, due time) key and advances the schedule in the same transaction, so a crash at any
point never fires an occurrence twice. Each fired run respects the user's quiet hours and per-day
limit, and "stop check-ins" said in any channel pauses everything until "start check-ins". The
message itself is written by an ``activation.run`` job through the ordinary send path (an inner
turn: the instruction is never saved as the person's words), saved with channel ``inner`` and
delivered on the activation's channel (the web thread, SMS or email).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from hearth.errors import InvalidInput, NotFound
from hearth.ops import jobs
from hearth.records import ledger
from hearth.store import Connection, Store, state, utcnow
from hearth.store.queries import activations as queries
from hearth.store.queries import personas
from hearth.store.queries.activations import Activation
from hearth.store.queries.outreach_lookups import last_user_turn_at, user_turns_after

if TYPE_CHECKING:
    from hearth.memory.helpers.base import Helper
    from hearth.records.context import Context

log = logging.getLogger(__name__)

KINDS = ("morning", "reflection", "checkins", "checkin")
CHECKIN_KIND = "checkin"  # also the review-queue kind of a proposed check-in
DELIVERY = ("web", "sms", "email")
TICK_JOB = "activations.tick"
RUN_JOB = "activation.run"
TICK_SECONDS = 60.0
# An occurrence missed by more than this (the server was down) is recorded as missed, not sent late.
GRACE = timedelta(hours=2)
_STOP = re.compile(r"^\s*(stop|pause)\s+check[\s-]?ins?\s*[.!]*\s*$", re.IGNORECASE)
_START = re.compile(r"^\s*(start|resume)\s+check[\s-]?ins?\s*[.!]*\s*$", re.IGNORECASE)
_CLOCK = re.compile(r"^([01]?[0-9]|2[0-3]):([0-5][0-9])$")

INSTRUCTIONS = {
    "morning": "It is morning where the person is. Write them a short, warm good-morning message in your own "
               "voice. Do not ask for anything; one or two sentences.",
    "reflection": "The person has been away for a while. Write a brief, gentle note that picks up a thread "
                  "from your recent conversation, without pressure to reply.",
    "checkin": "Earlier the person mentioned this, and agreed you would check in about it: {note}. "
               "Check in about it briefly and kindly.",
}


@dataclass(frozen=True)
class Prefs:
    timezone: str = "UTC"
    quiet_start: str = "22:00"
    quiet_end: str = "08:00"
    daily_limit: int = 3
    stopped: bool = False

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def quiet(self, moment: datetime) -> bool:
        local = moment.astimezone(self.zone).time()
        start, end = _clock(self.quiet_start), _clock(self.quiet_end)
        if start == end:
            return False
        return start <= local < end if start < end else (local >= start or local < end)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _clock(text: str) -> time:
    match = _CLOCK.match(text or "")
    if not match:
        raise InvalidInput(f"a time of day must look like 08:30, got {text!r}")
    return time(int(match.group(1)), int(match.group(2)))


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInput(f"unknown time zone {name!r}") from None


def _stamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_stamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def parse_when(value: Any) -> datetime:
    """An aware moment from an ISO 8601 string (a check-in's time, possibly edited by the owner)."""
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput("a time must be ISO 8601, e.g. 2026-12-04T18:00:00Z") from None
    if moment.tzinfo is None:
        raise InvalidInput("a time must carry its offset, e.g. 2026-12-04T18:00:00Z")
    return moment


def _recurrence(rule: str, start: datetime):
    """The rule as a dateutil rrule from ``start`` (aware); finer than daily is refused."""
    from dateutil.rrule import DAILY, rrulestr

    try:
        recurrence = rrulestr(rule, dtstart=start.replace(second=0, microsecond=0))
    except (ValueError, TypeError, KeyError, IndexError):
        raise InvalidInput("the schedule is not a valid RRULE, e.g. FREQ=DAILY;BYHOUR=8;BYMINUTE=0") from None
    if recurrence._freq > DAILY:  # noqa: SLF001 (dateutil keeps the frequency private)
        raise InvalidInput("activations run at most daily; use FREQ=DAILY, WEEKLY, MONTHLY or YEARLY")
    return recurrence


def next_occurrence(rule: str, zone: ZoneInfo, created_at: datetime, after: datetime) -> datetime | None:
    """The first occurrence strictly after ``after`` in the user's zone, as UTC; None when done."""
    recurrence = _recurrence(rule, created_at.astimezone(zone))
    upcoming = recurrence.after(after.astimezone(zone))
    return upcoming.astimezone(timezone.utc) if upcoming else None


def daily_rule(at: str) -> str:
    clock = _clock(at)
    return f"FREQ=DAILY;BYHOUR={clock.hour};BYMINUTE={clock.minute};BYSECOND=0"


class Activations:
    """A user's activations, preferences and run history."""

    def __init__(self, store: Store, user_id: int):
        self.store = store
        self.user_id = user_id

    # -- preferences ---------------------------------------------------------------------------
    def prefs(self, conn: Connection | None = None) -> Prefs:
        row = queries.prefs(conn or self.store.connection(), self.user_id)
        return Prefs(*row) if row else Prefs()

    def set_prefs(self, *, timezone_name: str | None = None, quiet_start: str | None = None,
                  quiet_end: str | None = None, daily_limit: int | None = None) -> Prefs:
        current = self.prefs()
        new = Prefs(timezone_name or current.timezone, quiet_start or current.quiet_start,
                    quiet_end or current.quiet_end, current.daily_limit if daily_limit is None else daily_limit,
                    current.stopped)
        _zone(new.timezone)
        _clock(new.quiet_start), _clock(new.quiet_end)
        if not isinstance(new.daily_limit, int) or not 0 <= new.daily_limit <= 24:
            raise InvalidInput("daily_limit must be between 0 and 24")
        with self.store.write() as conn:
            self._save_prefs(conn, new)
            if new.timezone != current.timezone:  # local times move with the zone
                for activation in self.list():
                    self._reschedule(conn, activation, new, datetime.now(timezone.utc))
        return self.prefs()

    def _save_prefs(self, conn: Connection, prefs: Prefs) -> None:
        queries.save_prefs(conn, self.user_id, prefs.timezone, prefs.quiet_start, prefs.quiet_end, prefs.daily_limit,
                           prefs.stopped)

    def _set_stopped(self, conn: Connection, stopped: bool, channel: str) -> None:
        prefs = self.prefs(conn)
        if prefs.stopped != stopped:
            self._save_prefs(conn, Prefs(prefs.timezone, prefs.quiet_start, prefs.quiet_end, prefs.daily_limit, stopped))
            ledger.append(conn, user_id=self.user_id, kind="activations.stopped" if stopped else "activations.started",
                          channel=channel, payload={})

    # -- activations -----------------------------------------------------------------------------
    def add(self, persona_id: int, kind: str, *, at: str | None = None, rule: str | None = None,
            idle_minutes: int | None = None, note: str = "", channel: str = "web",
            first_at: datetime | None = None) -> Activation:
        """Create an activation. ``morning`` takes ``at`` (local "08:00") or an RRULE ``rule``;
        ``reflection`` takes ``idle_minutes``; ``checkin`` takes ``first_at`` (when, once)."""
        if kind not in KINDS:
            raise InvalidInput(f"kind must be one of {', '.join(KINDS)}")
        if channel not in DELIVERY:
            raise InvalidInput(f"channel must be one of {', '.join(DELIVERY)}")
        if not isinstance(note, str) or len(note) > 500 or "\x00" in note:
            raise InvalidInput("a note is text of at most 500 characters")
        now = datetime.now(timezone.utc)
        if kind == "morning":
            rule = rule or daily_rule(at or "08:00")
        elif kind == "checkin":
            if first_at is None:
                raise InvalidInput("a check-in needs the time it is due")
            rule = "FREQ=DAILY;COUNT=1"
        else:
            rule = None
        if kind == "reflection":
            if not isinstance(idle_minutes, int) or not 30 <= idle_minutes <= 60 * 24 * 14:
                raise InvalidInput("idle_minutes must be between 30 and 20160 (two weeks)")
        else:
            idle_minutes = None
        with self.store.write() as conn:
            if not personas.exists(conn, self.user_id, persona_id):
                raise NotFound(f"no persona {persona_id}")
            start = first_at or now
            next_at = None
            if rule:
                zone = self.prefs(conn).zone
                # The first occurrence may be the start itself (a check-in's own time).
                next_at = next_occurrence(rule, zone, start, start - timedelta(seconds=1))
            activation_id = queries.insert(conn, self.user_id, persona_id, kind, rule, idle_minutes, note, channel,
                                           _stamp(next_at) if next_at else None, _stamp(start), utcnow())
            ledger.append(conn, user_id=self.user_id, kind="activation.created", channel="inner",
                          payload={"activation_id": activation_id, "kind": kind})
            schedule_tick(conn, self.user_id)
            return self.get(activation_id)

    def get(self, activation_id: int) -> Activation:
        activation = queries.get(self.store.connection(), activation_id, self.user_id)
        if activation is None:
            raise NotFound(f"no activation {activation_id}")
        return activation

    def set_enabled(self, activation_id: int, enabled: bool) -> Activation:
        with self.store.write() as conn:
            activation = self.get(activation_id)
            queries.set_enabled(conn, activation.id, enabled, utcnow())
            if enabled:
                self._reschedule(conn, self.get(activation_id), self.prefs(conn), datetime.now(timezone.utc))
                schedule_tick(conn, self.user_id)
            return self.get(activation_id)

    def remove(self, activation_id: int) -> None:
        with self.store.write() as conn:
            self.get(activation_id)
            queries.delete(conn, activation_id, self.user_id)

    def runs(self, limit: int = 50) -> list[dict[str, Any]]:
        return queries.runs(self.store.connection(), self.user_id, max(1, min(limit, 1000)))

    def list(self) -> list[Activation]:
        return queries.for_user(self.store.connection(), self.user_id)

    def _reschedule(self, conn: Connection, activation: Activation, prefs: Prefs, now: datetime) -> None:
        if not activation.rule or activation.kind == "checkin":
            return
        upcoming = next_occurrence(activation.rule, prefs.zone, _parse_stamp(activation.created_at), now)
        queries.set_next_run(conn, activation.id, _stamp(upcoming) if upcoming else None)

    # -- firing ------------------------------------------------------------------------------------
    def tick(self, now: datetime | None = None) -> dict[str, int]:
        """Fire everything due at ``now``; returns counts by outcome (numbers only)."""
        now = now or datetime.now(timezone.utc)
        counts: dict[str, int] = {}
        conn = self.store.connection()
        due = queries.due(conn, self.user_id, _stamp(now))
        for activation in due:
            due_at = self._reflection_due(conn, activation) if activation.kind == "reflection" else \
                _parse_stamp(activation.next_run_at or "")
            if due_at is None or due_at > now:
                continue
            with self.store.write() as wconn:
                status = self._fire(wconn, activation, due_at, now)
            if status:
                counts[status] = counts.get(status, 0) + 1
        return counts

    def _reflection_due(self, conn: Connection, activation: Activation) -> datetime | None:
        last = last_user_turn_at(conn, self.user_id, activation.persona_id)
        if last is None:
            return None
        return _parse_stamp(last) + timedelta(minutes=activation.idle_minutes or 0)

    def _fire(self, conn: Connection, activation: Activation, due_at: datetime, now: datetime) -> str | None:
        """Claim one occurrence and advance the schedule, in the caller's transaction."""
        run_id = queries.claim_run(conn, activation.id, self.user_id, _stamp(due_at), utcnow())
        if run_id is None:
            return None  # this occurrence already fired
        prefs = self.prefs(conn)
        if activation.rule:
            upcoming = None if activation.kind == "checkin" else next_occurrence(
                activation.rule, prefs.zone, _parse_stamp(activation.created_at), max(now, due_at))
            queries.set_next_run(conn, activation.id, _stamp(upcoming) if upcoming else None, updated_at=utcnow())
        if activation.kind == "checkins":
            status = "watching"  # the watcher proposes check-ins (below); it sends nothing itself
        elif now - due_at > GRACE:
            status = "missed"
        elif prefs.stopped:
            status = "stopped"
        elif prefs.quiet(now):
            status = "quiet"
        elif self._sent_today(conn, prefs, now) >= prefs.daily_limit:
            status = "limit"
        else:
            status = "queued"
            jobs.enqueue(conn, self.user_id, RUN_JOB, {"run_id": run_id})
        queries.set_run_status(conn, run_id, status)
        ledger.append(conn, user_id=self.user_id, kind="activation.fired", channel="inner",
                      payload={"activation_id": activation.id, "run_id": run_id, "kind": activation.kind,
                               "status": status})
        return status

    def _sent_today(self, conn: Connection, prefs: Prefs, now: datetime) -> int:
        local_midnight = datetime.combine(now.astimezone(prefs.zone).date(), time(0), prefs.zone)
        return queries.sent_since(conn, self.user_id, _stamp(local_midnight))


# -- stop / start in any channel ------------------------------------------------------------------
def note_user_message(conn: Connection, store: Store, user_id: int, text: str, channel: str) -> None:
    """"stop check-ins" / "start check-ins" as a whole message, in any channel."""
    if _STOP.match(text):
        Activations(store, user_id)._set_stopped(conn, True, channel)
    elif _START.match(text):
        Activations(store, user_id)._set_stopped(conn, False, channel)


# -- noticing dates and promises (offline, rule-based; proposals follow G4) -------------------------
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WHEN = (r"(?P<when>today|tonight|tomorrow|(?:on |this |next )?(?:" + "|".join(_WEEKDAYS) + r")"
         r"|on (?:the )?\d{1,2}(?:st|nd|rd|th)?(?: of)? [a-z]{3,9}|on [a-z]{3,9} \d{1,2}(?:st|nd|rd|th)?)")
_PATTERNS = (
    ("reminder", re.compile(r"\bremind me to (?P<what>[^.!?\n]{3,80}?)\s+" + _WHEN + r"\b", re.IGNORECASE)),
    ("event", re.compile(r"\bmy (?P<what>[a-z][\w' -]{1,40}?) (?:is|are) " + _WHEN + r"\b", re.IGNORECASE)),
    ("event", re.compile(r"\bI (?:have|'ve got) (?:a|an|my) (?P<what>[a-z][\w' -]{1,40}?) " + _WHEN + r"\b",
                         re.IGNORECASE)),
)


@dataclass(frozen=True)
class Mention:
    kind: str  # reminder | event
    what: str
    day: date
    evidence: str


def resolve_day(when: str, today: date) -> date | None:
    """A spoken day ("Friday", "tomorrow", "on 12 December") as a date on or after ``today``."""
    from dateutil import parser

    text = when.lower().strip()
    nxt = text.startswith("next ")
    text = re.sub(r"^(on|this|next)\s+", "", text).replace("the ", "")
    if text in ("today", "tonight"):
        return today
    if text == "tomorrow":
        return today + timedelta(days=1)
    if text in _WEEKDAYS:
        ahead = (_WEEKDAYS.index(text) - today.weekday()) % 7
        return today + timedelta(days=ahead + (7 if nxt and ahead == 0 else 0))
    try:
        day = parser.parse(re.sub(r"(\d)(st|nd|rd|th)\b", r"\1", text), default=datetime.combine(today, time(0))).date()
    except (ValueError, OverflowError):
        return None
    return day if day >= today else day.replace(year=day.year + 1)


def find_mentions(text: str, today: date) -> list[Mention]:
    found: list[Mention] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            day = resolve_day(match.group("when"), today)
            if day is None:
                continue
            what = " ".join(match.group("what").split())
            sentence = text[max(0, text.rfind(".", 0, match.start()) + 1):match.end()].strip()
            found.append(Mention(kind, what, day, sentence[:300]))
    return found


def checkin_time(mention: Mention, zone: ZoneInfo, now: datetime) -> datetime:
    """Reminders in the morning of their day, events in the evening ("how did it go?")."""
    at = datetime.combine(mention.day, time(9) if mention.kind == "reminder" else time(18), zone)
    return max(at, now + timedelta(minutes=5))


def scan_for_checkins(ctx: "Context", activation: Activation, now: datetime) -> int:
    """Propose check-ins for dates and promises in the persona's new user messages (G4)."""
    conn = ctx.store.connection()
    key = f"activations.checkin_cursor.{activation.id}"
    after = state.get(conn, key, 0)
    rows = user_turns_after(conn, ctx.user_id, activation.persona_id, after)
    prefs = Activations(ctx.store, ctx.user_id).prefs()
    proposed = 0
    for _message_id, conversation_id, content in rows:
        for mention in find_mentions(content, now.astimezone(prefs.zone).date()):
            at = checkin_time(mention, prefs.zone, now)
            note = f"{'remind them to ' if mention.kind == 'reminder' else 'their '}{mention.what} ({mention.day:%A %d %B})"
            if ctx.review().propose(
                    CHECKIN_KIND, {"persona_id": activation.persona_id, "note": note, "at": _stamp(at),
                                   "channel": activation.channel},
                    f"The person mentioned a {'promise' if mention.kind == 'reminder' else 'date'}; "
                    "a check-in was noticed", evidence=mention.evidence, conversation_id=conversation_id):
                proposed += 1
    if rows:
        with ctx.store.write() as wconn:
            state.put(wconn, key, rows[-1][0])
    return proposed


# -- jobs --------------------------------------------------------------------------------------------
def schedule_tick(conn: Connection, user_id: int, delay: float = 0.0) -> int:
    return jobs.enqueue(conn, user_id, TICK_JOB, {}, dedupe_key=TICK_JOB, delay=delay, max_attempts=1)


def schedule_all(store: Store) -> int:
    """Queue a tick for every user with an enabled activation (a worker starting up); returns how
    many users. With the tick's own successor this keeps schedules alive across restarts."""
    with store.write() as conn:
        users = queries.users_with_enabled(conn)
        for user_id in users:
            schedule_tick(conn, user_id)
    return len(users)


def tick_job(ctx: "Context", payload: dict[str, Any], helper: "Helper") -> None:
    """Fire what is due, look for new check-ins, and queue the next tick while any is enabled. The
    run each firing queues is ``runs.run_job``."""
    now = datetime.now(timezone.utc)
    activations = Activations(ctx.store, ctx.user_id)
    try:
        activations.tick(now)
        for activation in activations.list():
            if activation.kind == "checkins" and activation.enabled:
                scan_for_checkins(ctx, activation, now)
    finally:
        with ctx.store.write() as conn:
            if queries.any_enabled(conn, ctx.user_id):
                schedule_tick(conn, ctx.user_id, delay=ctx.settings.activation_tick_seconds)
