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
        page = httpx.get(base + "/", timeout=60)  # the first request opens the store
        assert page.status_code == 503
        assert "front-end packages are missing" in page.text and "npm ci" in page.text
        assert httpx.get(base + "/api/personas", timeout=60).status_code == 200  # the API still answers


# -- W2: stop, regenerate, swipe, edit (the library) ------------------------------------------------
import json  # noqa: E402

import pytest  # noqa: E402

from hearth.errors import Conflict, InvalidInput, NotFound  # noqa: E402
from tests.engines import keyword_ids  # noqa: E402


def sent_texts(request):
    return [m.content for m in request.messages if m.role in ("user", "assistant")]


def visible(me, conversation_id):
    return [m.content for m in me.conversations.messages(conversation_id)]


def test_w2_regenerated_replies_are_kept_and_the_chosen_one_is_what_later_requests_see(hearth, me, persona, provider):
    chat = me.conversations.create(persona.id)
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
    other = hearth.users.create("bob")
    them = hearth.scope(other.id)
    with pytest.raises(NotFound):
        them.alternatives(first.assistant_message.id)
    with pytest.raises(NotFound):
        them.choose_alternative(first.assistant_message.id, 1)
    assert me.conversations.message(first.assistant_message.id).content == "Reply 1"
    # The ledger holds every version; its events carry numbers only.
    with hearth.store.read() as conn:
        kinds = [(r[0], r[1]) for r in conn.execute(
            "SELECT kind, payload FROM events WHERE conversation_id = ? AND kind LIKE 'message.%' ORDER BY id",
            (chat.id,))]
    assert [k for k, _ in kinds] == ["message.regenerated", "message.alternative_chosen"]
    assert all("Reply" not in payload for _, payload in kinds)


def test_w2_editing_the_last_message_keeps_the_original_and_continues_from_the_edit(me, persona, provider):
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "I like tea")
    latest = me.send(chat.id, "Tea is best")
    edited = me.edit(chat.id, latest.user_message.id, "Coffee is best")
    assert edited.user_message.id == latest.user_message.id
    assert visible(me, chat.id) == ["I like tea", "Reply 1", "Coffee is best", "Reply 3"]
    assert sent_texts(provider.requests[-1])[-1] == "Coffee is best"
    assert "Tea is best" not in sent_texts(provider.requests[-1]) and "Reply 2" not in sent_texts(provider.requests[-1])
    assert [a.content for a in me.alternatives(latest.user_message.id)] == ["Tea is best", "Coffee is best"]
    # The reply to the original is the branch of version 0: choosing it brings that reply back.
    assert edited.assistant_message.id != latest.assistant_message.id
    me.choose_alternative(latest.user_message.id, 0)
    assert visible(me, chat.id) == ["I like tea", "Reply 1", "Tea is best", "Reply 2"]
    me.choose_alternative(latest.user_message.id, 1)
    assert visible(me, chat.id) == ["I like tea", "Reply 1", "Coffee is best", "Reply 3"]

    with pytest.raises(NotFound):
        me.edit(chat.id, latest.assistant_message.id, "not mine")
    with pytest.raises(InvalidInput):
        me.edit(chat.id, latest.user_message.id, "   ")
    assert visible(me, chat.id) == ["I like tea", "Reply 1", "Coffee is best", "Reply 3"]


def found(me, query, embed=False):
    return [r.text for r in me.search(query, embed=embed, archive=False).results if r.kind == "message"]


def ids(me, conversation_id):
    return [m.id for m in me.conversations.messages(conversation_id)]


