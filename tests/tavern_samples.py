"""Files shaped the way SillyTavern writes them, value by value (X5-X9).

Each builder names the SillyTavern function whose output it reproduces (``public/scripts/
world-info.js`` and ``src/endpoints/characters.js``), so a test that imports them checks Hearth
against what a SillyTavern user's own files hold, not against Hearth's own exports.
"""

from __future__ import annotations

import json
from typing import Any

from tests import samples


def template_entry(uid: int, **fields: Any) -> dict[str, Any]:
    """A World Info entry as ``createWorldInfoEntry`` makes it: ``{uid, ...newWorldInfoEntryTemplate}``
    (the defaults of ``newWorldInfoEntryDefinition``), with what the editor then saved over them,
    and ``displayIndex``, which the editor's sortable list writes."""
    entry = {
        "uid": uid, "key": [], "keysecondary": [], "comment": "", "content": "", "constant": False,
        "vectorized": False, "selective": True, "selectiveLogic": 0, "addMemo": False, "order": 100,
        "position": 0, "disable": False, "excludeRecursion": False, "preventRecursion": False,
        "delayUntilRecursion": 0, "probability": 100, "useProbability": True, "depth": 4, "group": "",
        "groupOverride": False, "groupWeight": 100, "scanDepth": None, "caseSensitive": None,
        "matchWholeWords": None, "useGroupScoring": None, "automationId": "", "role": 0, "sticky": None,
        "cooldown": None, "delay": None, "displayIndex": uid,
    }
    entry.update(fields)
    return entry


def editor_world_info(touched: bool = True) -> dict[str, Any]:
    """A World Info file as SillyTavern's editor saves it (``getWorldEntry`` handlers, then ``_save``
    posts ``{entries}`` to ``/api/worldinfo/edit``, which writes it as it is). ``touched=False``
    leaves out the values only a touched checkbox or a converted file writes (the template's 0 for
    delay until recursion, true for use probability), for tests of other points."""
    entries = [
        # The "delay until recursion" checkbox: unticked saves false (the handler's
        # ``toggled ? ... : false``), ticked without a level saves true, a level saves the number.
        template_entry(0, key=["Marigold"], content="Marigold is the ferry cat.", comment="ferry cat",
                       delayUntilRecursion=False),
        template_entry(1, key=["lantern"], content="The lantern is lit at dusk.", delayUntilRecursion=True),
        template_entry(2, key=["causeway"], content="The causeway floods at spring tide.", delayUntilRecursion=2),
        # The position select sets ``role = null`` for every position but "at depth"; the
        # probability toggle, when off, sets ``probability = null``; the number inputs leave
        # ``sticky``/``cooldown``/``delay`` null when empty and save a number otherwise.
        template_entry(3, key=["gull"], content="Gulls nest on the lamp gallery.", role=None, position=1,
                       useProbability=False, probability=None, matchWholeWords=True, sticky=0, cooldown=None),
        # "At depth" with the user role (position 4, ``role`` from the option's data-role).
        template_entry(4, key=["pip"], content="{{char}} owes {{user}} a favour.", position=4, depth=2, role=1,
                       matchWholeWords=True, caseSensitive=False, scanDepth=3),
        # The case-sensitivity and whole-words selects save null, true or false.
        template_entry(5, key=["Pike"], content="Pike is a surname here.", caseSensitive=True,
                       matchWholeWords=False),
        # Author's-note top and bottom, example-message top and bottom.
        template_entry(6, key=["fog"], content="Fog note top.", position=2, role=None),
        template_entry(7, key=["fog"], content="Fog note bottom.", position=3, role=None),
        template_entry(8, key=["fog"], content="Fog example top.", position=5, role=None),
        template_entry(9, key=["fog"], content="Fog example bottom.", position=6, role=None),
        # A key written /pattern/flags is a regex; the order input saves a number (0 when cleared).
        template_entry(10, key=["/sea ?glass/i"], content="Sea glass in a jar.", order=0),
        # ``convertRisuLorebook`` (run by SillyTavern's importer before it saves the file) writes
        # ``useProbability: entry.activationPercent ?? true``: a number where a flag is expected.
        template_entry(11, key=["dice"], content="The dice are loaded.", useProbability=50, probability=50),
    ]
    if not touched:
        for entry in entries:
            if isinstance(entry["delayUntilRecursion"], bool):
                entry["delayUntilRecursion"] = int(entry["delayUntilRecursion"])
            if not isinstance(entry["useProbability"], bool):
                entry["useProbability"] = True
    return {"entries": {str(e["uid"]): e for e in entries}}


