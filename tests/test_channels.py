"""Messaging channels (E5, E10): SMS through Twilio's wire format and the official SDK, email through
a real IMAP server (pymap) and a real SMTP server (aiosmtpd), all on 127.0.0.1."""

from __future__ import annotations

import imaplib
import logging
import re
import socket
import subprocess
import sys
import threading
import time
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Iterator

import pytest
from aiosmtpd.controller import Controller
from fastapi.testclient import TestClient
from twilio.request_validator import RequestValidator

from hearth import Hearth, Settings
from hearth.errors import Conflict, Forbidden, InvalidInput
from hearth.ops.jobs import Worker
from hearth.outreach.channels import mail, receive, sms
from hearth.outreach.channels.contacts import find
from hearth.server import create_app
from tests.fakes.twilio_server import FakeTwilio

PUBLIC = "https://hearth.example.org"
WEBHOOK = "/channels/sms/twilio"
SID, TOKEN, FROM = "AC" + "1" * 32, "twilio-test-token", "+15550001111"
ROBIN_PHONE, ROBIN_MAIL = "+15557654321", "robin@example.org"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def twilio() -> Iterator[FakeTwilio]:
    fake = FakeTwilio(SID, TOKEN).start()
    yield fake
    fake.stop()


class Inbox:
    """What the SMTP server received."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], bytes]] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's hook name)
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.original_content))
        return "250 OK"


@pytest.fixture
def smtp() -> Iterator[tuple[Inbox, int]]:
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield inbox, controller.port
    controller.stop()


@pytest.fixture
def imap() -> Iterator[int]:
    port = free_port()
    exe = Path(sys.executable).with_name("pymap")
    proc = subprocess.Popen([str(exe), "--host", "127.0.0.1", "--port", str(port), "--no-tls", "dict",
                             "--demo-data", "--demo-user", "elion", "--demo-password", "imap-secret"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("the IMAP server did not start")
            time.sleep(0.1)
    yield port
    proc.terminate()
    proc.wait(10)


def channel_settings(tmp_path, twilio_url: str = "http://127.0.0.1:9", smtp_port: int = 25,
                     imap_port: int = 143) -> Settings:
    return Settings.resolve({
        "home": str(tmp_path / "home"), "input_token_limit": 32_000, "public_url": PUBLIC,
        "twilio_account_sid": SID, "twilio_auth_token": TOKEN, "twilio_from_number": FROM,
        "twilio_api_base": twilio_url, "sms_part_chars": 160,
        "email_address": "elion@example.org", "smtp_host": "127.0.0.1", "smtp_port": smtp_port,
        "smtp_starttls": False, "imap_host": "127.0.0.1", "imap_port": imap_port, "imap_ssl": False,
        "imap_username": "elion", "imap_password": "imap-secret",
    }, environ={})


@pytest.fixture
def channel_hearth(tmp_path, twilio, smtp, provider) -> Iterator[Hearth]:
    inbox, smtp_port = smtp
    h = Hearth(channel_settings(tmp_path, twilio.url, smtp_port), provider=provider)
    me = h.scope()
    elion = me.personas.create("elion", "Elion")
    me.contacts.trust("sms", "+1 (555) 765-4321", elion.id)
    me.contacts.trust("email", f"Robin <{ROBIN_MAIL}>", elion.id)
    yield h
    h.close()


def signed_post(client: TestClient, form: dict[str, str], token: str = TOKEN, signature: str | None = None):
    if signature is None:
        signature = RequestValidator(token).compute_signature(PUBLIC + WEBHOOK, form)
    return client.post(WEBHOOK, data=form, headers={"X-Twilio-Signature": signature})


def sms_form(body: str, sid: str = "SM" + "a" * 32, sender: str = ROBIN_PHONE) -> dict[str, str]:
    return {"MessageSid": sid, "AccountSid": SID, "From": sender, "To": FROM, "Body": body, "NumMedia": "0"}


class Clock:
    def __init__(self, start: float = 1_800_000_000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now


def row_count(h: Hearth, table: str) -> int:
    return h.store.connection().execute(f"SELECT count(*) FROM {table}").fetchone()[0]


# -- SMS ----------------------------------------------------------------------------------------------
def test_e10_signed_sms_is_stored_then_answered_through_the_twilio_sdk(channel_hearth, twilio, provider):
    client = TestClient(create_app(hearth=channel_hearth), base_url="http://127.0.0.1:8765")
    response = signed_post(client, sms_form("Home safe, the train was late."))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/xml")
    assert "<Response>" in response.text
    me = channel_hearth.scope()
    [conversation] = me.conversations.list()
    [saved] = [m for m in me.conversations.messages(conversation.id) if m.role == "user"]
    assert (saved.content, saved.channel) == ("Home safe, the train was late.", "sms")
    assert twilio.sent == [] and provider.requests == []  # the webhook answers before any model runs
    span = channel_hearth.store.connection().execute(
        "SELECT s.kind, s.channel FROM events e JOIN spans s ON s.id = e.span_id WHERE e.id = ?", (saved.id,)).fetchone()
    assert tuple(span) == ("text", "sms")  # the text joins the timeline in a span of its own (E1)

    assert Worker(channel_hearth).run_once() >= 1
    reply = [m for m in me.conversations.messages(conversation.id) if m.role == "assistant"][-1]
    assert reply.channel == "sms"
    assert twilio.sent == [{"To": ROBIN_PHONE, "From": FROM, "Body": reply.content}]
    assert provider.requests[-1].messages[-1].content == "Home safe, the train was late."


@pytest.mark.parametrize("signature", ["", "bm90IGEgc2lnbmF0dXJl", None])
def test_e10_unsigned_or_badly_signed_sms_is_403_and_stores_nothing(channel_hearth, signature):
    client = TestClient(create_app(hearth=channel_hearth), base_url="http://127.0.0.1:8765")
    before = (row_count(channel_hearth, "messages"), row_count(channel_hearth, "jobs"))
    form = sms_form("let me in")
    if signature is None:  # signed with someone else's token
        response = signed_post(client, form, token="not-the-token")
    else:
        response = client.post(WEBHOOK, data=form, headers={"X-Twilio-Signature": signature} if signature else {})
    assert response.status_code == 403
    assert response.json()["error"] == "forbidden"
    assert (row_count(channel_hearth, "messages"), row_count(channel_hearth, "jobs")) == before


def test_e10_unknown_sender_is_refused_and_logged_without_content(channel_hearth, caplog):
    client = TestClient(create_app(hearth=channel_hearth), base_url="http://127.0.0.1:8765")
    before = row_count(channel_hearth, "messages")
    with caplog.at_level(logging.DEBUG):
        response = signed_post(client, sms_form("my secret plan", sender="+15550009999"))
    assert response.status_code == 403
    assert row_count(channel_hearth, "messages") == before
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "refused" in logged and "secret" not in logged and "5550009999" not in logged


def test_e10_replayed_sms_webhook_is_recognised_and_answered_once(channel_hearth, twilio):
    client = TestClient(create_app(hearth=channel_hearth), base_url="http://127.0.0.1:8765")
    form = sms_form("Did you water the sweet peas?")
    assert signed_post(client, form).status_code == 200
    assert signed_post(client, form).status_code == 200  # Twilio retries deliver the same SID
    me = channel_hearth.scope()
    [conversation] = me.conversations.list()
    users = [m for m in me.conversations.messages(conversation.id) if m.role == "user"]
    assert len(users) == 1
    Worker(channel_hearth).run_once()
    Worker(channel_hearth).run_once()
    assert len(twilio.sent) == 1


def test_e10_long_reply_is_split_into_sms_parts_and_a_retried_job_skips_sent_parts(channel_hearth, twilio,
                                                                                 provider):
    from hearth.providers.base import StreamEvent, Usage

    long_text = " ".join(f"word{i}" for i in range(80))  # about 560 characters

    def reply(request):
        yield StreamEvent("text", text=long_text)
        yield StreamEvent("usage", usage=Usage(input_tokens=10, output_tokens=100))

    provider.replies.append(reply)
    twilio.fail_next = [503]  # wait: the first part fails once, the job retries
    client = TestClient(create_app(hearth=channel_hearth), base_url="http://127.0.0.1:8765")
    signed_post(client, sms_form("Tell me everything"))
    worker = Worker(channel_hearth)
    worker.queue.backoff_seconds = 0
    worker.run_once()
    worker.run_once()
    parts = [s["Body"] for s in twilio.sent]
    assert len(parts) == 4 and all(len(p) <= 160 for p in parts)
    assert " ".join(parts) == long_text
    assert sms.split("a" * 400, 160) == ["a" * 160, "a" * 160, "a" * 80]


def test_e5_switching_channel_continues_the_same_thread_without_a_boundary(channel_hearth):
    me = channel_hearth.scope()
    elion = me.personas.by_name("elion")
    web = me.new_chat(elion.id).conversation
    me.send(web.id, "Morning! Off to work.")
    client = TestClient(create_app(hearth=channel_hearth), base_url="http://127.0.0.1:8765")
    signed_post(client, sms_form("On the train now"))
    Worker(channel_hearth).run_once()
    assert [c.id for c in me.conversations.list()] == [web.id]  # no new thread, no handoff artifact
    turns = [(m.role, m.channel) for m in me.conversations.messages(web.id) if m.kind == "chat"]
    assert turns == [("user", "web"), ("assistant", "web"), ("user", "sms"), ("assistant", "sms")]


def test_e5_a_persona_that_does_not_answer_on_sms_keeps_the_message_without_replying(channel_hearth, twilio):
    me = channel_hearth.scope()
    elion = me.personas.by_name("elion")
    assert me.persona_channels.set(elion.id, "sms", False)["sms"] is False
    client = TestClient(create_app(hearth=channel_hearth), base_url="http://127.0.0.1:8765")
    assert signed_post(client, sms_form("Are you there?")).status_code == 200
    assert channel_hearth.store.connection().execute(
        "SELECT count(*) FROM jobs WHERE kind = 'channel.reply'").fetchone()[0] == 0
    [conversation] = me.conversations.list()
    assert [m.content for m in me.conversations.messages(conversation.id)] == ["Are you there?"]
    with pytest.raises(InvalidInput):
        me.persona_channels.set(elion.id, "pigeon", True)


def test_e10_contacts_are_bound_to_their_user(channel_hearth, twilio):
    owner = channel_hearth.scope()
    other = channel_hearth.scope(channel_hearth.users.create("sam").id)
    [_, contact] = owner.contacts.list()  # email, then sms
    assert other.contacts.list() == []
    with pytest.raises(Exception) as caught:
        other.contacts.remove(contact.id)
    assert type(caught.value).__name__ == "NotFound"
    other.contacts.add("sms", ROBIN_PHONE)  # only a claim: the number still routes to its verified owner
    assert other.contacts.list() == [] and find(channel_hearth.store.connection(), "sms", ROBIN_PHONE).id == contact.id
    with pytest.raises(InvalidInput):
        owner.contacts.add("sms", "555-1234")
    with pytest.raises(Forbidden):  # a mailbox only hears its own user's contacts
        receive(channel_hearth, "email", ROBIN_MAIL, "<x@example.org>", "hi", user_id=other.user_id)


def code_in(text: str) -> str:
    [code] = re.findall(r"\b[0-9]{6}\b", text)
    return code


def sam_client(h: Hearth):
    sam = h.users.create("sam")
    return sam, {"Authorization": f"Bearer {h.users.create_token(sam.id, 'phone')}"}


def test_u9_g2_adding_any_address_gives_every_user_the_same_answer(channel_hearth, twilio, smtp):
    """Another user's verified address, a fresh one, the deployment's own, one's own again: the same
    201 and the same body (the address aside), so adding an address is no oracle; nothing routes."""
    owner = channel_hearth.scope()
    sam, auth = sam_client(channel_hearth)
    owners = [c.to_dict() for c in owner.contacts.list()]
    with TestClient(create_app(channel_hearth.settings, channel_hearth), base_url="http://127.0.0.1") as client:
        def add(channel: str, address: str):
            return client.post("/api/channels/contacts", json={"channel": channel, "address": address}, headers=auth)

        for channel, foreign, deployments, fresh in (
                ("sms", "+1 555 765 4321", FROM, "+15550102030"),
                ("email", "ROBIN@example.org", "Elion <elion@example.org>", "sam.friend@example.org")):
            answers = [add(channel, a) for a in (foreign, fresh, deployments, fresh)]
            assert [a.status_code for a in answers] == [201] * 4
            bodies = [{k: v for k, v in a.json().items() if k != "address"} for a in answers]
            assert all(b == bodies[0] for b in bodies), bodies
            assert bodies[0]["verified"] is False and "code" in bodies[0]["detail"]
            assert "already" not in answers[0].text
            assert client.get("/api/channels/contacts", headers=auth).json() == []  # nothing verified
    assert [c.to_dict() for c in owner.contacts.list()] == owners
    assert find(channel_hearth.store.connection(), "sms", ROBIN_PHONE).user_id == owner.user_id
    # Two users may hold the same unverified address; sam's claims are his alone.
    assert {c.address for c in channel_hearth.scope(sam.id).contacts.pending()} == {
        ROBIN_PHONE, "+15550102030", FROM, ROBIN_MAIL, "sam.friend@example.org", "elion@example.org"}
    assert owner.contacts.pending() == []


def test_u9_an_address_routes_inbound_messages_only_after_its_code_is_entered(channel_hearth, twilio, smtp,
                                                                             caplog):
    inbox, _port = smtp
    sam, auth = sam_client(channel_hearth)
    number, address = "+15550102030", "sam.friend@example.org"
    caplog.set_level(logging.DEBUG)
    with TestClient(create_app(channel_hearth.settings, channel_hearth), base_url="http://127.0.0.1:8765") as client:
        assert client.post("/api/channels/contacts", json={"channel": "sms", "address": number},
                           headers=auth).status_code == 201
        [sent] = twilio.sent  # the code went out through the Twilio path
        assert sent["To"] == number and sent["From"] == FROM
        code = code_in(sent["Body"])
        [claim] = channel_hearth.store.connection().execute(
            "SELECT code_hash, code_salt, expires_at FROM contact_claims WHERE user_id = ?", (sam.id,)).fetchall()
        assert code not in " ".join(map(str, claim)) and len(claim[0]) == 64  # stored only as a salted hash
        # Not yet verified: a text from the number is refused and stores nothing.
        assert signed_post(client, sms_form("hello?", sid="SM" + "b" * 32, sender=number)).status_code == 403
        wrong = "000000" if code != "000000" else "111111"
        verify = {"channel": "sms", "address": number}
        refused = client.post("/api/channels/contacts/verify", json={**verify, "code": wrong}, headers=auth)
        assert refused.status_code == 422
        done = client.post("/api/channels/contacts/verify", json={**verify, "code": code}, headers=auth)
        assert done.status_code == 201 and done.json()["address"] == number and done.json()["verified_at"]
        assert signed_post(client, sms_form("now?", sid="SM" + "c" * 32, sender=number)).status_code == 200

        assert client.post("/api/channels/contacts", json={"channel": "email", "address": address},
                           headers=auth).status_code == 201
        [(_from, rcpt, raw)] = inbox.messages  # the code went out through the mail path
        assert rcpt == [address]
        mail_code = code_in(message_from_bytes(raw, policy=policy.default).get_content())
        with pytest.raises(Forbidden):
            receive(channel_hearth, "email", address, "<early@example.org>", "hi", user_id=sam.id)
        assert client.post("/api/channels/contacts/verify", json={"channel": "email", "address": address,
                                                                   "code": mail_code}, headers=auth).status_code == 201
    assert receive(channel_hearth, "email", address, "<late@example.org>", "hi", user_id=sam.id).status == "accepted"
    sams = channel_hearth.scope(sam.id)
    assert {c.address for c in sams.contacts.list()} == {number, address} and sams.contacts.pending() == []
    logged = " ".join(r.getMessage() for r in caplog.records if r.name.startswith("hearth"))
    assert "verification code sent" in logged and code not in logged and mail_code not in logged  # never logged


class Codes:
    """Where a test's codes go: the sender the deployment would hand them to (Twilio or SMTP)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str]] = []

    def __call__(self, settings, channel: str, address: str, code: str) -> None:
        self.sent.append((channel, address, code))


