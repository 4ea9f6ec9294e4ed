"""SillyTavern chat files (X3): JSONL, one JSON object per line.

The first line is the chat's header (``user_name``, ``character_name``, ``create_date``,
``chat_metadata``); every other line is a message: ``name``, ``is_user``, ``is_system``,
``send_date``, ``mes``, ``extra``, and for regenerated replies ``swipes`` (every alternative),
``swipe_id`` (the one shown, which is ``mes``) and ``swipe_info``.

``send_date`` has had several shapes over the years: epoch milliseconds, ISO 8601, and the
humanised "March 2, 2024 6:04pm"; ``create_date`` is "2024-03-02@18h04m11s". Each is read into
UTC ISO time; a date that cannot be read takes the previous message's time and keeps the raw text
in the message metadata. Messages with ``is_system`` (hidden notes, narrator lines) are not
speech and are left out (counted in the report).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from hearth.errors import InvalidInput, TooLarge

MAX_MESSAGES = 100_000
MAX_MESSAGE_CHARS = 200_000
_HUMAN = ("%B %d, %Y %I:%M%p", "%B %d, %Y %I:%M %p", "%b %d, %Y %I:%M%p", "%b %d, %Y %I:%M %p",
          "%B %d, %Y %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M")
_ST_STAMP = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})\s*@(\d{1,2})h\s*(\d{1,2})m\s*(\d{1,2})s")


@dataclass
class ChatMessage:
    role: str  # user | assistant
    text: str
    created_at: str | None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Chat:
    user_name: str
    character_name: str
    created_at: str | None
    header: dict[str, Any]
    messages: list[ChatMessage]
    skipped_system: int = 0


def parse_date(value: Any) -> str | None:
    """A SillyTavern date as UTC ISO time, or None."""
    try:
        if isinstance(value, bool):
            return None
        if isinstance(value, (int, float)):
            seconds = value / 1000 if value > 1e11 else value
            if not 0 < seconds < 32_503_680_000:  # before the year 3000
                return None
            return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        if not isinstance(value, str) or not value.strip() or len(value) > 100:
            return None
        text = value.strip()
        if text.isdigit():
            return parse_date(int(text))
        m = _ST_STAMP.match(text)
        if m:
            y, mo, d, h, mi, s = (int(g) for g in m.groups())
            return datetime(y, mo, d, h, mi, s, tzinfo=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            parsed = None
            for fmt in _HUMAN:
                try:
                    parsed = datetime.strptime(text.replace("am", "AM").replace("pm", "PM"), fmt)
                    break
                except ValueError:
                    continue
        if parsed is None:
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        return parsed.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    except (ValueError, OverflowError, OSError):
        return None


def parse(data: bytes, name: str = "chat") -> Chat:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{name} is not valid UTF-8 (byte {exc.start})") from None
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise InvalidInput(f"{name} is empty")
    if len(lines) > MAX_MESSAGES + 1:
        raise TooLarge(f"{name} holds more than {MAX_MESSAGES} messages")
    objects = []
    for n, line in lines:
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{name} line {n} is not valid JSON ({exc.msg})") from None
        except RecursionError:
            raise InvalidInput(f"{name} line {n} nests JSON too deeply") from None
        if not isinstance(obj, dict):
            raise InvalidInput(f"{name} line {n} is not a JSON object")
        objects.append((n, obj))
    n, header = objects[0]
    if "mes" in header or not ("user_name" in header or "character_name" in header):
        raise InvalidInput(f"{name} has no SillyTavern chat header on its first line")
    user_name = header.get("user_name")
    character = header.get("character_name")
    if not isinstance(character, str) or not character.strip():
        raise InvalidInput(f"{name}: the header names no character")
    chat = Chat(user_name if isinstance(user_name, str) else "", character.strip(),
                parse_date(header.get("create_date")), header, [])
    last: str | None = chat.created_at
    for n, obj in objects[1:]:
        mes = obj.get("mes")
        if not isinstance(mes, str):
            raise InvalidInput(f"{name} line {n} has no message text ('mes')")
        if len(mes) > MAX_MESSAGE_CHARS:
            raise TooLarge(f"{name} line {n} is longer than {MAX_MESSAGE_CHARS} characters")
        if obj.get("is_system") is True:
            chat.skipped_system += 1
            continue
        if not mes.strip():
            continue
        is_user = obj.get("is_user")
        if not isinstance(is_user, bool):
            raise InvalidInput(f"{name} line {n}: is_user must be true or false")
        stamp = parse_date(obj.get("send_date"))
        metadata: dict[str, Any] = {"source": "sillytavern", "line": n}
        if isinstance(obj.get("name"), str):
            metadata["speaker"] = obj["name"]
        if stamp is None:
            metadata["send_date"] = obj.get("send_date") if isinstance(obj.get("send_date"), (str, int, float)) \
                else None
            stamp = last
        last = stamp or last
        swipes = obj.get("swipes")
        if swipes is not None:
            if not isinstance(swipes, list) or not all(isinstance(s, str) for s in swipes):
                raise InvalidInput(f"{name} line {n}: swipes must be a list of text")
            if sum(len(s) for s in swipes) > MAX_MESSAGE_CHARS * 4:
                raise TooLarge(f"{name} line {n}: the swipes are too long")
            if len(swipes) > 1 or (swipes and swipes[0] != mes):
                metadata["swipes"] = swipes
                swipe_id = obj.get("swipe_id")
                if isinstance(swipe_id, int) and not isinstance(swipe_id, bool):
                    metadata["swipe_id"] = swipe_id
        for key in ("extra", "swipe_info"):
            value = obj.get(key)
            if value not in (None, {}, []):
                metadata[key] = value
        chat.messages.append(ChatMessage("user" if is_user else "assistant", mes, stamp, metadata))
    if not chat.messages:
        raise InvalidInput(f"{name} holds no messages")
    return chat
