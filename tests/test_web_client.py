"""The daily client's server and library side (W1-W7): front-end files, alternatives, personas, titles."""

from __future__ import annotations

import httpx

from hearth import Hearth, Settings
from hearth.server import create_app
from tests.test_server import serve_in_thread


def test_w1_missing_front_end_packages_answer_a_clear_503(tmp_path):
    settings = Settings.resolve({"home": str(tmp_path / "home"), "web_vendor_dir": str(tmp_path / "nothing")},
                                environ={})
    with Hearth(settings) as hearth, serve_in_thread(create_app(settings, hearth)) as base:
        page = httpx.get(base + "/")
        assert page.status_code == 503
        assert "front-end packages are missing" in page.text and "npm ci" in page.text
        assert httpx.get(base + "/api/personas").status_code == 200  # the API still answers


# -- W2: stop, regenerate, swipe, edit (the library) ------------------------------------------------
import pytest  # noqa: E402

from hearth.errors import Conflict, InvalidInput, NotFound  # noqa: E402


def sent_texts(request):
    return [m.content for m in request.messages if m.role in ("user", "assistant")]


def visible(me, conversation_id):
    return [m.content for m in me.conversations.messages(conversation_id)]


def test_w2_regenerated_replies_are_kept_and_the_chosen_one_is_what_later_requests_see(me, persona, provider):
    chat = me.new_conversation(persona.id)
    first = me.send(chat.id, "Hello there")
    assert first.assistant_message.content == "Reply 1"
    second = me.regenerate(chat.id)
    # The regeneration answered the same message without seeing the reply it replaces.
    assert sent_texts(provider.requests[1])[-1] == "Hello there" and "Reply 1" not in sent_texts(provider.requests[1])
    assert second.assistant_message.id == first.assistant_message.id  # one turn, two versions
    assert visible(me, chat.id) == ["Hello there", "Reply 2"]
    versions = me.alternatives(first.assistant_message.id)
    assert [(a.position, a.content, a.chosen) for a in versions] == [(0, "Reply 1", False), (1, "Reply 2", True)]

    # Swipe back to the first version: the thread and the next request carry it.
    chosen = me.choose_alternative(first.assistant_message.id, 0)
    assert chosen.content == "Reply 1" and chosen.metadata["chosen"] == 0 and chosen.metadata["alternatives"] == 2
    me.send(chat.id, "And now?")
    assert sent_texts(provider.requests[-1])[-3:] == ["Hello there", "Reply 1", "And now?"]
    assert "Reply 2" not in sent_texts(provider.requests[-1])

    # Only the last reply can be regenerated; bad positions and other users' ids change nothing.
    with pytest.raises(InvalidInput):
        me.choose_alternative(first.assistant_message.id, 7)
    other = me.hearth.users.create("bob")
    them = me.hearth.scope(other.id)
    with pytest.raises(NotFound):
        them.alternatives(first.assistant_message.id)
    with pytest.raises(NotFound):
        them.choose_alternative(first.assistant_message.id, 1)
    assert me.conversations.message(first.assistant_message.id).content == "Reply 1"
    # The ledger holds every version; its events carry numbers only.
    with me.store.read() as conn:
        kinds = [(r[0], r[1]) for r in conn.execute(
            "SELECT kind, payload FROM events WHERE conversation_id = ? AND kind LIKE 'message.%' ORDER BY id",
            (chat.id,))]
    assert [k for k, _ in kinds] == ["message.regenerated", "message.alternative_chosen"]
    assert all("Reply" not in payload for _, payload in kinds)


def test_w2_editing_the_last_message_keeps_the_original_and_continues_from_the_edit(me, persona, provider):
    chat = me.new_conversation(persona.id)
    me.send(chat.id, "I like tea")
    latest = me.send(chat.id, "Tea is best")
    edited = me.edit(chat.id, latest.user_message.id, "Coffee is best")
    assert edited.user_message.id == latest.user_message.id
    assert visible(me, chat.id) == ["I like tea", "Reply 1", "Coffee is best", "Reply 3"]
    assert sent_texts(provider.requests[-1])[-1] == "Coffee is best"
    assert "Tea is best" not in sent_texts(provider.requests[-1]) and "Reply 2" not in sent_texts(provider.requests[-1])
    assert [a.content for a in me.alternatives(latest.user_message.id)] == ["Tea is best", "Coffee is best"]
    assert [a.content for a in me.alternatives(latest.assistant_message.id)] == ["Reply 2", "Reply 3"]

    first_user = me.conversations.messages(chat.id)[0]
    with pytest.raises(Conflict, match="only your last message"):
        me.edit(chat.id, first_user.id, "changed")
    with pytest.raises(NotFound):
        me.edit(chat.id, latest.assistant_message.id, "not mine")
    with pytest.raises(InvalidInput):
        me.edit(chat.id, latest.user_message.id, "   ")
    assert visible(me, chat.id) == ["I like tea", "Reply 1", "Coffee is best", "Reply 3"]


def test_w2_a_stopped_reply_saves_nothing_unless_the_partial_text_is_kept(me, persona, provider):
    chat = me.new_conversation(persona.id)
    stream = me.send_stream(chat.id, "Tell me a story")
    for event in stream:
        if event.type == "delta":
            break
    stream.close()  # what a closed connection does to the server's stream
    assert visible(me, chat.id) == ["Tell me a story"]
    kept = me.keep_partial_reply(chat.id, "Reply ")
    assert kept.role == "assistant" and kept.metadata["partial"] is True
    assert visible(me, chat.id) == ["Tell me a story", "Reply "]

    # A stopped regeneration kept by choice becomes another version of the reply.
    stream = me.regenerate_stream(chat.id)
    for event in stream:
        if event.type == "delta":
            break
    stream.close()
    assert visible(me, chat.id) == ["Tell me a story", "Reply "]
    me.keep_partial_reply(chat.id, "Once upon")
    assert [a.content for a in me.alternatives(kept.id)] == ["Reply ", "Once upon"]
    with pytest.raises(InvalidInput):
        me.keep_partial_reply(chat.id, "")


def test_w2_http_routes_refuse_messages_of_other_threads_and_bad_positions(hearth, me, persona):
    mine = me.new_conversation(persona.id)
    other = me.new_conversation(persona.id)
    reply = me.send(mine.id, "Hello").assistant_message
    with serve_in_thread(create_app(hearth.settings, hearth)) as base:
        path = f"{base}/api/conversations/{other.id}/messages/{reply.id}/alternatives"
        assert httpx.get(path).status_code == 404  # a message of another thread is unknown here
        regenerated = httpx.post(f"{base}/api/conversations/{mine.id}/regenerate", json={})
        assert regenerated.status_code == 200 and "event: done" in regenerated.text
        versions = httpx.get(f"{base}/api/conversations/{mine.id}/messages/{reply.id}/alternatives").json()
        assert [v["chosen"] for v in versions] == [False, True]
        bad = httpx.post(f"{base}/api/conversations/{mine.id}/messages/{reply.id}/alternatives/9/choose")
        assert bad.status_code == 400 and bad.json()["error"]
        chosen = httpx.post(f"{base}/api/conversations/{mine.id}/messages/{reply.id}/alternatives/0/choose")
        assert chosen.json()["content"] == "Reply 1"
        empty = httpx.post(f"{base}/api/conversations/{other.id}/regenerate", json={})
        assert empty.status_code == 409
