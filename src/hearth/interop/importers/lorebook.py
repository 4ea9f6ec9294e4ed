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
from hearth.lorebook.controls import LOGICS, MAX_KEY_CHARS
from hearth.validation import json_path, text_problem

MAX_ENTRIES = 20_000

# World Info entry field -> (control name, kind of value). The kinds read values the way
# SillyTavern's own code reads them (X5): a "flag" by JavaScript truthiness (its editor saves
# ``delayUntilRecursion: false`` for an unticked box and a level number for a ticked one), a
# "number" from a number, a numeric string or a boolean; null, a missing field or a value
# SillyTavern would read as NaN leave the control unset.
_WI_CONTROLS = {
    "constant": ("constant", "flag"), "order": ("order", "number"), "position": ("position", "number"),
    "probability": ("probability", "number"), "useProbability": ("use_probability", "flag"),
    "sticky": ("sticky", "number"), "cooldown": ("cooldown", "number"), "delay": ("delay", "number"),
    "excludeRecursion": ("exclude_recursion", "flag"), "preventRecursion": ("prevent_recursion", "flag"),
    "delayUntilRecursion": ("delay_until_recursion", "number"), "caseSensitive": ("case_sensitive", "flag"),
    "matchWholeWords": ("whole_words", "flag"), "scanDepth": ("scan_depth", "number"),
    "ignoreBudget": ("ignore_budget", "flag"), "depth": ("depth", "number"), "role": ("role", "number"),
    "comment": ("comment", "text"),
}
_WI_HANDLED = {"key", "keysecondary", "content", "disable", "selectiveLogic", "selective", "uid", *_WI_CONTROLS}
# Character book extension field (snake_case, as SillyTavern's exporter writes them) -> control.
_BOOK_EXT = {
    "position": ("position", "number"), "exclude_recursion": ("exclude_recursion", "flag"),
    "prevent_recursion": ("prevent_recursion", "flag"), "delay_until_recursion": ("delay_until_recursion", "number"),
    "probability": ("probability", "number"), "useProbability": ("use_probability", "flag"),
    "use_probability": ("use_probability", "flag"), "depth": ("depth", "number"), "role": ("role", "number"),
    "sticky": ("sticky", "number"), "cooldown": ("cooldown", "number"), "delay": ("delay", "number"),
    "scan_depth": ("scan_depth", "number"), "match_whole_words": ("whole_words", "flag"),
    "case_sensitive": ("case_sensitive", "flag"), "ignore_budget": ("ignore_budget", "flag"),
}
_BOOK_HANDLED = {"keys", "secondary_keys", "content", "enabled", "insertion_order", "case_sensitive", "constant",
                 "comment", "selective", "id", "extensions", "position", "use_regex"}
# SillyTavern's world_info_position: what ``position`` 0-6 means (docs/import.md).
POSITIONS = ("before_char", "after_char", "an_top", "an_bottom", "at_depth", "em_top", "em_bottom")


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


class _Where:
    """Names a field the way the person finds it in their file: ``character_book.entries[1].extensions.
    delay_until_recursion in lily.png``, never an internal name."""

    def __init__(self, path: str, source: str):
        self.path = path
        self.source = source

    def field(self, name: str) -> str:
        path = json_path(self.path, name) if name.isidentifier() else f"{self.path}.{name}"
        return f"{path} in {self.source}" if self.source else path

    def entry(self) -> str:
        return f"{self.path} in {self.source}" if self.source else self.path

    def fail(self, name: str, problem: str) -> InvalidInput:
        return InvalidInput(f"{self.field(name)}: {problem}")


def _read(raw: Any, kind: str, where: _Where, field: str) -> Any:
    if raw is None:
        return None
    if kind == "flag":
        # JavaScript truthiness, which is how SillyTavern tests every one of these.
        if isinstance(raw, float) and raw != raw:
            return False
        return bool(raw)
    if kind == "number":
        if isinstance(raw, bool):
            return int(raw)  # delayUntilRecursion: true is level 1, false is off
        if isinstance(raw, str):
            try:
                raw = float(raw.strip()) if raw.strip() else None
            except ValueError:
                return None
        if not isinstance(raw, (int, float)) or raw != raw or raw in (float("inf"), float("-inf")):
            return None  # SillyTavern reads it as NaN: the control keeps its default
        return int(max(-1e9, min(1e9, raw)))
    return _text(raw, where, field)


