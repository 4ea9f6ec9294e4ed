"""Memory history and undo (B2) and delete forever (B4, B5) in the web UI, in headless Chromium."""

from __future__ import annotations

import pytest

from hearth import NotFound
from hearth.records.forget import verify
from tests.test_forget import drain
from tests.test_ui import base, browser, chat_with_messages, deployment, elion, expect, goto, me, page, site  # noqa: F401  (shared fixtures)  # noqa: F401

pytestmark = pytest.mark.ui


def test_b1_b2_memory_editor_shows_history_undo_and_typo_fixes(page, base, me):  # noqa: F811
    for memory in me.memories.list():
        me.memories.delete(memory.id)
    memory = me.memories.add("Lives in Lyon", "home")
    me.memories.edit(memory.id, text="Lives in Paris")
    goto(page, base + "/#memory")
    row = page.locator("#memory-list .memory-item", has_text="Lives in Paris")
    expect(row.locator(".version")).to_have_text("Version 2")
    row.get_by_role("button", name="History: Lives in Paris").click()
    versions = page.locator(".memory-history .memory-version")
    expect(versions).to_have_count(2)
    expect(versions.nth(0)).to_contain_text("v2 · superseded by you")
    expect(versions.nth(1)).to_contain_text("Lives in Lyon")
    # Undo brings the previous version back, as a new version.
    page.get_by_role("button", name="Undo the last change: Lives in Paris").click()
    expect(page.locator("#memory-status")).to_contain_text("Version 1 restored as version 3")
    expect(page.locator("#memory-list .memory-text")).to_have_text(["Lives in Lyon"])
    assert me.memories.get(memory.id).text == "Lives in Lyon"
    expect(page.locator(".memory-history .memory-version")).to_have_count(3)
    # A typo fix is recorded as a correction of the same version.
    page.get_by_role("button", name="Edit: Lives in Lyon").click()
    page.locator(".memory-edit-text").fill("Lives in Lyon, France")
    page.locator(".memory-correction").check()
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#memory-list .memory-text")).to_have_text(["Lives in Lyon, France"])
    assert me.memories.history(memory.id)[0].change == "corrected"


def test_b4_b5_trash_delete_forever_needs_the_phrase(page, base, me):  # noqa: F811
    doomed = chat_with_messages(me, "Old diary")
    me.conversations.trash(doomed.id)
    goto(page, base + "/")
    page.locator("#trash summary").click()
    item = page.locator("#trash-list li", has_text="Old diary")
    item.get_by_role("button", name="Delete Old diary forever").click()
    expect(item.locator(".forget-confirm")).to_contain_text("1 conversation, 2 messages")
    item.get_by_role("textbox", name="Type FORGET FOREVER to confirm").fill("forget")
    item.get_by_role("button", name="Delete forever").click()
    expect(page.locator("#status")).to_contain_text("FORGET FOREVER")
    assert me.conversations.get(doomed.id).visibility == "trashed"  # a wrong phrase removes nothing
    item.get_by_role("textbox", name="Type FORGET FOREVER to confirm").fill("FORGET FOREVER")
    item.get_by_role("button", name="Delete forever").click()
    expect(page.locator("#trash-list li", has_text="Old diary")).to_have_count(0)
    with pytest.raises(NotFound):
        me.conversations.get(doomed.id)


def test_b3_review_queue_shows_both_texts_and_supersedes(page, base, me):  # noqa: F811
    for memory in me.memories.list():
        me.memories.delete(memory.id)
    kept = me.memories.add("Nora works at Saint-Luc hospital")
    _, [waiting] = me.layers.review.remember([{"text": "Nora works at the Pasteur clinic"}])
    goto(page, base + "/#layers")
    card = page.locator(f'#review-list [data-proposal-id="{waiting.id}"]')
    expect(card.locator(".conflict-text")).to_have_text(["Nora works at the Pasteur clinic",
                                                         "Nora works at Saint-Luc hospital"])
    expect(card).to_contain_text("These disagree")
    expect(card.get_by_role("button", name="Approve", exact=True)).to_be_hidden()
    card.get_by_role("button", name=f"Supersede memory #{kept.id}").click()
    expect(page.locator(f'#review-list [data-proposal-id="{waiting.id}"]')).to_have_count(0)
    assert me.memories.get(kept.id).text == "Nora works at the Pasteur clinic"
    assert me.memories.history(kept.id)[1].text == "Nora works at Saint-Luc hospital"


