"""Moments for bi-temporal reads and writes (B1).

Every fact Hearth keeps about the person has two time axes: when it was *true* (valid from /
valid until) and when Hearth *knew* it (recorded at / retired at). Callers pass moments as ISO
dates or date-times; they are turned into the sortable UTC form every ``*_at`` column uses.

Dates in the future are refused: a change is recorded when it happens, so a stored prompt never
holds a fact that only becomes true (or stops being true) later without anything rebuilding it.
"""

from __future__ import annotations

from datetime import date, datetime, time, timezone
from typing import Any

from hearth.errors import InvalidInput
from hearth.store import utcnow

MODES = ("valid", "known")


def _format(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_moment(value: Any, what: str = "date", *, end_of_day: bool = True) -> str:
    """An ISO date or date-time as a UTC timestamp string; not in the future.

    A bare date means the end of that day (UTC) for "as of" reads, so "what was true on 3 May"
    includes changes made during 3 May; ``end_of_day=False`` gives its start (for valid-from).
    A date-time without an offset is taken as UTC.
    """
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    elif isinstance(value, date):
        moment = datetime.combine(value, time.max if end_of_day else time.min, timezone.utc)
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            if len(text) == 10:
                day = date.fromisoformat(text)
                moment = datetime.combine(day, time.max if end_of_day else time.min, timezone.utc)
            else:
                moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
                if moment.tzinfo is None:
                    moment = moment.replace(tzinfo=timezone.utc)
        except ValueError:
            raise InvalidInput(f"{what} must be an ISO date (2026-05-03) or date-time; got {text[:40]!r}") from None
    else:
        raise InvalidInput(f"{what} must be an ISO date (2026-05-03) or date-time")
    stamp = _format(moment)
    now = utcnow()
    if stamp > now:
        # A bare date for today ends tonight; it means "now" rather than the future.
        if len(str(value).strip()) == 10 and stamp[:10] == now[:10]:
            return now
        raise InvalidInput(f"{what} {stamp[:19]}Z is in the future; Hearth records changes when they happen")
    return stamp


def check_mode(mode: Any) -> str:
    if mode not in MODES:
        raise InvalidInput("mode must be 'valid' (what was true then) or 'known' (what Hearth knew then)")
    return str(mode)
