"""SillyTavern macros (X3): ``{{user}}``, ``{{char}}`` and friends, filled where text meets the model.

Character cards are written with macros, and Hearth keeps their text as written: a macro is filled
when the text is placed in a prompt or a thread, never when it is imported, so a later change of
the person's display name or the persona's display name takes effect.

Supported (names are case-insensitive, as in SillyTavern):

* ``{{user}}`` / ``<USER>``: the person's display name (``hearth user name``), "the person" when unset;
* ``{{char}}`` / ``<BOT>`` / ``<CHAR>``: the persona's display name (a V3 card's ``nickname`` first);
* ``{{time}}`` (3:04 PM), ``{{date}}`` (March 2, 2024), ``{{weekday}}`` (Saturday), ``{{isotime}}``
  (15:04), ``{{isodate}}`` (2024-03-02), in the person's time zone (the activation preferences' zone);
* ``{{random:a,b,c}}`` / ``{{random::a::b}}``: one of the options; ``{{pick...}}`` the same, but
  the same option every time in one conversation;
* ``{{idle_duration}}``: how long since the person's previous message ("5 minutes", "just now");
* ``{{// a comment}}`` is removed; ``{{newline}}`` is a line break, ``{{trim}}`` removes itself and
  the line breaks around it, ``{{noop}}`` and ``{{original}}`` are empty.

Anything else between braces is left as written. What a macro is filled with is not scanned again,
so a display name that looks like a macro stays text.

Where each place fills them: the stored static prompt at build time, with the conversation's start
as "now" and random picks seeded by the conversation (a rebuild gives the same text); a greeting when
the thread opens; the post-history instructions on every send (fresh time and random).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from hearth.store import Connection
from hearth.store.queries import macro_values

DEFAULT_USER = "the person"

_TRIM = re.compile(r"\{\{trim\}\}", re.IGNORECASE)
_MACRO = re.compile(r"\{\{([^{}]*)\}\}|<(USER|BOT|CHAR)>", re.IGNORECASE)
_ESCAPED_COMMA = "\x00"


def _drop_comments(text: str) -> str:
    """``{{// ...}}`` removed, up to the first ``}}`` after it (as ``\\{\\{//.*?\\}\\}`` would), in one
    pass: the pattern retried every later ``{{//`` of an unclosed comment to the end of the text,
    quadratic in a run of them."""
    out: list[str] = []
    done = 0
    while True:
        start = text.find("{{//", done)
        if start < 0:
            break
        end = text.find("}}", start + 4)
        if end < 0:
            break  # unclosed, and so is every later one: nothing after it closes
        out.append(text[done:start])
        done = end + 2
    out.append(text[done:])
    return "".join(out)


def _drop_trims(text: str) -> str:
    """``{{trim}}`` removed with the line breaks around it, in one pass: the pattern
    ``(?:\\r?\\n)*\\{\\{trim\\}\\}(?:\\r?\\n)*`` read a run of line breaks again from each of them."""
    out: list[str] = []
    done = 0
    for match in _TRIM.finditer(text):
        start, end = match.start(), match.end()
        while start > done and text[start - 1] == "\n":
            start -= 1
            if start > done and text[start - 1] == "\r":
                start -= 1
        while True:
            if text.startswith("\n", end):
                end += 1
            elif text.startswith("\r\n", end):
                end += 2
            else:
                break
        out.append(text[done:start])
        done = end
    out.append(text[done:])
    return "".join(out)


def _clock(moment: datetime) -> str:
    return moment.strftime("%I:%M %p").lstrip("0")


def _long_date(moment: datetime) -> str:
    return f"{moment.strftime('%B')} {moment.day}, {moment.year}"


def humanize(span: timedelta | None) -> str:
    """A duration as SillyTavern words it (moment.js ``humanize``); None is "just now"."""
    if span is None:
        return "just now"
    seconds = max(0.0, span.total_seconds())
    minutes, hours, days = seconds / 60, seconds / 3600, seconds / 86400
    if seconds < 45:
        return "a few seconds"
    if seconds < 90:
        return "a minute"
    if minutes < 45:
        return f"{round(minutes)} minutes"
    if minutes < 90:
        return "an hour"
    if hours < 22:
        return f"{round(hours)} hours"
    if hours < 36:
        return "a day"
    if days < 26:
        return f"{round(days)} days"
    if days < 45:
        return "a month"
    if days < 320:
        return f"{round(days / 30.4)} months"
    if days < 548:
        return "a year"
    return f"{round(days / 365.25)} years"


def _options(body: str) -> list[str]:
    """The choices of a ``random`` / ``pick`` macro: ``::a::b`` or ``:a,b`` (``\\,`` is a comma)."""
    if body.startswith("::"):
        return body[2:].split("::")
    if body.startswith(":"):
        return [part.replace(_ESCAPED_COMMA, ",") for part in body[1:].replace("\\,", _ESCAPED_COMMA).split(",")]
    return []


@dataclass(frozen=True)
class Macros:
    """What the macros of one placement are filled with."""

    char: str
    user: str = DEFAULT_USER
    now: datetime = field(default_factory=lambda: datetime.now(timezone.utc))  # aware, in the person's zone
    idle: timedelta | None = None  # since the person's previous message
    seed: int = 0  # the conversation: ``pick`` is stable within it
    stable: bool = False  # ``random`` seeded too (the stored prompt: a rebuild gives the same text)

    def fill(self, text: str) -> str:
        if not text or ("{{" not in text and "<" not in text):
            return text
        text = _drop_trims(_drop_comments(text))
        fresh = random.Random() if not self.stable else None
        count = 0

        def one(match: re.Match[str]) -> str:
            nonlocal count
            if match.group(2):
                return self.user if match.group(2).upper() == "USER" else self.char
            inner = match.group(1)
            name = inner.strip().lower()
            if name == "user":
                return self.user
            if name in ("char", "charifnotgroup", "group"):
                return self.char
            if name == "time":
                return _clock(self.now)
            if name == "date":
                return _long_date(self.now)
            if name == "weekday":
                return self.now.strftime("%A")
            if name == "isotime":
                return self.now.strftime("%H:%M")
            if name == "isodate":
                return self.now.strftime("%Y-%m-%d")
            if name == "idle_duration":
                return humanize(self.idle)
            if name == "newline":
                return "\n"
            if name in ("noop", "original"):
                return ""
            head = inner.lstrip()
            for word in ("random", "pick"):
                if head[:len(word)].lower() == word and head[len(word):len(word) + 1] == ":":
                    choices = _options(head[len(word):])
                    count += 1
                    if not choices:
                        return ""
                    if word == "random" and fresh is not None:
                        return fresh.choice(choices)
                    # Seeded by the conversation and the macro's place: the same choice on each fill.
                    return random.Random(f"{self.seed}:{count}:{inner}").choice(choices)
            return match.group(0)

        return _MACRO.sub(one, text)


def char_name(persona: Any) -> str:
    """What ``{{char}}`` is for a persona: a V3 card's nickname when it has one (as the V3 spec
    asks), else the persona's display name."""
    nickname = persona.card.get("nickname") if isinstance(persona.card, dict) else None
    return nickname.strip() if isinstance(nickname, str) and nickname.strip() else persona.display_name


def person_name(conn: Connection, user_id: int) -> str:
    """What ``{{user}}`` is for this user: their display name, or "the person"."""
    return macro_values.display_name(conn, user_id) or DEFAULT_USER


def zone(conn: Connection, user_id: int) -> Any:
    """The person's time zone: the one their activation preferences name, else UTC."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    name = macro_values.timezone(conn, user_id)
    try:
        return ZoneInfo(name) if name else timezone.utc
    except (ZoneInfoNotFoundError, ValueError):
        return timezone.utc


def for_user(conn: Connection, user_id: int, char: str, *, at: datetime | None = None,
             idle: timedelta | None = None, seed: int = 0, stable: bool = False) -> Macros:
    """The macros of one placement for this user: name and zone read from the database."""
    moment = (at or datetime.now(timezone.utc)).astimezone(zone(conn, user_id))
    return Macros(char=char, user=person_name(conn, user_id), now=moment, idle=idle, seed=seed, stable=stable)


def parse_stamp(stamp: str | None) -> datetime | None:
    """A stored time stamp (UTC, ``...Z``) as an aware datetime; None when it cannot be read."""
    try:
        moment = datetime.fromisoformat((stamp or "").replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


_USER_MACRO = re.compile(r"\{\{\s*user\s*\}\}|<USER>", re.IGNORECASE)


def user_macro_conversations(conn: Connection, user_id: int) -> list[int]:
    """This user's conversations with a stored prompt that fills ``{{user}}``: their persona's text
    (identity, instructions, sections, card) or their own instructions name the person by macro.
    A change of display name rebuilds these and no others."""
    personas = [persona_id for persona_id, texts in macro_values.persona_texts(conn, user_id)
                if any(_USER_MACRO.search(part or "") for part in texts)]
    by_persona = macro_values.prompted_conversations(conn, user_id, personas) if personas else []
    own = [conversation_id for conversation_id, text in macro_values.own_instructions(conn, user_id)
           if _USER_MACRO.search(text)]
    return sorted(set(by_persona) | set(own))