def test_w2_editing_an_earlier_message_continues_from_it_and_keeps_the_later_turns_as_a_branch(hearth, me, persona, provider):
    from hearth.records import ledger

    chat = me.conversations.create(persona.id)
    a = me.send(chat.id, "I like tea")
    b = me.send(chat.id, "Tea is best")
    me.send(chat.id, "Tell me more")
    original = visible(me, chat.id)
    original_ids = ids(me, chat.id)
    assert original == ["I like tea", "Reply 1", "Tea is best", "Reply 2", "Tell me more", "Reply 3"]
    with hearth.store.read() as conn:
        events_before = conn.execute("SELECT count(*) FROM events WHERE conversation_id = ?", (chat.id,)).fetchone()[0]

    # Edit the first message: the thread continues from the edit, and the request sees nothing after it.
    edited = me.edit(chat.id, a.user_message.id, "I like coffee")
    assert visible(me, chat.id) == ["I like coffee", "Reply 4"]
    assert sent_texts(provider.requests[-1]) == ["I like coffee"]
    assert [(v.content, v.chosen) for v in me.alternatives(a.user_message.id)] == [
        ("I like tea", False), ("I like coffee", True)]
    me.send(chat.id, "And now?")
    assert sent_texts(provider.requests[-1]) == ["I like coffee", "Reply 4", "And now?"]
    assert not any(w in " ".join(sent_texts(provider.requests[-1])) for w in ("tea", "Tell me more", "Reply 2"))
    # The later turns were never destroyed: their events stay and the ledger check is clean.
    with hearth.store.read() as conn:
        assert conn.execute("SELECT count(*) FROM events WHERE conversation_id = ? AND id IN (%s)"
                            % ",".join("?" * 5), (chat.id, *original_ids[1:])).fetchone()[0] == 5
        assert conn.execute("SELECT count(*) FROM events WHERE conversation_id = ?",
                            (chat.id,)).fetchone()[0] > events_before
        edit_event = conn.execute("SELECT payload FROM events WHERE conversation_id = ? AND kind = 'message.edited'",
                                  (chat.id,)).fetchone()[0]
        assert json.loads(edit_event) == {"message_id": a.user_message.id, "position": 1, "chars": 13, "branched": 5}
        assert ledger.verify(conn).ok
    # Keyword search sees the chosen path only.
    assert found(me, "coffee") == ["I like coffee"]
    assert found(me, "Tell me more") == []

    # Version 0 brings its turns back, with their own ids; the edited path waits in turn.
    me.choose_alternative(a.user_message.id, 0)
    assert visible(me, chat.id) == original and ids(me, chat.id) == original_ids
    me.send(chat.id, "Which one?")
    assert sent_texts(provider.requests[-1])[:6] == original
    assert "I like coffee" not in sent_texts(provider.requests[-1])

    # A branch inside a branch: edit the second message of the restored path, then move between
    # versions of the first; each message keeps its own versions and continuation.
    me.edit(chat.id, b.user_message.id, "Tea is fine")
    assert visible(me, chat.id) == ["I like tea", "Reply 1", "Tea is fine", "Reply 7"]
    me.choose_alternative(a.user_message.id, 1)
    assert visible(me, chat.id) == ["I like coffee", "Reply 4", "And now?", "Reply 5"]
    me.choose_alternative(a.user_message.id, 0)
    assert visible(me, chat.id) == ["I like tea", "Reply 1", "Tea is fine", "Reply 7"]
    me.choose_alternative(b.user_message.id, 0)
    assert visible(me, chat.id) == original + ["Which one?", "Reply 6"]
    assert [v.content for v in me.alternatives(b.user_message.id)] == ["Tea is best", "Tea is fine"]
    with hearth.store.read() as conn:
        assert ledger.verify(conn).ok
        assert keyword_ids(conn, "messages_fts", "coffee") == []

    # Only the person's own messages of this thread can be edited; another user's ids are unknown.
    with pytest.raises(NotFound):
        me.edit(chat.id, edited.assistant_message.id, "not mine")
    them = hearth.scope(hearth.users.create("bob").id)
    with pytest.raises(NotFound):
        them.edit(chat.id, a.user_message.id, "mine now")
    with pytest.raises(NotFound):
        them.choose_alternative(a.user_message.id, 1)
    assert visible(me, chat.id) == original + ["Which one?", "Reply 6"]


