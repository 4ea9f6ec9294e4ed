"""G2: one user's data never reaches another user through anything a Scope offers.

The test fills one user's deployment with data carrying a secret word next to a marker word, then walks the public
surface of a second user's scope by introspection (every public attribute that is a Hearth object,
every public method on it) and calls each method with the first user's ids and the marker as query
text. Each call must answer exactly as it does for ids that exist nowhere, and return nothing that
carries the secret; afterwards the first user's data must be unchanged. A method the
walk cannot fill in must be listed in ``PROBED_ELSEWHERE`` with the test that covers it, so a new
method cannot slip past unprobed.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from hearth import Hearth, HearthError, NotFound, Settings
from hearth.interop.client_chats import ClientMessage
from hearth.memory.helpers import helper_for
from hearth.prompt.dynamic import Turn
from hearth.providers.base import ToolCall
from hearth.thread.files import Library
from hearth.thread.tools import ToolContext
from tests.conftest import RecordingProvider

MARKER = "zephyrquill"  # a word in the first user's data, which the second user searches for
SECRET = "ozymandrith"  # next to it everywhere in the first user's data, and never typed by the second
PROBE = "probe from the second user"
UNKNOWN_ID = 987_654

# A Scope holds neither the deployment nor its store publicly; the record classes it is made of
# each keep the store handle they query through, which is not user data.
NOT_WALKED = {"store"}

# Methods whose arguments the walk cannot make up, and the test that probes them instead.
PROBED_ELSEWHERE = {
    "dynamic.collect": "test_g2_dynamic_context_and_tools_refuse_another_users_turn",
    "dynamic.render": "pure rendering of blocks the caller already holds",
    "dynamic.register": "adds a layer to this scope only",
    "toolbox.run": "test_g2_dynamic_context_and_tools_refuse_another_users_turn",
    "toolbox.add": "adds a tool to this scope only",
    "live_context.set": "keyword-only values; its conversation check is the same get() probed here",
    "books.set_scope": "test_g2_book_scopes_refuse_another_users_personas",
    "books.for_character": "test_g2_book_scopes_refuse_another_users_personas",
    "books.for_world_info": "test_g2_book_scopes_refuse_another_users_personas",
    "books.restore": "test_g2_book_scopes_refuse_another_users_personas",
}


@pytest.fixture
def owner_data(hearth, me):
    """The first user's data, each piece carrying the marker, and the ids a prober would try."""
    persona = me.personas.create("quillon", "Quillon", identity=f"I am Quillon. {MARKER} {SECRET}.")
    folder = me.folders.create(f"Folder {MARKER} {SECRET}")
    conversation = me.conversations.create(persona.id, title=f"Talk {MARKER} {SECRET}", folder_id=folder.id)
    me.send(conversation.id, f"Remember the {MARKER} {SECRET} by the door.")
    me.send(conversation.id, f"And the {MARKER} {SECRET} again, please.")
    memory = me.memories.add(f"The {MARKER} {SECRET} lives in the hall.")
    fragment = me.layers.fragments.add([MARKER], f"A {MARKER} {SECRET} is a small brass bell.")
    field = me.layers.household.add_field(f"Where {MARKER} {SECRET}", value="home")
    nudge = me.layers.live_context.add_nudge(conversation.id, f"Ask about the {MARKER} {SECRET}.")
    me.layers.live_context.set(conversation.id, mood=f"{MARKER} {SECRET} calm")
    proposal = me.layers.review.propose("memory_add", {"text": f"{MARKER} {SECRET} proposal"}, f"{MARKER} {SECRET} reason")
    me.layers.summaries.refresh(conversation.id, helper_for(hearth), force=True)
    job_id = me.layers.review.request(conversation.id)
    Library(hearth.settings.home, me.user_id).root.mkdir(parents=True, exist_ok=True)
    (Library(hearth.settings.home, me.user_id).root / "notes.md").write_text(f"{MARKER} {SECRET} notes")
    message = me.conversations.messages(conversation.id)[-1]
    document = me.archive.add_text(f"Notes {MARKER} {SECRET}", f"The {MARKER} {SECRET} rang twice.").document
    contact = me.contacts.trust("sms", "+1 555 010 0199", persona.id)
    activation = me.activations.add(persona.id, "morning", at="08:00", note=f"{MARKER} {SECRET}")
    entry_id = me.search(MARKER, embed=False).log_id
    preset = me.presets.create(MARKER, f"Talk about the {MARKER} {SECRET}.")
    ids = {
        "conversation_id": conversation.id, "source_conversation_id": conversation.id,
        "persona_id": persona.id, "folder_id": folder.id, "memory_id": memory.id,
        "fragment_id": fragment.id, "proposal_id": proposal.id if proposal else 1, "job_id": job_id,
        "nudge_id": nudge.id, "message_id": message.id, "key": field.id, "document_id": document.id,
        "value_id": me.layers.household.history(field.id)[0].id, "span_id": me.timeline.open_spans()[0].id, "contact_id": contact.id, "activation_id": activation.id, "entry_id": entry_id, "ident": conversation.id,
        "preset_id": preset.id,
        # Objects of the first user's, handed over whole: they must be refused by their id.
        "persona": persona, "message": message,
    }
    return {"persona": persona, "conversation": conversation, "field": field, "ids": ids}