def test_u9_codes_expire_are_void_after_five_wrong_tries_and_rate_limited(channel_hearth):
    from hearth.errors import RateLimited
    from hearth.outreach.channels.contacts import Contacts

    clock = Clock()
    codes = Codes()
    sam = channel_hearth.users.create("sam")
    dee = channel_hearth.users.create("dee")

    def contacts(user_id: int) -> Contacts:
        return Contacts(channel_hearth.store, user_id, channel_hearth.settings, sender=codes, clock=clock)

    mine = contacts(sam.id)
    number = "+15550102030"
    mine.add("sms", number)
    clock.now += 10 * 60 + 1  # ten minutes is the default lifetime
    with pytest.raises(InvalidInput, match="expired"):
        mine.verify("sms", number, codes.sent[-1][2])

    mine.send_code("sms", number)
    code = codes.sent[-1][2]
    wrong = f"{(int(code) + 1) % 10**6:06d}"
    for _ in range(5):
        with pytest.raises(InvalidInput):
            mine.verify("sms", number, wrong)
    with pytest.raises(InvalidInput):  # five wrong tries: the right code no longer works
        mine.verify("sms", number, code)
    assert find(channel_hearth.store.connection(), "sms", number) is None

    # Five codes an hour per user and address (two sent above, three more), then 429 for this user.
    for _ in range(3):
        mine.send_code("sms", number)
    with pytest.raises(RateLimited):
        mine.send_code("sms", number)
    assert len(codes.sent) == 5
    # Another user is not told about sam's codes; all users together reach the address at most 15 times.
    theirs = contacts(dee.id)
    theirs.add("sms", number)
    for _ in range(4):
        theirs.send_code("sms", number)
    assert len(codes.sent) == 10
    clock.now += 3601  # an hour later sam may ask again, and his newest code verifies
    mine.send_code("sms", number)
    assert mine.verify("sms", number, codes.sent[-1][2]).user_id == sam.id