def _text(raw: Any, where: _Where, field: str) -> str:
    if raw is None:
        return ""
    if isinstance(raw, bool):
        return "true" if raw else "false"  # as JavaScript writes it into the prompt
    if isinstance(raw, (int, float)):
        return str(raw)
    if not isinstance(raw, str):
        raise where.fail(field, "must be text")
    problem = text_problem(raw)
    if problem:
        raise where.fail(field, problem)
    return raw


def _keys(raw: Any, where: _Where, field: str) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, str):  # some older tools write comma-separated keys
        raw = raw.split(",")
    if not isinstance(raw, list):
        raise where.fail(field, "must be a list of text")
    keys = []
    for n, key in enumerate(raw):
        if key is None:
            continue
        if isinstance(key, (list, dict)):
            raise where.fail(f"{field}[{n}]", "must be text")
        text = _text(key, where, f"{field}[{n}]").strip()
        if len(text) > MAX_KEY_CHARS:
            raise where.fail(f"{field}[{n}]", f"a key may be at most {MAX_KEY_CHARS} characters")
        if text:
            keys.append(text)
    return keys


def _logic(raw: Any) -> str:
    # SillyTavern reads a missing value as AND ANY (``entry.selectiveLogic ?? 0``).
    number = _read(raw, "number", _Where("", ""), "selectiveLogic")
    return LOGICS[number] if number is not None and 0 <= number < len(LOGICS) else "and_any"


def _clamp(controls: dict[str, Any]) -> dict[str, Any]:
    # Values outside what the controls allow are brought into range rather than refused: files from
    # other tools use, e.g., probability 0-100 with null for "not set".
    for name, low, high in (("probability", 0, 100), ("sticky", 0, 10_000), ("cooldown", 0, 10_000),
                            ("delay", 0, 10_000), ("delay_until_recursion", 0, 100), ("position", 0, 10_000),
                            ("depth", 0, 10_000), ("role", 0, 10), ("order", -1_000_000, 1_000_000),
                            ("scan_depth", 0, 1000)):
        if name in controls:
            if controls[name] is None:
                del controls[name]
            else:
                controls[name] = min(high, max(low, controls[name]))
    return controls


def parse_world_info(payload: Any, default_name: str, source: str = "") -> Lorebook:
    """A SillyTavern World Info file; also accepts a bare character book. ``source`` (the file's
    name) is named in every error together with the field."""
    if not isinstance(payload, dict):
        raise InvalidInput(f"{source or 'a lorebook'}: a lorebook is a JSON object with 'entries'")
    entries = payload.get("entries")
    if isinstance(entries, list):
        return parse_character_book(payload, default_name, source, path="")
    if not isinstance(entries, dict):
        raise InvalidInput(f"{source or 'a lorebook'}: a lorebook needs 'entries' (an object keyed by uid, or a list)")
    if len(entries) > MAX_ENTRIES:
        raise InvalidInput(f"{source or 'a lorebook'}: a lorebook may hold at most {MAX_ENTRIES} entries")
    raw_name = payload.get("name")
    name: str = raw_name if isinstance(raw_name, str) and raw_name.strip() else default_name
    out: list[LoreEntry] = []
    seen: set[str] = set()
    for uid_key, raw in entries.items():
        where = _Where(json_path("entries", uid_key), source)
        if not isinstance(raw, dict):
            raise InvalidInput(f"{where.entry()}: an entry is an object")
        uid_raw = raw.get("uid", uid_key)
        uid = str(uid_key if uid_raw is None or isinstance(uid_raw, (dict, list)) else uid_raw)
        if uid in seen:
            raise where.fail("uid", f"uid {uid} appears twice")
        seen.add(uid)
        content = _text(raw.get("content"), where, "content")
        controls: dict[str, Any] = {}
        for field, (control, kind) in _WI_CONTROLS.items():
            value = _read(raw.get(field), kind, where, field)
            if value is not None:
                controls[control] = value
        controls["secondary"] = _keys(raw.get("keysecondary"), where, "keysecondary")
        controls["logic"] = _logic(raw.get("selectiveLogic"))
        extra = {k: v for k, v in raw.items() if k not in _WI_HANDLED}
        if "selective" in raw:
            extra["selective"] = raw["selective"]
        controls["extra"] = extra
        disabled = _read(raw.get("disable"), "flag", where, "disable") or False
        out.append(LoreEntry(uid, _keys(raw.get("key"), where, "key"), content, not disabled, _clamp(controls)))
    book_extra = {k: v for k, v in payload.items() if k not in ("entries", "name")}
    return Lorebook(name.strip()[:60], out, book_extra)