def test_b4_b5_delete_one_message_and_a_period_forever_and_the_canary_is_gone(page, base, deployment, me):  # noqa: F811
    said, then = "velvetquokkalocker", "velvetquokkaspring"
    thread = chat_with_messages(me, "Locker talk", [f"My locker code is {said}", "Nothing else today"])
    spring = me.conversations.create(elion(me).id, title="Spring notes", created_at="2021-03-05T10:00:00.000000Z")
    me.conversations.add_message(spring.id, "user", f"Back then the word was {then}",
                                 created_at="2021-03-05T10:00:01.000000Z")
    me.conversations.add_message(spring.id, "assistant", "Noted.", created_at="2021-03-05T10:00:02.000000Z")
    assert not verify(deployment.store, said).clean and not verify(deployment.store, then).clean
    # One message: "Delete forever" in its More menu, the counts, the phrase.
    goto(page, base + f"/#conversation-{thread.id}")
    bubble = page.locator(".message.role-user", has_text=said)
    bubble.get_by_role("button", name="More actions").click()
    bubble.get_by_role("menuitem", name="Delete forever: your message").click()
    expect(bubble.locator(".forget-confirm")).to_contain_text("This removes 1 message")
    bubble.get_by_role("textbox", name="Type FORGET FOREVER to confirm").fill("FORGET FOREVER")
    # The confirmation's own button (exact: the control it replaced has a longer name), and its
    # answer awaited, so a slow machine fails here with the request's status, not an empty line.
    with page.expect_response(lambda r: r.url.endswith("/api/forget")) as answer:
        bubble.get_by_role("button", name="Delete forever", exact=True).click()
    assert answer.value.status == 200
    expect(page.locator("#status")).to_contain_text("Deleted forever: 1 message")
    expect(page.locator("#messages .message", has_text=said)).to_have_count(0)
    expect(page.locator("#messages .message", has_text="Nothing else today")).to_have_count(1)
    contents = [m.content for m in me.conversations.messages(thread.id, visible_only=False)]
    assert "Nothing else today" in contents and all(said not in c for c in contents)
    assert said not in (me.stored_prompt(thread.id) or "")
    drain(deployment)  # the background compaction the forgetting queued (FTS merge, WAL truncation)
    check = verify(deployment.store, said)  # the raw database file, its WAL, the FTS vocabulary
    assert check.clean and check.files_checked >= 1
    # A period of time: everything begun in it goes, after the same confirmation.
    page.locator("#forget-period summary").click()
    period = page.locator("#forget-period")
    period.get_by_role("button", name="Forget this period: everything in it, forever").click()
    expect(page.locator("#status")).to_contain_text("Choose the first and the last day")
    period.get_by_label("Forget from (first day)").fill("2021-03-01")
    period.get_by_label("Forget until (last day)").fill("2021-03-10")
    period.get_by_role("button", name="Forget this period: everything in it, forever").click()
    expect(period.locator(".forget-confirm")).to_contain_text("1 conversation, 2 messages")
    period.get_by_role("textbox", name="Type FORGET FOREVER to confirm").fill("forget forever")
    period.get_by_role("button", name="Delete forever").click()
    expect(page.locator("#status")).to_contain_text("FORGET FOREVER")
    assert me.conversations.get(spring.id).title == "Spring notes"  # a wrong phrase removes nothing
    period.get_by_role("textbox", name="Type FORGET FOREVER to confirm").fill("FORGET FOREVER")
    period.get_by_role("button", name="Delete forever").click()
    expect(page.locator("#status")).to_contain_text("Deleted forever: 1 conversation, 2 messages")
    with pytest.raises(NotFound):
        me.conversations.get(spring.id)
    assert me.conversations.get(thread.id).title == "Locker talk"  # outside the period: kept
    # The owner's verification over HTTP compacts first, then searches the raw files.
    checked = page.request.post(base + "/api/forget/verify", data={"canary": then})
    assert checked.status == 200 and checked.json()["clean"] is True and checked.json()["files_checked"] >= 1