def test_u9_whoever_verifies_last_takes_routing_and_other_claims_stay_untouched(channel_hearth):
    from hearth.outreach.channels.contacts import Contacts

    codes = Codes()
    owner = channel_hearth.scope()
    sam, dee = channel_hearth.users.create("sam"), channel_hearth.users.create("dee")
    before = find(channel_hearth.store.connection(), "sms", ROBIN_PHONE)
    assert before.user_id == owner.user_id
    dees = Contacts(channel_hearth.store, dee.id, channel_hearth.settings, sender=codes)
    dees.add("sms", ROBIN_PHONE)
    sams = Contacts(channel_hearth.store, sam.id, channel_hearth.settings, sender=codes)
    sams.add("sms", ROBIN_PHONE)
    sams.verify("sms", ROBIN_PHONE, codes.sent[-1][2])  # the number changed hands: sam holds it now
    assert find(channel_hearth.store.connection(), "sms", ROBIN_PHONE).user_id == sam.id
    assert [c.channel for c in owner.contacts.list()] == ["email"]
    assert [c.address for c in dees.pending()] == [ROBIN_PHONE] and dees.list() == []


def test_u9_migration_35_marks_existing_contacts_verified_once(tmp_path):
    import sqlite3

    from hearth.store import migrations

    conn = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    conn.execute("BEGIN")
    migrations.migrate(conn, upto=34)
    conn.execute("INSERT INTO users (id, name, is_owner, created_at) VALUES (1, 'robin', 1, '2026-01-01T00:00:00Z')")
    conn.execute("INSERT INTO channel_contacts (user_id, channel, address, created_at)"
                 " VALUES (1, 'sms', '+15557654321', '2026-02-03T04:05:06.000000Z')")
    assert migrations.migrate(conn) == [35]
    conn.execute("COMMIT")
    assert conn.execute("SELECT verified_at FROM channel_contacts").fetchall() == [("2026-02-03T04:05:06.000000Z",)]
    assert conn.execute("SELECT count(*) FROM contact_claims").fetchone() == (0,)
    conn.close()