def fingerprint(scope) -> str:
    """Everything the first user can read, so a write by the second user would show."""
    conversations = scope.conversations.list(include_trashed=True)
    parts: list[Any] = [
        scope.personas.list(), scope.folders.list(), conversations, scope.memories.list(),
        scope.layers.fragments.list(), scope.layers.household.fields(), scope.layers.review.list(status=None),
        scope.jobs.list(), scope.layers.settings.all(),
    ]
    for c in conversations:
        parts += [scope.conversations.messages(c.id, visible_only=False), scope.layers.live_context.get(c.id),
                  scope.layers.summaries.history(c.id)]
    return repr(parts)


def walk(root: Any) -> list[tuple[str, Any]]:
    """(dotted name, bound method) for every public method reachable from ``root``, in name order."""
    found: list[tuple[str, Any]] = []
    kept: list[Any] = []  # keeps every visited object alive, so no id is reused during the walk
    seen: set[int] = set()

    def visit(obj: Any, prefix: str) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        kept.append(obj)
        for name in sorted(dir(obj)):
            if name.startswith("_") or name in NOT_WALKED:
                continue
            value = getattr(obj, name)
            dotted = f"{prefix}{name}"
            if inspect.ismethod(value) or inspect.isfunction(value):
                found.append((dotted, value))
            elif type(value).__module__.startswith("hearth."):
                visit(value, dotted + ".")

    visit(root, "")
    return found