def exported_book_entry(uid: int, keys: list[str], content: str, **over: Any) -> dict[str, Any]:
    """One entry as ``convertWorldInfoToCharacterBook`` (src/endpoints/characters.js) writes a World
    Info entry of the template above into a card: ``use_regex: true`` always, and ``?? false`` /
    ``?? null`` for what the entry leaves unset (the template's ``delayUntilRecursion: 0`` passes
    through ``?? false`` as 0; an entry whose box was unticked in the editor holds false)."""
    ext = {
        "position": 0, "exclude_recursion": False, "display_index": uid, "probability": 100,
        "useProbability": True, "depth": 4, "selectiveLogic": 0, "group": "", "group_override": False,
        "group_weight": 100, "prevent_recursion": False, "delay_until_recursion": 0, "scan_depth": None,
        "match_whole_words": None, "use_group_scoring": False, "case_sensitive": None, "automation_id": "",
        "role": 0, "vectorized": False, "sticky": None, "cooldown": None, "delay": None,
    }
    ext.update(over.pop("extensions", {}))
    entry = {"id": uid, "keys": keys, "secondary_keys": [], "comment": "", "content": content, "constant": False,
             "selective": True, "insertion_order": 100, "enabled": True,
             "position": "before_char" if ext["position"] == 0 else "after_char", "use_regex": True,
             "extensions": ext}
    entry.update(over)
    return entry


def exported_card(name: str = "Lily", entries: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A card as ``charaFormatData`` (src/endpoints/characters.js) writes it when the character has
    a World Info book attached: the V1 fields at the top, the V2 ``data`` with SillyTavern's
    extensions, and the book converted by ``convertWorldInfoToCharacterBook``."""
    data = {
        "name": name, "description": "{{char}} keeps the ferry café.", "personality": "warm", "scenario": "",
        "first_mes": "Tea?", "mes_example": "", "creator_notes": "", "system_prompt": "",
        "post_history_instructions": "", "tags": [], "creator": "", "character_version": "",
        "alternate_greetings": [],
        "extensions": {"talkativeness": "0.5", "fav": False, "world": "Ferry",
                       "depth_prompt": {"prompt": "", "depth": 4, "role": "system"}},
        "group_only_greetings": [],
        "character_book": {"entries": entries if entries is not None else tavern_book_entries(), "name": "Ferry"},
    }
    return {"name": name, "description": data["description"], "personality": "warm", "scenario": "",
            "first_mes": "Tea?", "mes_example": "", "creatorcomment": "", "avatar": "none",
            "chat": f"{name} - 2024-9-28@01h02m36s", "talkativeness": "0.5", "fav": False, "tags": [],
            "spec": "chara_card_v2", "spec_version": "2.0", "data": data, "create_date": "2024-9-28@01h02m36s"}


def tavern_book_entries(unticked: bool = True) -> list[dict[str, Any]]:
    """The card book of X6: keys SillyTavern matches as text although ``use_regex`` is true; with
    ``unticked``, entry 1's delay-until-recursion box was ticked and unticked again (false)."""
    pip_ext: dict[str, Any] = {"match_whole_words": True}
    if unticked:
        pip_ext["delay_until_recursion"] = False
    return [
        exported_book_entry(0, ["Marigold"], "Marigold is the ferry cat."),
        exported_book_entry(1, ["pip"], "Pip is the ferry's dog.", extensions=pip_ext),
        exported_book_entry(2, [":)"], "Smiles are answered in kind."),
        exported_book_entry(3, ["+1"], "A vote was cast."),
        exported_book_entry(4, ["(sigh"], "Someone is weary."),
        exported_book_entry(5, ["[REDACTED]"], "The file is sealed."),
        exported_book_entry(6, ["/(unclosed/"], "A key that does not compile is text."),
        exported_book_entry(7, ["/ferr(y|ies)/i"], "Ferries run hourly."),
        # The delay-until-recursion box ticked with level 2, then exported (``?? false`` otherwise).
        exported_book_entry(8, ["harbour"], "The harbour wall is old.", extensions={"delay_until_recursion": 2}),
    ]


def card_png(card: dict[str, Any]) -> bytes:
    """The card as SillyTavern writes its PNG: the V2 JSON in the ``chara`` chunk only."""
    return samples.png({"chara": samples.b64(card)})


def world_info_bytes(touched: bool = True) -> bytes:
    return json.dumps(editor_world_info(touched)).encode()