# -- email --------------------------------------------------------------------------------------------
def mail_bytes(body: str, message_id: str, subject: str = "Saturday", sender: str = f"Robin <{ROBIN_MAIL}>",
               references: str = "") -> bytes:
    m = EmailMessage()
    m["From"], m["To"], m["Subject"], m["Message-ID"] = sender, "elion@example.org", subject, message_id
    if references:
        m["References"] = references
    m.set_content(body)
    return m.as_bytes()


def append(port: int, raw: bytes) -> None:
    box = imaplib.IMAP4("127.0.0.1", port)
    box.login("elion", "imap-secret")
    box.append("INBOX", None, imaplib.Time2Internaldate(time.time()), raw)
    box.logout()


def test_e10_email_is_polled_by_imap_and_answered_by_smtp_in_the_same_mail_thread(tmp_path, imap, smtp,
                                                                                 provider):
    inbox, smtp_port = smtp
    h = Hearth(channel_settings(tmp_path, smtp_port=smtp_port, imap_port=imap), provider=provider)
    me = h.scope()
    elion = me.personas.create("elion", "Elion")
    me.contacts.trust("email", ROBIN_MAIL, elion.id)
    quoted = ("Yes, let's go to the market on Saturday.\n\nOn Fri, 27 Nov 2026 at 09:00, Elion "
              "<elion@example.org> wrote:\n> Shall we go to the market?\n> It opens at eight.\n")
    append(imap, mail_bytes(quoted, "<first@example.org>", references="<older@example.org>"))

    counts = mail.poll(h, me.user_id)
    assert counts["accepted"] == 1 and counts["refused"] >= 1  # the mailbox's demo mail is not from a contact
    [conversation] = me.conversations.list()
    [saved] = me.conversations.messages(conversation.id)
    assert (saved.content, saved.channel) == ("Yes, let's go to the market on Saturday.", "email")

    Worker(h).run_once()
    [(mail_from, rcpt, raw)] = inbox.messages
    sent = message_from_bytes(raw, policy=policy.default)
    assert (mail_from, rcpt) == ("elion@example.org", [ROBIN_MAIL])
    assert sent["Subject"] == "Re: Saturday"
    assert sent["In-Reply-To"] == "<first@example.org>"
    assert sent["References"] == "<older@example.org> <first@example.org>"
    reply = me.conversations.messages(conversation.id)[-1]
    assert sent.get_content().strip() == reply.content.strip() and reply.channel == "email"

    # A restart (a new process reading the same database) and even a lost cursor never answer twice.
    h.close()
    h2 = Hearth(channel_settings(tmp_path, smtp_port=smtp_port, imap_port=imap), provider=provider)
    assert mail.poll(h2, me.user_id)["accepted"] == 0
    h2.store.connection().execute("DELETE FROM app_state WHERE key LIKE 'email.imap_cursor.%'")
    again = mail.poll(h2, me.user_id)
    assert again["accepted"] == 0 and again["duplicate"] == 1
    Worker(h2).run_once()
    assert len(inbox.messages) == 1
    h2.close()