def test_w2_s7_switching_versions_embeds_the_chosen_text_again_so_search_finds_only_it(hearth, me, persona, provider):
    import numpy as np

    from hearth.ops.jobs import Worker
    from hearth.retrieval.semantic import embed_texts, message_text
    from hearth.retrieval.vectors import from_blob

    def say(text):
        return lambda request: iter([StreamEvent("text", text=text)])

    chat = me.conversations.create(persona.id)
    provider.replies = [say("The sea was calm."), say("The lighthouse keeper polished the brass lamp."),
                        say("My grandmother baked a chocolate cake with cherries.")]
    first = me.send(chat.id, "What happened at the coast?")
    me.send(chat.id, "Anything else?")
    reply = me.regenerate(chat.id).assistant_message
    Worker(hearth).run_once()
    me.choose_alternative(reply.id, 0)
    with hearth.store.read() as conn:  # the old vector went with the switch; a job brings the new one
        assert conn.execute("SELECT count(*) FROM message_embeddings WHERE message_id = ?", (reply.id,)).fetchone()[0] == 0
    Worker(hearth).run_once()

    chosen, other = "The lighthouse keeper polished the brass lamp.", "My grandmother baked a chocolate cake with cherries."
    wanted = embed_texts(hearth.embedder, [message_text("Elion Voicefire said:", t, "Anything else?") for t in (chosen, other)])
    with hearth.store.read() as conn:
        blob = conn.execute("SELECT embedding FROM message_embeddings WHERE message_id = ?", (reply.id,)).fetchone()[0]
    stored = from_blob(blob, wanted.shape[1])
    assert float(np.dot(stored, wanted[0])) > 0.999 and float(np.dot(stored, wanted[1])) < 0.9
    assert found(me, "lighthouse keeper brass lamp", embed=True)[0] == chosen
    assert found(me, "chocolate cake cherries") == []  # keyword: the un-chosen words are nowhere

    # An edit of an earlier message: the turns that come back are embedded again too.
    me.edit(chat.id, first.user_message.id, "What happened in the mountains?")
    me.choose_alternative(first.user_message.id, 0)
    Worker(hearth).run_once()
    with hearth.store.read() as conn:
        turns = conn.execute("SELECT count(*) FROM messages WHERE conversation_id = ? AND kind = 'chat'",
                             (chat.id,)).fetchone()[0]
        vectors = conn.execute("SELECT count(*) FROM message_embeddings e JOIN messages m ON m.id = e.message_id"
                               " WHERE m.conversation_id = ?", (chat.id,)).fetchone()[0]
    assert turns == vectors == 4
    assert found(me, "mountains") == []
    assert found(me, "lighthouse keeper brass lamp", embed=True)[0] == chosen


def test_w2_b4_forgetting_an_edited_message_forgets_the_turns_kept_after_it(hearth, me, persona):
    from hearth.records import ledger
    from hearth.records.forget import verify
    from tests.test_forget import CANARY, drain, forget

    chat = me.conversations.create(persona.id)
    first = me.send(chat.id, "Hello there").user_message
    me.send(chat.id, f"Between us, the safe code is {CANARY}")
    me.edit(chat.id, first.id, "Hi")  # the canary turn and its reply wait as the branch of version 0
    me.edit(chat.id, first.id, "Hey")  # and the reply to "Hi" as the branch of version 1
    with hearth.store.read() as conn:
        assert conn.execute("SELECT count(*) FROM branch_messages WHERE conversation_id = ?", (chat.id,)).fetchone()[0] == 4
    assert me.forget.preview("message", first.id).counts["messages"] == 5  # what the receipt will say
    receipt = forget(me, "message", first.id)
    assert receipt.counts["messages"] == 5  # the message and the four turns kept after its versions
    with hearth.store.read() as conn:
        assert conn.execute("SELECT count(*) FROM message_branches WHERE conversation_id = ?", (chat.id,)).fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM branch_messages WHERE conversation_id = ?", (chat.id,)).fetchone()[0] == 0
        assert ledger.verify(conn).ok
    assert visible(me, chat.id) == ["Reply 4"]  # what followed the forgotten message in the chosen path stays
    drain(hearth)
    assert verify(hearth.store, CANARY).clean


