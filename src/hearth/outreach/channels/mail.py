"""Email (E10): a mailbox read by IMAP polling, replies by SMTP that thread in the person's client.

The mailbox belongs to one user (``email_user``, the owner by default); only that user's email
contacts reach the companion. Polling follows the mailbox's UIDs with a cursor in the database and
every message is recognised by its Message-ID, so a restart or a re-read never answers twice.
Quoted earlier mail is stripped before the text enters the timeline. Replies carry In-Reply-To and
References. The poll runs as a durable ``email.poll`` job that queues the next one.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from email import policy
from email.errors import MessageError
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import format_datetime, make_msgid, parseaddr
from typing import TYPE_CHECKING, Any

from hearth.errors import ConfigError, Forbidden, InvalidInput, ProviderError, TooLarge
from hearth.ops import jobs
from hearth.outreach.channels.contacts import Contact
from hearth.outreach.channels.inbound import receive_for, record_sent, sent_parts
from hearth.records.users import Users
from hearth.settings import Settings
from hearth.store import state

if TYPE_CHECKING:
    import imaplib

    from hearth.memory.helpers.base import Helper
    from hearth.records.context import Context, Deployment
    from hearth.records.ledger import Message
    from hearth.store import Store

log = logging.getLogger(__name__)

POLL_JOB = "email.poll"
_QUOTE_INTRO = re.compile(r"^\s*On\b.{0,300}\bwrote:\s*$", re.IGNORECASE)
_ORIGINAL = re.compile(r"^\s*-{2,}\s*(Original Message|Forwarded message)\s*-{2,}", re.IGNORECASE)


@dataclass(frozen=True)
class IncomingMail:
    message_id: str
    sender: str
    subject: str
    references: str
    text: str


def strip_quoted(text: str) -> str:
    """The new part of a reply: quoted lines, the "On ... wrote:" intro and everything after an
    "Original Message" rule or a signature separator are dropped."""
    lines = text.replace("\r\n", "\n").split("\n")
    kept: list[str] = []
    for i, line in enumerate(lines):
        joined = line + " " + lines[i + 1] if i + 1 < len(lines) else line
        if _ORIGINAL.match(line) or line.rstrip() == "--" or _QUOTE_INTRO.match(line) or (
                line.lstrip().startswith("On ") and _QUOTE_INTRO.match(joined)):
            break
        if line.lstrip().startswith(">"):
            continue
        kept.append(line)
    return "\n".join(kept).strip()


def parse(raw: bytes, max_bytes: int) -> IncomingMail:
    """Read one message; malformed, oversized or text-less mail is refused (``InvalidInput``)."""
    if len(raw) > max_bytes:
        raise TooLarge(f"the email is larger than {max_bytes} bytes")
    try:
        message = BytesParser(policy=policy.default).parsebytes(raw)
        message_id = str(message.get("Message-ID", "")).strip()
        sender = parseaddr(str(message.get("From", "")))[1]
        subject = " ".join(str(message.get("Subject", "")).split())[:300]
        references = " ".join(str(message.get("References", "")).split())[:2000]
        body = message.get_body(preferencelist=("plain",))
        text = body.get_content() if body is not None else None
    except (MessageError, LookupError, ValueError, TypeError, AttributeError, UnicodeError):
        raise InvalidInput("the email is malformed") from None
    if not message_id or not sender:
        raise InvalidInput("the email has no Message-ID or sender")
    if not isinstance(text, str):
        raise InvalidInput("the email has no plain-text part")
    text = strip_quoted(text.replace("\x00", ""))
    if not text:
        raise InvalidInput("the email has no new text")
    return IncomingMail(message_id, sender, subject, references, text)


def mailbox_user(source: "Deployment | Context") -> int:
    settings, users = source.settings, Users(source.store)
    return users.by_name(settings.email_user).id if settings.email_user else users.owner().id


def _cursor_key(user_id: int) -> str:
    return f"email.imap_cursor.{user_id}"


def _load_cursor(store: "Store", user_id: int) -> dict[str, Any]:
    return state.get(store.connection(), _cursor_key(user_id), {"uidvalidity": None, "last_uid": 0})


def _save_cursor(store: "Store", user_id: int, cursor: dict[str, Any]) -> None:
    with store.write() as conn:
        state.put(conn, _cursor_key(user_id), cursor)


def poll(deployment: "Deployment", user_id: int) -> dict[str, int]:
    """Read new mail once for ``user_id``'s mailbox; returns counts by outcome (numbers only)."""
    return poll_mailbox(deployment.context(user_id))