def test_e10_malformed_oversized_and_textless_mail_is_refused_and_stores_nothing(channel_hearth):
    with pytest.raises(InvalidInput):
        mail.parse(b"\xff\xfe not a mail at all", 1_000_000)
    with pytest.raises(InvalidInput, match="larger"):
        mail.parse(mail_bytes("x" * 5000, "<big@example.org>"), 1000)
    html_only = EmailMessage()
    html_only["From"], html_only["Message-ID"] = ROBIN_MAIL, "<h@example.org>"
    html_only.set_content("<p>hi</p>", subtype="html")
    with pytest.raises(InvalidInput, match="plain-text"):
        mail.parse(html_only.as_bytes(), 1_000_000)
    with pytest.raises(InvalidInput, match="new text"):
        mail.parse(mail_bytes("> only a quote\n", "<q@example.org>"), 1_000_000)
    assert row_count(channel_hearth, "messages") == 0


def test_e10_quoted_mail_is_stripped_before_it_enters_the_timeline():
    text = ("Sounds good.\nSee you then.\n\n-- \nRobin\n")
    assert mail.strip_quoted(text) == "Sounds good.\nSee you then."
    outlook = "Thanks!\n\n-----Original Message-----\nFrom: Elion\nold text"
    assert mail.strip_quoted(outlook) == "Thanks!"
    wrapped = "Ok\nOn Mon, 30 Nov 2026 at 10:00, a very long name\n<elion@example.org> wrote:\n> hi"
    assert mail.strip_quoted(wrapped) == "Ok"