def parse_character_book(book: Any, default_name: str, source: str = "", path: str = "character_book") -> Lorebook:
    """A character book (card spec V2/V3 ``character_book``), read as SillyTavern's
    ``convertCharacterBook`` reads it: ``use_regex`` is ignored (its exporter writes ``true`` on
    every entry; a key is a regex only when written ``/.../flags``, X6), a missing
    ``extensions.position`` follows ``position`` (``before_char``, else after the character), a
    missing ``selective`` is false (secondary keys then do not apply)."""
    book_path = path or ""
    if not isinstance(book, dict) or not isinstance(book.get("entries"), list):
        raise InvalidInput(f"{json_path(book_path, 'entries') if book_path else 'entries'}"
                           f"{' in ' + source if source else ''}: a character book needs a list of entries")
    if len(book["entries"]) > MAX_ENTRIES:
        raise InvalidInput(f"{source or 'a character book'}: a character book may hold at most {MAX_ENTRIES} entries")
    raw_name = book.get("name")
    name: str = raw_name if isinstance(raw_name, str) and raw_name.strip() else default_name
    # The book's own scan depth (card spec V2) stands in for an entry that sets none; SillyTavern's
    # default (2) applies when neither does.
    book_depth = _read(book.get("scan_depth"), "number", _Where(book_path, source), "scan_depth")
    out: list[LoreEntry] = []
    seen: set[str] = set()
    for n, raw in enumerate(book["entries"]):
        where = _Where(f"{json_path(book_path, 'entries') if book_path else 'entries'}[{n}]", source)
        if not isinstance(raw, dict):
            raise InvalidInput(f"{where.entry()}: an entry is an object")
        raw_id = raw.get("id")
        uid = str(raw_id) if isinstance(raw_id, (int, str)) and not isinstance(raw_id, bool) else str(n)
        if uid in seen:
            raise where.fail("id", f"id {uid} appears twice")
        seen.add(uid)
        ext = raw.get("extensions")
        if ext is None:
            ext = {}
        if not isinstance(ext, dict):
            raise where.fail("extensions", "must be an object")
        controls: dict[str, Any] = {}
        for field, (control, kind) in _BOOK_EXT.items():
            value = _read(ext.get(field), kind, where, f"extensions.{field}")
            if value is not None:
                controls[control] = value
        for field, control, kind in (("insertion_order", "order", "number"), ("constant", "constant", "flag"),
                                     ("comment", "comment", "text")):
            value = _read(raw.get(field), kind, where, field)
            if value is not None:
                controls[control] = value
        if "case_sensitive" not in controls:  # the spec's own field, when SillyTavern's extension is unset
            value = _read(raw.get("case_sensitive"), "flag", where, "case_sensitive")
            if value is not None:
                controls["case_sensitive"] = value
        if "position" not in controls:
            controls["position"] = 0 if raw.get("position") == "before_char" else 1
        if "scan_depth" not in controls and book_depth is not None:
            controls["scan_depth"] = book_depth
        secondary = _keys(raw.get("secondary_keys"), where, "secondary_keys")
        controls["secondary"] = secondary
        controls["logic"] = _logic(raw.get("selectiveLogic", ext.get("selectiveLogic")))
        keys = _keys(raw.get("keys"), where, "keys")
        extra = {k: v for k, v in raw.items() if k not in _BOOK_HANDLED and k != "selectiveLogic"}
        ext_extra = {k: v for k, v in ext.items() if k not in _BOOK_EXT and k != "selectiveLogic"}
        if ext_extra:
            extra["extensions"] = ext_extra
        # Spec fields with no Hearth meaning, recorded so an export writes them back as they were.
        extra["book"] = {"selective": raw.get("selective", True) is not False, "use_regex": raw.get("use_regex") is True}
        if raw.get("position") in ("before_char", "after_char"):
            extra["book"]["position"] = raw["position"]
        if secondary and not _read(raw.get("selective"), "flag", where, "selective"):
            # SillyTavern reads a missing or false ``selective`` as false and then ignores the
            # secondary keys; they are kept for export but do not apply.
            extra["book"]["secondary_off"] = True
        controls["extra"] = extra
        content = _text(raw.get("content"), where, "content")
        enabled = _read(raw.get("enabled"), "flag", where, "enabled")
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