def test_w2_a_stopped_reply_saves_nothing_unless_the_partial_text_is_kept(me, persona, provider):
    chat = me.conversations.create(persona.id)
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
    mine = me.conversations.create(persona.id)
    other = me.conversations.create(persona.id)
    reply = me.send(mine.id, "Hello").assistant_message
    with serve_in_thread(create_app(hearth.settings, hearth)) as base:
        path = f"{base}/api/conversations/{other.id}/messages/{reply.id}/alternatives"
        assert httpx.get(path).status_code == 404  # a message of another thread is unknown here
        regenerated = httpx.post(f"{base}/api/conversations/{mine.id}/regenerate", json={})
        assert regenerated.status_code == 200 and "event: done" in regenerated.text
        versions = httpx.get(f"{base}/api/conversations/{mine.id}/messages/{reply.id}/alternatives").json()
        assert [v["chosen"] for v in versions] == [False, True]
        bad = httpx.post(f"{base}/api/conversations/{mine.id}/messages/{reply.id}/alternatives/9/choose")
        assert bad.status_code == 422 and bad.json()["error"]
        chosen = httpx.post(f"{base}/api/conversations/{mine.id}/messages/{reply.id}/alternatives/0/choose")
        assert chosen.json()["content"] == "Reply 1"
        empty = httpx.post(f"{base}/api/conversations/{other.id}/regenerate", json={})
        assert empty.status_code == 409


def test_w2_http_edit_of_an_earlier_message_streams_the_new_reply_and_choosing_brings_the_branch_back(hearth, me, persona):
    chat = me.conversations.create(persona.id)
    other = me.conversations.create(persona.id)
    first = me.send(chat.id, "I like tea").user_message
    me.send(chat.id, "Tell me more")
    with serve_in_thread(create_app(hearth.settings, hearth)) as base:
        api = f"{base}/api/conversations/{chat.id}"
        edited = httpx.post(f"{api}/messages/{first.id}/edit", json={"text": "I like coffee"}, timeout=60)
        assert edited.status_code == 200 and "event: saved" in edited.text and "event: done" in edited.text
        shown = httpx.get(f"{api}/messages").json()["messages"]
        assert [m["content"] for m in shown] == ["I like coffee", "Reply 3"]
        assert shown[0]["metadata"]["alternatives"] == 2 and shown[0]["metadata"]["chosen"] == 1
        versions = httpx.get(f"{api}/messages/{first.id}/alternatives").json()
        assert [(v["content"], v["chosen"]) for v in versions] == [("I like tea", False), ("I like coffee", True)]
        back = httpx.post(f"{api}/messages/{first.id}/alternatives/0/choose")
        assert back.status_code == 200 and back.json()["content"] == "I like tea"
        assert [m["content"] for m in httpx.get(f"{api}/messages").json()["messages"]] == [
            "I like tea", "Reply 1", "Tell me more", "Reply 2"]
        # Another thread's message, a reply and an empty text change nothing.
        assert httpx.post(f"{base}/api/conversations/{other.id}/messages/{first.id}/edit",
                          json={"text": "x"}).status_code == 404
        reply_id = httpx.get(f"{api}/messages").json()["messages"][1]["id"]
        assert httpx.post(f"{api}/messages/{reply_id}/edit", json={"text": "x"}).json()["error"]
        empty = httpx.post(f"{api}/messages/{first.id}/edit", json={"text": "  "})
        assert empty.status_code in (400, 422) and empty.json()["error"]
        assert [m["content"] for m in httpx.get(f"{api}/messages").json()["messages"]] == [
            "I like tea", "Reply 1", "Tell me more", "Reply 2"]


# -- W4: titles, rename, a paged and filtered thread list, folders renamed and deleted ---------------
from hearth.providers.base import StreamEvent  # noqa: E402
from hearth.thread.titles import offline_title  # noqa: E402