# -- U6: replies racing on one thread -----------------------------------------------------------------
def test_u6_two_replies_to_one_thread_at_once_never_break_a_constraint_or_leave_a_job_running(
        channel_hearth, twilio, provider, caplog):
    """Two workers and a person typing on the web race to answer one SMS thread, 50 times over. No
    write breaks the one-pending-job rule, no job stays leased, every reply goes out once."""
    from hearth.providers.base import StreamEvent, Usage

    def slow_reply(request):
        time.sleep(0.003)  # long enough for the other reply to start meanwhile
        yield StreamEvent("text", text=f"Reply {len(provider.requests)}")
        yield StreamEvent("usage", usage=Usage(input_tokens=10, output_tokens=3))

    provider.replies.extend([slow_reply] * 1000)
    h = channel_hearth
    me = h.scope()
    workers = [Worker(h), Worker(h)]
    for worker in workers:
        worker.queue.backoff_seconds = 0
    failures: list[BaseException] = []
    conversation_id = receive(h, "sms", ROBIN_PHONE, "SMfirst", "hello").conversation_id
    workers[0].run_once()

    def run(action) -> None:
        try:
            action()
        except BaseException as exc:  # noqa: BLE001 - every failure is reported by the assertion below
            failures.append(exc)

    def web(n: int) -> None:
        try:
            me.send(conversation_id, f"web {n}")
        except Conflict:
            pass  # the other reply won the race: the person is told plainly; nothing breaks

    with caplog.at_level(logging.WARNING):
        for n in range(50):
            receive(h, "sms", ROBIN_PHONE, f"SMa{n}", f"first {n}")
            receive(h, "sms", ROBIN_PHONE, f"SMb{n}", f"second {n}")
            barrier = threading.Barrier(3)

            def drain(worker: Worker, n: int = n, barrier: threading.Barrier = barrier) -> None:
                barrier.wait()
                worker.run_once()
                receive(h, "sms", ROBIN_PHONE, f"SMc{n}-{id(worker)}", f"third {n}")
                worker.run_once()

            def typing(n: int = n, barrier: threading.Barrier = barrier) -> None:
                barrier.wait()
                web(n)

            threads = [threading.Thread(target=run, args=(lambda w=w: drain(w),)) for w in workers]
            threads.append(threading.Thread(target=run, args=(typing,)))
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        for _ in range(3):
            workers[0].run_once()

    assert failures == []
    assert not [r for r in caplog.records if "worker loop error" in r.getMessage() or "Constraint" in r.getMessage()]
    counts = h.store.connection().execute(
        "SELECT status, count(*) FROM jobs WHERE kind = 'channel.reply' GROUP BY status").fetchall()
    assert dict(counts).keys() <= {"done"}, dict(counts)
    bodies = [s["Body"] for s in twilio.sent]
    assert len(bodies) == len(set(bodies))  # no reply went out twice
    sms_replies = [m.content for m in me.conversations.messages(conversation_id)
                   if m.role == "assistant" and m.channel == "sms"]
    assert sorted(bodies) == sorted(sms_replies)


