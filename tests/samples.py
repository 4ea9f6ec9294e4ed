"""Sample files for the import tests, built here: card PNGs (Pillow), lorebooks, chats, exports.

Every sample is written from scratch for these tests; the shapes follow the public formats
(character card V2/V3, SillyTavern World Info and chat JSONL, ChatGPT and Claude exports).
"""

from __future__ import annotations

import base64
import io
import json
import zipfile
from typing import Any

from PIL import Image, PngImagePlugin


def card_v3(name: str = "Mira Vale", book: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": name,
        "description": "{{char}} keeps the lighthouse on Gull Rock and writes letters to {{user}}.",
        "personality": "dry wit, patient, notices the weather before anyone else",
        "scenario": "A winter storm has cut the island off for a week.",
        "first_mes": "*sets the kettle on* You made it before the tide turned.",
        "mes_example": "<START>\n{{user}}: Any ships?\n{{char}}: One, far out. It will keep.",
        "creator_notes": "Works best with slow, quiet scenes.",
        "system_prompt": "Write as {{char}}, in the first person.",
        "post_history_instructions": "Keep replies under three paragraphs.",
        "alternate_greetings": ["*waves from the gallery* Up here!"],
        "tags": ["lighthouse", "slice of life"],
        "creator": "sample-author",
        "character_version": "1.2",
        "extensions": {"talkativeness": "0.4", "fav": False, "world": "Gull Rock"},
        "group_only_greetings": [],
        "nickname": "Mira",
    }
    if book:
        data["character_book"] = {
            "name": "Gull Rock",
            "scan_depth": 3,
            "token_budget": 400,
            "recursive_scanning": True,
            "extensions": {},
            "entries": [
                {"id": 1, "keys": ["lighthouse", "the lamp"], "secondary_keys": ["storm", "fog"],
                 "content": "The Gull Rock lamp is a 1902 Fresnel lens; Mira polishes it every dusk.",
                 "enabled": True, "insertion_order": 50, "constant": False, "comment": "The lamp",
                 "selective": True, "use_regex": False,
                 "extensions": {"position": 1, "sticky": 2, "cooldown": 1, "selectiveLogic": 0,
                                "probability": 100, "useProbability": True, "depth": 4, "group": "lamp"}},
                {"id": 2, "keys": [], "content": "Gull Rock is two miles off the coast.", "enabled": True,
                 "insertion_order": 10, "constant": True, "comment": "Island", "extensions": {}},
                {"id": 3, "keys": ["/ship(s)? (at|on) (the )?horizon/i"], "content": "Ships pass at dawn.",
                 "enabled": False, "insertion_order": 70, "use_regex": False, "extensions": {}},
            ],
        }
    return {"spec": "chara_card_v3", "spec_version": "3.0", "data": data}


def card_v2(name: str = "Old Tom") -> dict[str, Any]:
    data = {"name": name, "description": "A retired ferryman.", "personality": "gruff", "scenario": "The pier.",
            "first_mes": "Evening.", "mes_example": "", "creator_notes": "", "system_prompt": "",
            "post_history_instructions": "", "alternate_greetings": [], "tags": ["sea"], "creator": "",
            "character_version": "", "extensions": {}}
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": data, "name": name,
            "description": data["description"]}


def b64(payload: Any) -> str:
    return base64.b64encode(json.dumps(payload).encode("utf-8")).decode("ascii")


def png(chunks: dict[str, str], size: tuple[int, int] = (48, 64), colour=(20, 60, 90)) -> bytes:
    image = Image.new("RGB", size, colour)
    info = PngImagePlugin.PngInfo()
    for key, value in chunks.items():
        info.add_text(key, value)
    out = io.BytesIO()
    image.save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def card_png(card: dict[str, Any] | None = None, *, v2: dict[str, Any] | None = None) -> bytes:
    chunks = {}
    if v2 is not None:
        chunks["chara"] = b64(v2)
    if card is not None:
        chunks["ccv3"] = b64(card)
    return png(chunks)