def test_w4_threads_are_titled_from_the_first_exchange_and_a_given_title_is_kept(hearth, me, persona):
    chat = me.conversations.create(persona.id)
    me.send(chat.id, "**Plans** for the garden this spring, with tomatoes and beans and a small pond by the fence")
    title = me.conversations.get(chat.id).title
    assert title == "Plans for the garden this spring, with tomatoes and beans…"
    assert len(title) <= 61 and title == offline_title("Plans for the garden this spring, with tomatoes and beans "
                                                       "and a small pond by the fence")
    me.send(chat.id, "Another message")
    assert me.conversations.get(chat.id).title == title  # only the first exchange names it
    named = me.conversations.create(persona.id, title="My own title")
    me.send(named.id, "Hello")
    assert me.conversations.get(named.id).title == "My own title"
    with hearth.store.read() as conn:
        payloads = [r[0] for r in conn.execute("SELECT payload FROM events WHERE kind = 'conversation.titled'")]
    assert len(payloads) == 1 and "garden" not in payloads[0]  # numbers only


def test_w4_model_title_job_replaces_the_offline_title_unless_renamed(hearth, me, persona, provider):
    from hearth.memory.helpers import ModelHelper
    from hearth.thread import titles

    chat = me.conversations.create(persona.id)
    reply = me.send(chat.id, "What should we cook tonight")
    payload = {"conversation_id": chat.id, "user_message_id": reply.user_message.id,
               "reply_id": reply.assistant_message.id}
    provider.replies.append(lambda request: iter([StreamEvent("text", text='{"title": "Dinner ideas"}')]))
    titles.title_job(hearth.context(me.user_id), payload, ModelHelper(provider))
    assert me.conversations.get(chat.id).title == "Dinner ideas"
    assert "What should we cook tonight" in provider.requests[-1].messages[1].content
    me.conversations.rename(chat.id, "Mine")
    titles.title_job(hearth.context(me.user_id), payload, ModelHelper(provider))
    assert me.conversations.get(chat.id).title == "Mine"


def test_w4_thread_list_pages_by_cursor_and_filters_by_text_persona_and_folder(me, persona):
    other = me.personas.create("sage", "Sage")
    folder = me.folders.create("Trips")
    made = []
    for i in range(7):
        made.append(me.conversations.create(persona.id if i % 2 else other.id, title=f"Walk {i} 100%_done",
                                            folder_id=folder.id if i == 3 else None))
    pages, before = [], None
    while True:
        page = me.conversations.list(limit=3, before=before)
        if not page:
            break
        pages.append([c.id for c in page])
        before = (page[-1].updated_at, page[-1].id)
    flat = [i for p in pages for i in p]
    assert flat == [c.id for c in me.conversations.list()] and len(set(flat)) == 7  # no gaps, no repeats
    assert [c.title for c in me.conversations.list(text="Walk 4")] == ["Walk 4 100%_done"]
    assert len(me.conversations.list(text="100%_")) == 7 and me.conversations.list(text="0%x") == []
    assert {c.persona_id for c in me.conversations.list(persona_id=other.id)} == {other.id}
    assert [c.title for c in me.conversations.list(folder_id=folder.id)] == ["Walk 3 100%_done"]
    assert len(me.conversations.list(loose=True)) == 6


def test_w4_folders_are_renamed_and_deleted_with_their_threads_kept_or_trashed(me, persona):
    keep = me.folders.create("Keep")
    gone = me.folders.create("Gone", hidden=True)
    a = me.conversations.create(persona.id, title="A", folder_id=keep.id)
    b = me.conversations.create(persona.id, title="B", folder_id=gone.id)
    assert me.folders.rename(keep.id, "  Kept  ").name == "Kept"
    with pytest.raises(Conflict):
        me.folders.rename(keep.id, "Gone")
    with pytest.raises(InvalidInput):
        me.folders.delete(keep.id, threads="burn")
    assert me.folders.delete(keep.id, threads="keep") == 1
    assert me.conversations.get(a.id).folder_id is None and me.conversations.get(a.id).visibility == "visible"
    assert me.folders.delete(gone.id, threads="trash") == 1
    assert me.conversations.get(b.id).visibility == "trashed"
    assert [f.name for f in me.folders.list()] == []
    with pytest.raises(NotFound):
        me.folders.delete(gone.id, threads="keep")