def test_u9_cli_adds_sends_a_code_and_verifies_an_address(tmp_path, smtp, monkeypatch):
    from click.testing import CliRunner

    from hearth.cli import cli

    inbox, port = smtp
    for key, value in {"HEARTH_HOME": str(tmp_path / "home"), "HEARTH_SMTP_HOST": "127.0.0.1",
                       "HEARTH_SMTP_PORT": str(port), "HEARTH_SMTP_STARTTLS": "false",
                       "HEARTH_EMAIL_ADDRESS": "elion@example.org"}.items():
        monkeypatch.setenv(key, value)
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    assert "code" in run("channels", "add-contact", "email", ROBIN_MAIL)
    assert "waiting for the code" in run("channels", "contacts")
    run("channels", "send-code", "email", ROBIN_MAIL)
    first, newest = (code_in(message_from_bytes(raw, policy=policy.default).get_content())
                     for _f, _r, raw in inbox.messages)
    wrong = runner.invoke(cli, ["channels", "verify", "email", ROBIN_MAIL, "12345x"])
    assert wrong.exit_code == 2 and "code" in wrong.output
    assert "verified" in run("channels", "verify", "email", ROBIN_MAIL, newest)
    listed = run("channels", "contacts")
    assert ROBIN_MAIL in listed and "yes" in listed and "waiting" not in listed