def png_chunks(data: bytes) -> dict[str, Any]:
    """The decoded JSON of a PNG's text chunks."""
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        return {k: json.loads(base64.b64decode(v)) for k, v in image.text.items()}


def lorebook() -> dict[str, Any]:
    def entry(uid: int, **fields: Any) -> dict[str, Any]:
        base = {"uid": uid, "key": [], "keysecondary": [], "comment": "", "content": "", "constant": False,
                "vectorized": False, "selective": True, "selectiveLogic": 0, "addMemo": True, "order": 100,
                "position": 0, "disable": False, "excludeRecursion": False, "preventRecursion": False,
                "delayUntilRecursion": 0, "probability": 100, "useProbability": True, "depth": 4, "group": "",
                "groupOverride": False, "groupWeight": 100, "scanDepth": None, "caseSensitive": None,
                "matchWholeWords": None, "useGroupScoring": None, "automationId": "", "role": None,
                "sticky": 0, "cooldown": 0, "delay": 0, "displayIndex": uid, "characterFilter":
                    {"isExclude": False, "names": [], "tags": []}, "triggers": [], "outletName": ""}
        base.update(fields)
        return base

    entries = [
        entry(0, key=["Harbour Master", "harbourmaster"], content="Jonah Pike runs the harbour; he owes Mira a favour.",
              comment="Jonah", order=120),
        entry(1, key=["festival"], keysecondary=["lantern", "boats"], selectiveLogic=3,
              content="The lantern festival floats paper boats at midwinter.", comment="Festival AND ALL"),
        entry(2, key=["tide"], keysecondary=["storm"], selectiveLogic=2, content="Spring tides flood the causeway.",
              comment="Tide NOT ANY"),
        entry(3, key=["Gull Rock"], content="Gull Rock has a lighthouse and one pub.", constant=True, order=5),
        entry(4, key=["/\\bsea ?glass\\b/i"], content="Mira collects sea glass in a jar.", comment="regex"),
        entry(5, key=["Pike"], caseSensitive=True, content="Pike is a surname on the island, not the fish.",
              comment="case"),
        entry(6, key=["gull"], matchWholeWords=False, content="Gulls nest on the lamp gallery.", comment="partial"),
        entry(7, key=["ghost"], sticky=2, cooldown=2, content="The keeper's ghost is said to walk in fog.",
              comment="sticky"),
        entry(8, key=["letters"], delay=3, content="Mira's letters are kept in a tin box.", comment="delay"),
        entry(9, key=["tin box"], content="The tin box once held biscuits from the mainland.",
              comment="recursion target", excludeRecursion=False),
        entry(10, key=["dice"], probability=0, useProbability=True, content="Never shows.", comment="p0"),
        entry(11, key=["C++ club"], content="The island's programming club meets on Tuesdays.", comment="punct"),
    ]
    return {"name": "Gull Rock Lore", "scan_depth": 2, "token_budget": 500,
            "entries": {str(e["uid"]): e for e in entries}}


def st_chat(character: str = "Mira Vale", user: str = "Sam") -> bytes:
    lines = [
        {"user_name": user, "character_name": character, "create_date": "2024-03-02@18h04m11s",
         "chat_metadata": {"note_prompt": "", "integrity": "9c2d"}},
        {"name": character, "is_user": False, "is_system": False, "send_date": "March 2, 2024 6:04pm",
         "mes": "*sets the kettle on* You made it before the tide turned.", "extra": {}},
        {"name": user, "is_user": True, "is_system": False, "send_date": "March 2, 2024 6:05pm",
         "mes": "Barely. My sister Ada sends her love; she is allergic to cats.", "extra": {}},
        {"name": "System", "is_user": False, "is_system": True, "send_date": "March 2, 2024 6:05pm",
         "mes": "[Hidden system note]", "extra": {"type": "narrator"}},
        {"name": character, "is_user": False, "is_system": False, "send_date": "2024-03-02T18:06:30.000Z",
         "mes": "Then the lighthouse cat stays upstairs.", "extra": {"api": "openai", "model": "m"},
         "swipe_id": 1, "swipes": ["The cat can go outside.", "Then the lighthouse cat stays upstairs."],
         "swipe_info": [{"send_date": "March 2, 2024 6:06pm", "extra": {}},
                        {"send_date": "March 2, 2024 6:06pm", "extra": {}}]},
        {"name": user, "is_user": True, "is_system": False, "send_date": 1709403000000,
         "mes": "I prefer tea without sugar, by the way.", "extra": {}},
    ]
    return "\n".join(json.dumps(line) for line in lines).encode("utf-8") + b"\n"