# -- W3: persona editing, archiving and avatars -------------------------------------------------------
import io  # noqa: E402

from click.testing import CliRunner  # noqa: E402
from PIL import Image  # noqa: E402

from hearth.cli import cli  # noqa: E402


def png(size=(8, 8), kind="PNG") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (200, 90, 40)).save(out, kind)
    return out.getvalue()


def test_w3_cli_persona_edit_and_archive_change_only_what_is_given(tmp_path, monkeypatch):
    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "home"))
    runner = CliRunner()

    def run(*args):
        return runner.invoke(cli, list(args), catch_exceptions=False)

    assert run("persona", "add", "elion", "--display-name", "Elion", "--user-label", "AUMA said:").exit_code == 0
    assert run("persona", "add", "sage").exit_code == 0
    picture = tmp_path / "me.png"
    picture.write_bytes(png())
    edited = run("persona", "edit", "elion", "--archive-access", "--tone", "Playful", "--legacy-label",
                 "Voicefire 5.1 said:", "--web-search", "--identity", "I am Elion.", "--avatar", str(picture))
    assert edited.exit_code == 0, edited.output
    with Hearth(Settings.resolve({"home": str(tmp_path / "home")}, environ={})) as hearth:
        me = hearth.scope()
        p = me.personas.by_name("elion")
        assert (p.archive_access, p.web_search, p.tone, p.legacy_labels, p.identity) == (
            True, True, "Playful", ["Voicefire 5.1 said:"], "I am Elion.")
        assert p.user_label == "AUMA said:" and p.display_name == "Elion"  # untouched
        assert me.personas.avatar(p.id) == (png(), "image/png")
    bad = tmp_path / "fake.png"
    bad.write_bytes(b"<svg onload=alert(1)>")
    refused = runner.invoke(cli, ["persona", "edit", "elion", "--tone", "Dry", "--avatar", str(bad)])
    assert refused.exit_code == 2 and refused.output.startswith("Error: the avatar is not a readable")
    assert "Dry" not in run("persona", "show", "elion").output  # nothing changed
    assert run("persona", "archive", "elion").exit_code == 0
    assert "elion" not in run("persona", "list").output and "(archived)" in run("persona", "list", "--all").output
    last = runner.invoke(cli, ["persona", "archive", "sage"])
    assert last.exit_code == 1 and "only persona that is not archived" in last.output
    assert run("persona", "archive", "elion", "--restore").exit_code == 0
    assert "elion" in run("persona", "list").output


def test_w3_avatar_upload_checks_type_and_size_by_opening_the_image(hearth, me, persona):
    with serve_in_thread(create_app(hearth.settings, hearth)) as base:
        url = f"{base}/api/personas/{persona.id}/avatar"
        assert httpx.get(url).status_code == 404
        for body, kind in ((b"GIF89a not really", "image/gif"), (b"<svg/>", "image/png"),
                           (png(kind="JPEG"), "image/png"), (png((5000, 2)), "image/png"), (b"", "image/png")):
            refused = httpx.put(url, content=body, headers={"Content-Type": kind})
            assert refused.status_code == 422, (kind, refused.text)
            assert refused.json()["error"]
        assert httpx.put(url, content=b"x" * 1_200_000, headers={"Content-Type": "image/png"}).status_code == 413
        assert me.personas.avatar(persona.id) is None  # nothing stored by a refusal
        assert httpx.put(url, content=png(kind="JPEG"), headers={"Content-Type": "image/jpeg"}).status_code == 204
        got = httpx.get(url)
        assert got.headers["content-type"] == "image/jpeg" and got.content == png(kind="JPEG")
        me.personas.create("sage")
        archived = httpx.post(f"{base}/api/personas/{persona.id}/archive", json={"archived": True})
        assert archived.status_code == 200 and archived.json()["archived_at"]
        assert persona.id not in [p["id"] for p in httpx.get(f"{base}/api/personas").json()]
        assert persona.id in [p["id"] for p in httpx.get(f"{base}/api/personas?include_archived=true").json()]