def poll_mailbox(ctx: "Context") -> dict[str, int]:
    """Read new mail once; returns counts by outcome (numbers only)."""
    settings, user_id = ctx.settings, ctx.user_id
    if not settings.imap_host:
        raise ConfigError("email needs HEARTH_IMAP_HOST (and the IMAP login)")
    counts = {"accepted": 0, "duplicate": 0, "kept": 0, "refused": 0}
    import imaplib  # here, not at the top: ssl and sockets are for a mailbox, not every command (S20)

    imap_class = imaplib.IMAP4_SSL if settings.imap_ssl else imaplib.IMAP4
    try:
        with imap_class(settings.imap_host, settings.imap_port, timeout=settings.provider_timeout) as imap:
            imap.login(settings.imap_username, settings.imap_password)
            status, _ = imap.select("INBOX", readonly=True)
            if status != "OK":
                raise ProviderError("the mailbox has no INBOX", "server", True)
            uidvalidity = (imap.response("UIDVALIDITY")[1] or [b""])[0]
            cursor = _load_cursor(ctx.store, user_id)
            validity = uidvalidity.decode() if isinstance(uidvalidity, bytes) else str(uidvalidity)
            if cursor.get("uidvalidity") != validity:
                cursor = {"uidvalidity": validity, "last_uid": 0}  # Message-IDs still prevent repeats
            status, data = imap.uid("SEARCH", f"UID {int(cursor['last_uid']) + 1}:*")
            uids = sorted(int(u) for u in (data[0] or b"").split() if int(u) > int(cursor["last_uid"]))
            for uid in uids:
                counts[_take(ctx, imap, uid)] += 1
                cursor["last_uid"] = uid
                _save_cursor(ctx.store, user_id, cursor)
    except (imaplib.IMAP4.error, OSError) as exc:
        raise ProviderError(f"the mailbox could not be read ({type(exc).__name__})", "server", True) from None
    if any(counts.values()):
        log.info("email poll: %s", counts)
    return counts


def _take(ctx: "Context", imap: "imaplib.IMAP4", uid: int) -> str:
    settings = ctx.settings
    _status, data = imap.uid("FETCH", str(uid), "(RFC822.SIZE)")
    size = re.search(rb"RFC822\.SIZE (\d+)", data[0] if isinstance(data[0], bytes) else b"")
    if size and int(size.group(1)) > settings.email_max_bytes:
        log.info("email refused: larger than %d bytes", settings.email_max_bytes)
        return "refused"
    _status, data = imap.uid("FETCH", str(uid), "(BODY.PEEK[])")
    raw = next((part[1] for part in data if isinstance(part, tuple)), b"")
    try:
        mail = parse(raw, settings.email_max_bytes)
        meta = {"email": {"message_id": mail.message_id, "subject": mail.subject, "references": mail.references}}
        return receive_for(ctx, "email", mail.sender, mail.message_id, mail.text, metadata=meta).status
    except (InvalidInput, Forbidden) as exc:
        log.info("email refused: %s", exc.code)  # the reason's code only, never the mail's text
        return "refused"


def poll_job(ctx: "Context", payload: dict[str, Any], helper: "Helper") -> None:
    """Poll once, then queue the next poll (the schedule lives in the job queue, so it survives
    restarts)."""
    try:
        poll_mailbox(ctx)
    finally:
        schedule(ctx, delay=ctx.settings.email_poll_seconds)


def schedule(source: "Deployment | Context", delay: float = 0.0) -> int | None:
    """Queue the mailbox's next poll unless one is pending; None when email is not configured."""
    if not source.settings.imap_host:
        return None
    user_id = mailbox_user(source)
    with source.store.write() as conn:
        return jobs.enqueue(conn, user_id, POLL_JOB, {}, dedupe_key=POLL_JOB, delay=delay, max_attempts=1)


def compose(settings: Settings, to: str, reply: str, thread: dict[str, str]) -> EmailMessage:
    """The reply as it is sent: threaded on the message it answers."""
    message = EmailMessage()
    message["From"] = settings.email_address
    message["To"] = to
    subject = thread.get("subject") or "our conversation"
    message["Subject"] = subject if subject.lower().startswith("re:") else f"Re: {subject}"
    message["Date"] = format_datetime(datetime.now(timezone.utc))
    message["Message-ID"] = make_msgid(domain=settings.email_address.rpartition("@")[2] or None)
    if thread.get("message_id"):
        message["In-Reply-To"] = thread["message_id"]
        message["References"] = " ".join(filter(None, (thread.get("references"), thread["message_id"])))
    message.set_content(reply)
    return message



def send_mail(settings: Settings, message: EmailMessage, what: str) -> None:
    """Send one message through the configured SMTP server; a failure is a retryable ProviderError
    naming ``what`` and the error's type, never the address or the text."""
    import smtplib  # here, not at the top (S20)

    try:
        with smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=settings.provider_timeout) as smtp:
            if settings.smtp_starttls:
                smtp.starttls()
            if settings.smtp_username:
                smtp.login(settings.smtp_username, settings.smtp_password)
            smtp.send_message(message)
    except (smtplib.SMTPException, OSError) as exc:
        raise ProviderError(f"{what} could not be sent ({type(exc).__name__})", "server", True) from None

def deliver(ctx: "Context", contact: Contact, reply: "Message", thread: dict[str, str]) -> None:
    """Send ``reply`` by SMTP; ``thread`` (the Message-ID, subject and references of the mail it
    answers) makes it thread in the person's mail client."""
    settings = ctx.settings
    if not (settings.smtp_host and settings.email_address):
        raise ConfigError("email replies need HEARTH_SMTP_HOST and HEARTH_EMAIL_ADDRESS")
    key = f"{reply.id}"
    if key in sent_parts(ctx.store.connection(), "email", reply.id):
        return
    message = compose(settings, contact.address, reply.content, thread)
    send_mail(settings, message, "the reply")
    record_sent(ctx, "email", key, reply, str(message["Message-ID"]), contact)
    log.info("email reply delivered")