def rendered(value: Any) -> str:
    """Everything a result carries, as text (iterators are drained, dataclasses unfolded)."""
    if isinstance(value, Iterator):
        value = list(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    return json.dumps(value, default=repr, ensure_ascii=False)


def arguments(method: Any, ids: dict[str, Any], helper: Any, *, optional_ids: bool) -> dict[str, Any] | None:
    """Arguments that aim a call at the first user's data, or None when the walk cannot fill one in."""
    reads = method.__name__ in ("match", "search", "get", "list", "by_name", "field", "history", "as_of")
    values = {
        "query": MARKER, "text": MARKER if reads else PROBE, "name": "quillon" if reads else "probe",
        "helper": helper, "value": "away", "position": 1, "version": 1, "when": "2100-01-01",
        "stale_minutes": 60, "kind": {"propose": "memory_add", "add": "morning"}.get(method.__name__, "probe.kind"),
        "payload": {"text": PROBE}, "reason": PROBE, "title": PROBE, "role": "user", "content": PROBE,
        "shielded": True, "hidden": True, "retry_key": "probe-key", "items": [{"text": PROBE}],
        "triggers": ["probe"], "definition": PROBE, "conversation_ids": [ids["conversation_id"]],
        "data": PROBE.encode(), "model": "quillon", "messages": [ClientMessage("user", PROBE)], "channel": "sms",
        "address": "+1 555 010 0123", "enabled": True, "answers": True, "instruction": PROBE, "metadata": {},
        "fmt": "labelled", "mime": "image/png", "turns": [], "target": "conversation", "token": "probe", "phrase": "probe",
        "threads": "keep", "texts": [PROBE], "tags": ["probe"], "ref": MARKER, "code": "123456",
    }
    kwargs: dict[str, Any] = {}
    for name, param in inspect.signature(method).parameters.items():
        if param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
            continue
        if name in ids and (param.default is param.empty or optional_ids):
            kwargs[name] = ids[name]
        elif param.default is not param.empty:
            continue
        elif name in values:
            kwargs[name] = values[name]
        else:
            return None
    return kwargs


def outcome(method: Any, kwargs: dict[str, Any]) -> tuple[str, str]:
    """What a call answered, with numbers and uuids blanked: ("ok", result) or (error class, message)."""
    try:
        return "ok", re.sub(r"\d+", "N", re.sub(r"\b[0-9a-f]{32}\b", "UUID", rendered(method(**kwargs))))
    except HearthError as exc:
        return type(exc).__name__, re.sub(r"\d+", "N", str(exc))


def test_g2_another_users_scope_answers_exactly_as_in_a_deployment_without_the_owners_data(
        hearth, me, owner_data, tmp_path):
    """The second user's every call, aimed at the first user's ids and words, is compared with the
    same call by a user of a deployment where the first user has no data at all: any difference
    (a listed job, a count, a found row, an id accepted instead of refused) is a leak."""
    other = hearth.scope(hearth.users.create("second").id)
    before = fingerprint(me)
    ids = owner_data["ids"]
    # There, ids that exist nowhere (its own rows would otherwise reuse the owner's numbers).
    unknown = {k: UNKNOWN_ID if isinstance(v, int) else dataclasses.replace(v, id=UNKNOWN_ID) for k, v in ids.items()}
    control_settings = Settings.resolve({"home": str(tmp_path / "control"), "input_token_limit": 32_000}, environ={})
    with Hearth(control_settings, provider=RecordingProvider()) as empty:
        empty.scope()  # the owner exists there too, with nothing
        control = empty.scope(empty.users.create("second").id)
        walked, control_walk = walk(other), walk(control)
        assert [d for d, _ in walked] == [d for d, _ in control_walk]
        probed, unprobed = [], []
        for (dotted, method), (_, twin) in zip(walked, control_walk, strict=True):
            short = dotted if dotted.count(".") < 2 else ".".join(dotted.split(".")[-2:])
            for optional_ids in (False, True):
                kwargs = arguments(method, ids, helper_for(hearth), optional_ids=optional_ids)
                if kwargs is None:
                    if short not in PROBED_ELSEWHERE and dotted not in PROBED_ELSEWHERE:
                        unprobed.append(dotted)
                    break
                answered = outcome(method, kwargs)
                assert SECRET not in answered[1], f"{dotted}({kwargs}) returned the other user's data"
                expected = outcome(twin, arguments(twin, unknown, helper_for(empty), optional_ids=optional_ids) or {})
                assert answered == expected, f"{dotted}({kwargs}) answered {answered}; without the owner's data {expected}"
                probed.append(dotted)
    assert not unprobed, f"public methods the walk could not probe: {unprobed}"
    assert len(set(probed)) > 100  # the walk really reached the layers, jobs, review queue, archive, ...
    assert fingerprint(me) == before


def test_g2_every_object_reached_from_a_scope_is_bound_to_its_user(hearth, me, owner_data):
    other = hearth.scope(hearth.users.create("second").id)
    for scope in (me, other):
        seen: set[int] = set()
        stack: list[tuple[str, Any]] = [("scope", scope)]
        bound = 0
        while stack:
            path, obj = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if hasattr(obj, "user_id"):
                assert obj.user_id == scope.user_id, f"{path} belongs to user {obj.user_id}"
                bound += 1
            for name in dir(obj):
                if name.startswith("_") or name in NOT_WALKED:
                    continue
                value = getattr(obj, name)
                if type(value).__module__.startswith("hearth.") and not inspect.ismethod(value):
                    stack.append((f"{path}.{name}", value))
        assert bound >= 12


def test_g2_dynamic_context_and_tools_refuse_another_users_turn(hearth, me, owner_data, settings):
    """The send path builds turns and tool contexts from the scope; one made for another user is
    refused rather than answered from that user's data."""
    other = hearth.scope(hearth.users.create("second").id)
    conversation = owner_data["conversation"]
    turn = Turn(conn=hearth.store.connection(), user_id=me.user_id, conversation=conversation,
                persona=owner_data["persona"], text=f"the {MARKER}", history=[], settings=settings,
                has_assistant_reply=True)
    with pytest.raises(NotFound):
        other.dynamic.collect(turn)
    assert SECRET in rendered(me.dynamic.collect(turn))  # the owner's own turn does find it
    ctx = ToolContext(hearth.store, me.user_id, conversation.id, owner_data["persona"].id)
    with pytest.raises(NotFound):
        other.toolbox.run(ctx, ToolCall("1", "read_library_file", {"path": "notes.md"}))
    assert SECRET in me.toolbox.run(ctx, ToolCall("1", "read_library_file", {"path": "notes.md"}))
