"""SillyTavern World Info (lorebooks) and character books <-> fragments with controls (X3).

Two shapes carry the same entries:

* a World Info file: ``{"entries": {"<uid>": entry, ...}, "name"?: ...}`` with camelCase entry
  fields (``key``, ``keysecondary``, ``selectiveLogic`` 0-3 = AND ANY, NOT ALL, NOT ANY, AND ALL,
  ``constant``, ``order``, ``position``, ``probability``, ``useProbability``, ``sticky``,
  ``cooldown``, ``delay``, ``excludeRecursion``, ``preventRecursion``, ``caseSensitive``,
  ``matchWholeWords``, ``scanDepth``, ``disable``, ``comment``, ...);
* a character book inside a card: ``{"entries": [entry, ...]}`` with snake_case fields (``keys``,
  ``secondary_keys``, ``insertion_order``, ``enabled``, ``case_sensitive``, ``use_regex``) and the
  SillyTavern-specific ones under ``extensions``.

Both map to :class:`LoreEntry` (a fragment's fields plus its ``controls``). Fields Hearth does not
act on (inclusion groups, outlets, character filters, automation ids, ...) are kept verbatim in
``controls.extra`` and written back on export, so a round trip loses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hearth.errors import InvalidInput
from hearth.lorebook.controls import LOGICS

MAX_ENTRIES = 20_000

# World Info entry field -> control name, with the expected kind of value.
_WI_CONTROLS = {
    "constant": ("constant", bool), "order": ("order", int), "position": ("position", int),
    "probability": ("probability", int), "useProbability": ("use_probability", bool), "sticky": ("sticky", int),
    "cooldown": ("cooldown", int), "delay": ("delay", int), "excludeRecursion": ("exclude_recursion", bool),
    "preventRecursion": ("prevent_recursion", bool), "delayUntilRecursion": ("delay_until_recursion", int),
    "caseSensitive": ("case_sensitive", bool), "matchWholeWords": ("whole_words", bool),
    "scanDepth": ("scan_depth", int), "ignoreBudget": ("ignore_budget", bool), "depth": ("depth", int),
    "role": ("role", int), "comment": ("comment", str),
}
_WI_HANDLED = {"key", "keysecondary", "content", "disable", "selectiveLogic", "selective", "uid", *_WI_CONTROLS}
# Character book extension field (snake_case) -> control name.
_BOOK_EXT = {
    "position": "position", "exclude_recursion": "exclude_recursion", "prevent_recursion": "prevent_recursion",
    "delay_until_recursion": "delay_until_recursion", "probability": "probability",
    "useProbability": "use_probability", "use_probability": "use_probability", "depth": "depth",
    "role": "role", "sticky": "sticky", "cooldown": "cooldown", "delay": "delay",
    "scan_depth": "scan_depth", "match_whole_words": "whole_words", "case_sensitive": "case_sensitive",
    "ignore_budget": "ignore_budget",
}
_BOOK_HANDLED = {"keys", "secondary_keys", "content", "enabled", "insertion_order", "case_sensitive", "constant",
                 "comment", "selective", "id", "extensions", "position", "use_regex"}


@dataclass
class LoreEntry:
    uid: str
    keys: list[str]
    content: str
    enabled: bool
    controls: dict[str, Any]


@dataclass
class Lorebook:
    name: str
    entries: list[LoreEntry]
    extra: dict[str, Any]  # book-level fields (scan depth, token budget, ...), kept for export


def _value(raw: Any, kind: type, where: str, field: str) -> Any:
    if raw is None:
        return None
    if kind is int:
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or raw != raw or abs(raw) > 1e9:
            raise InvalidInput(f"{where}: {field} must be a number")
        return int(raw)
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        if raw in (0, 1):
            return bool(raw)
        raise InvalidInput(f"{where}: {field} must be true or false")
    if not isinstance(raw, str):
        raise InvalidInput(f"{where}: {field} must be text")
    return raw


def _keys(raw: Any, where: str, field: str) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, str):  # some older tools write comma-separated keys
        raw = [k for k in raw.split(",")]
    if not isinstance(raw, list) or not all(isinstance(k, str) for k in raw):
        raise InvalidInput(f"{where}: {field} must be a list of text")
    return [k.strip() for k in raw if k.strip()]


def _logic(raw: Any, where: str) -> str:
    if raw is None:
        return "and_any"
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw < len(LOGICS):
        raise InvalidInput(f"{where}: selectiveLogic must be 0, 1, 2 or 3")
    return LOGICS[raw]


def _clamp(controls: dict[str, Any]) -> dict[str, Any]:
    # Values outside what the controls allow are brought into range rather than refused: files from
    # other tools use, e.g., probability 0-100 with null for "not set".
    for name, low, high in (("probability", 0, 100), ("sticky", 0, 10_000), ("cooldown", 0, 10_000),
                            ("delay", 0, 10_000), ("delay_until_recursion", 0, 100), ("position", 0, 10_000),
                            ("depth", 0, 10_000), ("role", 0, 10), ("order", -1_000_000, 1_000_000)):
        if name in controls:
            if controls[name] is None:
                del controls[name]
            else:
                controls[name] = min(high, max(low, controls[name]))
    if "scan_depth" in controls and controls["scan_depth"] is not None:
        controls["scan_depth"] = min(1000, max(0, controls["scan_depth"]))
    return controls


def parse_world_info(payload: Any, default_name: str) -> Lorebook:
    """A SillyTavern World Info file; also accepts a bare character book."""
    if not isinstance(payload, dict):
        raise InvalidInput("a lorebook is a JSON object with 'entries'")
    entries = payload.get("entries")
    if isinstance(entries, list):
        return parse_character_book(payload, default_name)
    if not isinstance(entries, dict):
        raise InvalidInput("a lorebook needs 'entries' (an object keyed by uid, or a list)")
    if len(entries) > MAX_ENTRIES:
        raise InvalidInput(f"a lorebook may hold at most {MAX_ENTRIES} entries")
    raw_name = payload.get("name")
    name: str = raw_name if isinstance(raw_name, str) and raw_name.strip() else default_name
    out: list[LoreEntry] = []
    seen: set[str] = set()
    for uid_key, raw in entries.items():
        where = f"entry {uid_key}"
        if not isinstance(raw, dict):
            raise InvalidInput(f"{where} is not an object")
        uid = str(raw.get("uid", uid_key))
        if uid in seen:
            raise InvalidInput(f"{where}: uid {uid} appears twice")
        seen.add(uid)
        content = _value(raw.get("content"), str, where, "content") or ""
        controls: dict[str, Any] = {}
        kind: type
        for field, (control, kind) in _WI_CONTROLS.items():
            value = _value(raw.get(field), kind, where, field)
            if value is not None:
                controls[control] = value
        controls["secondary"] = _keys(raw.get("keysecondary"), where, "keysecondary")
        controls["logic"] = _logic(raw.get("selectiveLogic"), where)
        extra = {k: v for k, v in raw.items() if k not in _WI_HANDLED}
        if "selective" in raw:
            extra["selective"] = raw["selective"]
        controls["extra"] = extra
        disabled = _value(raw.get("disable"), bool, where, "disable") or False
        out.append(LoreEntry(uid, _keys(raw.get("key"), where, "key"), content, not disabled, _clamp(controls)))
    book_extra = {k: v for k, v in payload.items() if k not in ("entries", "name")}
    return Lorebook(name.strip()[:60], out, book_extra)


def parse_character_book(book: Any, default_name: str) -> Lorebook:
    """A character book (card spec V2/V3 ``character_book``)."""
    if not isinstance(book, dict) or not isinstance(book.get("entries"), list):
        raise InvalidInput("a character book needs a list of 'entries'")
    if len(book["entries"]) > MAX_ENTRIES:
        raise InvalidInput(f"a character book may hold at most {MAX_ENTRIES} entries")
    raw_name = book.get("name")
    name: str = raw_name if isinstance(raw_name, str) and raw_name.strip() else default_name
    out: list[LoreEntry] = []
    seen: set[str] = set()
    for n, raw in enumerate(book["entries"]):
        where = f"character book entry {n + 1}"
        if not isinstance(raw, dict):
            raise InvalidInput(f"{where} is not an object")
        uid = str(raw["id"]) if isinstance(raw.get("id"), (int, str)) and not isinstance(raw.get("id"), bool) else str(n)
        if uid in seen:
            raise InvalidInput(f"{where}: id {uid} appears twice")
        seen.add(uid)
        ext = raw.get("extensions") or {}
        if not isinstance(ext, dict):
            raise InvalidInput(f"{where}: extensions must be an object")
        controls: dict[str, Any] = {}
        kind: type
        for field, control in _BOOK_EXT.items():
            kind = bool if control in ("exclude_recursion", "prevent_recursion", "use_probability", "whole_words",
                                       "case_sensitive", "ignore_budget") else int
            value = _value(ext.get(field), kind, where, f"extensions.{field}")
            if value is not None:
                controls[control] = value
        for field, control, kind in (("insertion_order", "order", int), ("constant", "constant", bool),
                                     ("case_sensitive", "case_sensitive", bool), ("comment", "comment", str)):
            value = _value(raw.get(field), kind, where, field)
            if value is not None:
                controls[control] = value
        if "position" not in controls and raw.get("position") in ("before_char", "after_char"):
            controls["position"] = 0 if raw["position"] == "before_char" else 1
        controls["secondary"] = _keys(raw.get("secondary_keys"), where, "secondary_keys")
        controls["logic"] = _logic(raw.get("selectiveLogic", ext.get("selectiveLogic")), where)
        keys = _keys(raw.get("keys"), where, "keys")
        if raw.get("use_regex") is True:
            keys = [k if k.startswith("/") else f"/{k}/" for k in keys]
        extra = {k: v for k, v in raw.items() if k not in _BOOK_HANDLED and k != "selectiveLogic"}
        ext_extra = {k: v for k, v in ext.items() if k not in _BOOK_EXT and k != "selectiveLogic"}
        if ext_extra:
            extra["extensions"] = ext_extra
        # Spec fields with no Hearth meaning, recorded so an export writes them back as they were.
        extra["book"] = {"selective": raw.get("selective", True) is not False,
                         "use_regex": raw.get("use_regex") is True}
        if raw.get("position") in ("before_char", "after_char"):
            extra["book"]["position"] = raw["position"]
        controls["extra"] = extra
        content = _value(raw.get("content"), str, where, "content") or ""
        enabled = _value(raw.get("enabled"), bool, where, "enabled")
        out.append(LoreEntry(uid, keys, content, enabled is not False, _clamp(controls)))
    book_extra = {k: v for k, v in book.items() if k not in ("entries", "name")}
    return Lorebook(name.strip()[:60], out, book_extra)


# -- export ---------------------------------------------------------------------------------------

def _controls_of(fragment: Any) -> dict[str, Any]:
    from hearth.lorebook.controls import DEFAULTS

    controls = fragment.controls
    if controls:
        return {**DEFAULTS, **controls}
    # A plain fragment: whole words, any case; its filters become secondary keys.
    plain = {**DEFAULTS, "whole_words": True, "case_sensitive": False}
    if fragment.any_of:
        plain.update(secondary=list(fragment.any_of), logic="and_any")
    elif fragment.all_of:
        plain.update(secondary=list(fragment.all_of), logic="and_all")
    elif fragment.none_of:
        plain.update(secondary=list(fragment.none_of), logic="not_any")
    return plain


def _uid(fragment: Any, used: set[int]) -> int:
    key = fragment.import_key or ""
    tail = key.rsplit(":", 1)[-1]
    uid = int(tail) if tail.isdigit() and int(tail) not in used else None
    if uid is None:
        uid = 0
        while uid in used:
            uid += 1
    used.add(uid)
    return uid


def world_info(fragments: list[Any], name: str) -> dict[str, Any]:
    """Fragments as a SillyTavern World Info file."""
    entries: dict[str, Any] = {}
    used: set[int] = set()
    extra: dict[str, Any] = {}
    for display, fragment in enumerate(fragments):
        c = _controls_of(fragment)
        uid = _uid(fragment, used)
        entry = {
            "uid": uid, "key": list(fragment.triggers), "keysecondary": list(c["secondary"]),
            "comment": c["comment"], "content": fragment.definition, "constant": c["constant"],
            "selective": True, "selectiveLogic": LOGICS.index(c["logic"]), "order": c["order"],
            "position": c["position"], "disable": not fragment.enabled, "excludeRecursion": c["exclude_recursion"],
            "preventRecursion": c["prevent_recursion"], "delayUntilRecursion": c["delay_until_recursion"],
            "probability": c["probability"], "useProbability": c["use_probability"], "depth": c["depth"],
            "role": c["role"], "scanDepth": c["scan_depth"], "caseSensitive": c["case_sensitive"],
            "matchWholeWords": c["whole_words"], "ignoreBudget": c["ignore_budget"],
            "sticky": c["sticky"] or None, "cooldown": c["cooldown"] or None, "delay": c["delay"] or None,
            "displayIndex": display,
        }
        extra_fields = dict(c["extra"])
        extra_fields.pop("book", None)
        extra_fields.pop("extensions", None)
        extra = extra or extra_fields.pop("book_meta", {})
        extra_fields.pop("book_meta", None)
        entry.update(extra_fields)
        entries[str(uid)] = entry
    return {"name": name, **extra, "entries": entries}


def character_book(fragments: list[Any]) -> list[dict[str, Any]]:
    """Fragments as a card's ``character_book`` entries (spec V2/V3 fields, SillyTavern's in extensions)."""
    entries = []
    used: set[int] = set()
    for fragment in fragments:
        c = _controls_of(fragment)
        uid = _uid(fragment, used)
        stored = c["extra"]
        book = stored.get("book", {})
        ext = {"position": c["position"], "exclude_recursion": c["exclude_recursion"],
               "prevent_recursion": c["prevent_recursion"], "delay_until_recursion": c["delay_until_recursion"],
               "probability": c["probability"], "useProbability": c["use_probability"], "depth": c["depth"],
               "selectiveLogic": LOGICS.index(c["logic"]), "role": c["role"], "sticky": c["sticky"] or None,
               "cooldown": c["cooldown"] or None, "delay": c["delay"] or None, "scan_depth": c["scan_depth"],
               "match_whole_words": c["whole_words"], "case_sensitive": c["case_sensitive"],
               "ignore_budget": c["ignore_budget"], **stored.get("extensions", {})}
        entry = {
            "id": uid, "keys": list(fragment.triggers), "secondary_keys": list(c["secondary"]),
            "comment": c["comment"], "content": fragment.definition, "constant": c["constant"],
            "selective": book.get("selective", True), "insertion_order": c["order"],
            "enabled": fragment.enabled, "use_regex": book.get("use_regex", False), "extensions": ext,
        }
        if "position" in book:
            entry["position"] = book["position"]
        if c["case_sensitive"] is not None:
            entry["case_sensitive"] = c["case_sensitive"]
        entry.update({k: v for k, v in stored.items() if k not in ("book", "extensions", "book_meta")})
        entries.append(entry)
    return entries
