"""Allowed senders per user, and which channels each persona answers on.

An address routes inbound messages only once its owner has proven it (U9): adding one records a
claim and sends a six-digit code to it; entering that code makes it a contact. Until then every
user may claim any address and gets the same answer, so adding an address never tells anyone
whether another user has it. The code is kept only as a salted hash, expires, is void after
``contact_code_attempts`` wrong tries, and an address gets at most ``contact_code_sends_per_hour``
codes an hour from one user (and three times that from all users together).
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parseaddr
from typing import Callable

from hearth.errors import InvalidInput, NotFound, RateLimited
from hearth.records.ledger import CHANNELS
from hearth.settings import Settings
from hearth.store import Connection, Store, utcnow
from hearth.store.queries import contacts as queries
from hearth.store.queries import personas
from hearth.store.queries.contacts import Contact

# Channels a person can write in from outside Hearth; their addresses identify the sender.
MESSAGING = ("sms", "email")
# Channels a persona can be told not to answer on ("import" is not a conversation channel).
ANSWERABLE = tuple(sorted(CHANNELS - {"import"}))
_PHONE = re.compile(r"^\+[1-9][0-9]{6,14}$")


def normalise_address(channel: str, address: str) -> str:
    """The one spelling an address is stored and looked up by (E.164 numbers, lower-case mail)."""
    if not isinstance(address, str):
        raise InvalidInput("an address must be text")
    if channel == "sms":
        number = re.sub(r"[\s().-]", "", address)
        if not _PHONE.match(number):
            raise InvalidInput("a phone number must be in international form, e.g. +15551234567")
        return number
    if channel == "email":
        _name, addr = parseaddr(address)
        addr = addr.strip().lower()
        if addr.count("@") != 1 or addr.startswith("@") or addr.endswith("@") or len(addr) > 254:
            raise InvalidInput("not an email address")
        return addr
    raise InvalidInput(f"contacts are for messaging channels ({', '.join(MESSAGING)}), not {channel!r}")


CODE_SENT = "We sent a six-digit code to this address. Enter it to verify the address."


@dataclass(frozen=True)
class Claim:
    """An address a user added and has not proven yet. What it says is the same whoever else has
    the address (U9): no id, no sign of another user."""

    channel: str
    address: str
    persona_id: int | None

    def to_dict(self) -> dict[str, object]:
        return {"channel": self.channel, "address": self.address, "persona_id": self.persona_id,
                "verified": False, "detail": CODE_SENT}


# How a code reaches an address: sender(settings, channel, address, code). Set by the deployment
# (``codes.send``: Twilio for SMS, SMTP for email); it never logs the code.
Sender = Callable[[Settings, str, str, str], None]


def _stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _digest(salt: str, code: str) -> str:
    return hmac.new(bytes.fromhex(salt), code.encode(), hashlib.sha256).hexdigest()


def find(conn: Connection, channel: str, address: str) -> Contact | None:
    """The contact an inbound sender is, across all users: verified addresses only (U9), and a
    verified address belongs to one user."""
    try:
        address = normalise_address(channel, address)
    except InvalidInput:
        return None
    return queries.by_address(conn, channel, address)


class Contacts:
    """A user's allowed senders: only these numbers and addresses reach the companion."""

    def __init__(self, store: Store, user_id: int, settings: Settings | None = None, *,
                 sender: Sender | None = None, clock: Callable[[], float] = time.time):
        self.store = store
        self.user_id = user_id
        self._settings = settings or Settings()
        self._sender = sender
        self.clock = clock

    def _own(self, channel: str) -> str | None:
        """The deployment's own number or address on ``channel``: never a sender (a reply to it
        would come back in as a message)."""
        own = {"sms": "twilio_from_number", "email": "email_address"}[channel]
        value = getattr(self._settings, own, "")
        try:
            return normalise_address(channel, value) if value else None
        except InvalidInput:
            return None

    def _persona(self, conn: Connection, persona_id: int | None) -> None:
        if persona_id is not None and not personas.exists(conn, self.user_id, persona_id):
            raise NotFound(f"no persona {persona_id}")

    def add(self, channel: str, address: str, persona_id: int | None = None) -> Claim:
        """Claim an address and send it a code. The answer is the same whether the address is
        new, another user's, this user's own, or the deployment's (U9)."""
        address = normalise_address(channel, address)
        with self.store.write() as conn:
            self._persona(conn, persona_id)
            queries.upsert_claim(conn, self.user_id, channel, address, persona_id, utcnow())
        self.send_code(channel, address)
        return Claim(channel, address, persona_id)

    def send_code(self, channel: str, address: str) -> Claim:
        """Send a new code for this user's claim (the earlier one stops working)."""
        address = normalise_address(channel, address)
        settings = self._settings
        now = self.clock()
        hour_ago = _stamp(now - 3600)
        code = f"{secrets.randbelow(10 ** 6):06d}"
        salt = secrets.token_hex(16)
        with self.store.write() as conn:
            claim = queries.claim_persona(conn, self.user_id, channel, address)
            if claim is None:
                raise NotFound(f"no unverified {channel} address like that; add it first")
            mine, everyone = queries.codes_sent_since(conn, self.user_id, channel, address, hour_ago)
            if mine >= settings.contact_code_sends_per_hour:
                # Counts only this user's own requests, so it says nothing about anyone else.
                raise RateLimited("too many codes were sent to this address; try again within the hour",
                                  retry_after=3600)
            queries.set_code(conn, self.user_id, channel, address, _digest(salt, code), salt,
                             _stamp(now + settings.contact_code_minutes * 60))
            # Past the limit for all users together, or the deployment's own address: the answer is
            # the same but nothing is sent, so nobody can flood an address with codes.
            send = everyone < 3 * settings.contact_code_sends_per_hour and address != self._own(channel)
            if send:
                queries.record_code_sent(conn, self.user_id, channel, address, _stamp(now))
        if send:
            if self._sender is None:
                raise InvalidInput("this deployment cannot send verification codes")
            self._sender(settings, channel, address, code)
        return Claim(channel, address, claim[0])

    def verify(self, channel: str, address: str, code: str) -> Contact:
        """Prove the address with its code: it becomes this user's contact and routes inbound
        messages to this user. Whoever proves an address last holds it (a number that changed
        hands goes to its new holder); other users' unverified claims are untouched."""
        address = normalise_address(channel, address)
        if not isinstance(code, str):
            raise InvalidInput("the code must be text")
        code = code.strip()
        now = _stamp(self.clock())
        with self.store.write() as conn:
            claim = queries.claim(conn, self.user_id, channel, address)
            good = (claim is not None and claim.code_hash is not None and claim.expires_at is not None
                    and claim.expires_at > now and claim.code_salt is not None
                    and re.fullmatch(r"[0-9]{6}", code) is not None
                    and hmac.compare_digest(_digest(claim.code_salt, code), claim.code_hash))
            if claim is not None and not good and claim.code_hash is not None:
                # A wrong try counts (committed before the error below); the last one voids the code.
                void = claim.attempts + 1 >= self._settings.contact_code_attempts
                queries.count_wrong_try(conn, claim.id, void)
            if good:
                assert claim is not None
                # The verified holder takes routing: a row for this address (another user's, or
                # this user's own from before) gives way to this one.
                queries.delete_address(conn, channel, address)
                queries.delete_claim(conn, claim.id)
                contact_id = queries.insert(conn, self.user_id, channel, address, claim.persona_id,
                                            claim.created_at, now)
        if not good:
            raise InvalidInput("that code is wrong, used up or expired; ask for a new one")
        return self.get(contact_id)

    def trust(self, channel: str, address: str, persona_id: int | None = None) -> Contact:
        """Make an address a contact without a code: for the operator's own scripts, who vouch for
        it themselves. The HTTP API and the CLI never call this."""
        address = normalise_address(channel, address)
        with self.store.write() as conn:
            self._persona(conn, persona_id)
            queries.delete_address(conn, channel, address)
            stamp = utcnow()
            contact_id = queries.insert(conn, self.user_id, channel, address, persona_id, stamp, stamp)
        return self.get(contact_id)

    def get(self, contact_id: int) -> Contact:
        contact = queries.get(self.store.connection(), contact_id, self.user_id)
        if contact is None:
            raise NotFound(f"no contact {contact_id}")
        return contact

    def list(self) -> list[Contact]:
        return queries.for_user(self.store.connection(), self.user_id)

    def pending(self) -> "builtins.list[Claim]":
        """This user's addresses waiting for their code."""
        return [Claim(*r) for r in queries.claims_for_user(self.store.connection(), self.user_id)]

    def remove(self, contact_id: int) -> None:
        with self.store.write() as conn:
            self.get(contact_id)
            queries.delete(conn, contact_id, self.user_id)


class PersonaChannels:
    """Which channels a persona answers on (E5). Messages on other channels are still kept."""

    def __init__(self, store: Store, user_id: int):
        self.store = store
        self.user_id = user_id

    def _persona(self, conn: Connection, persona_id: int) -> None:
        if not personas.exists(conn, self.user_id, persona_id):
            raise NotFound(f"no persona {persona_id}")

    def set(self, persona_id: int, channel: str, answers: bool) -> dict[str, bool]:
        if channel not in ANSWERABLE:
            raise InvalidInput(f"unknown channel {channel!r}; expected one of {', '.join(ANSWERABLE)}")
        with self.store.write() as conn:
            self._persona(conn, persona_id)
            queries.set_answers(conn, persona_id, channel, answers)
        return self.get(persona_id)

    def get(self, persona_id: int) -> dict[str, bool]:
        conn = self.store.connection()
        self._persona(conn, persona_id)
        return {channel: answers(conn, persona_id, channel) for channel in ANSWERABLE}


def answers(conn: Connection, persona_id: int, channel: str) -> bool:
    return queries.answers(conn, persona_id, channel)