def chatgpt_conversations() -> list[dict[str, Any]]:
    def node(node_id, parent, role, text, children=(), t=1_700_000_000, **message_fields):
        message = None if role is None else {
            "id": node_id, "author": {"role": role}, "create_time": t,
            "content": {"content_type": message_fields.pop("content_type", "text"), "parts": [text]},
            "metadata": message_fields.pop("metadata", {}), "recipient": message_fields.pop("recipient", "all")}
        return {"id": node_id, "parent": parent, "children": list(children), "message": message}

    code = {"id": "code", "author": {"role": "assistant"}, "create_time": 1_700_000_030, "recipient": "python",
            "content": {"content_type": "code", "language": "python", "text": "print(secret_tool_code)"},
            "metadata": {}}
    mapping = {
        "root": node("root", None, None, "", ["sys"]),
        "sys": node("sys", "root", "system", "HIDDEN SYSTEM PROMPT", ["u1"],
                    metadata={"is_visually_hidden_from_conversation": True}),
        "u1": node("u1", "sys", "user", "My brother Felix moves to Lisbon on 14 May 2024.", ["c1"]),
        "c1": {"id": "c1", "parent": "u1", "children": ["t1"], "message": code},
        "t1": node("t1", "c1", "tool", "TOOL OUTPUT 42", ["a1"], 1_700_000_040),
        "a1": node("a1", "t1", "assistant", "Lisbon in spring will suit Felix.", [], 1_700_000_060),
    }
    return [{"id": "conv-1", "conversation_id": "conv-1", "title": "Felix moving", "create_time": 1_700_000_000,
             "mapping": mapping, "current_node": "a1"}]


def chatgpt_zip(extra: dict[str, bytes] | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("conversations.json", json.dumps(chatgpt_conversations()))
        z.writestr("user.json", json.dumps({"id": "user-1"}))
        z.writestr("chat.html", "<html></html>")
        for name, data in (extra or {}).items():
            z.writestr(name, data)
    return out.getvalue()


def claude_conversations() -> list[dict[str, Any]]:
    return [{
        "uuid": "c-0001", "name": "Garden plans", "created_at": "2024-04-10T09:00:00.000000+00:00",
        "updated_at": "2024-04-10T09:05:00.000000+00:00", "account": {"uuid": "acc-1"},
        "chat_messages": [
            {"uuid": "m1", "sender": "human", "text": "I love growing tomatoes; my daughter Iris helps.",
             "created_at": "2024-04-10T09:00:00.000000+00:00", "content": [
                 {"type": "text", "text": "I love growing tomatoes; my daughter Iris helps."}],
             "attachments": [], "files": []},
            {"uuid": "m2", "sender": "assistant", "text": "",
             "created_at": "2024-04-10T09:01:00.000000+00:00", "content": [
                 {"type": "text", "text": "Tomatoes with Iris sounds lovely."},
                 {"type": "tool_use", "name": "repl", "input": {"code": "console.log(HIDDEN_TOOL)"}},
                 {"type": "tool_result", "content": [{"type": "text", "text": "TOOL RESULT"}]}],
             "attachments": [], "files": []},
        ]}]
