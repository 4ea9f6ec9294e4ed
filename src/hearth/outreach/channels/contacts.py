"""Allowed senders per user, and which channels each persona answers on."""

from __future__ import annotations

import re
from dataclasses import dataclass
from email.utils import parseaddr

from hearth.errors import Conflict, ConstraintError, InvalidInput, NotFound
from hearth.records.ledger import CHANNELS
from hearth.settings import Settings
from hearth.store import Connection, Store, inserted_id, utcnow

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


@dataclass(frozen=True)
class Contact:
    id: int
    user_id: int
    channel: str
    address: str
    persona_id: int | None
    created_at: str

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "channel": self.channel, "address": self.address,
                "persona_id": self.persona_id, "created_at": self.created_at}


def find(conn: Connection, channel: str, address: str) -> Contact | None:
    """The contact an inbound sender is, across all users (an address belongs to one user)."""
    try:
        address = normalise_address(channel, address)
    except InvalidInput:
        return None
    row = conn.execute("SELECT * FROM channel_contacts WHERE channel = ? AND address = ?",
                       (channel, address)).fetchone()
    return Contact(**dict(row)) if row else None


def _taken(channel: str) -> Conflict:
    return Conflict(f"that {channel} address cannot be added as a contact")


class Contacts:
    """A user's allowed senders: only these numbers and addresses reach the companion."""

    def __init__(self, store: Store, user_id: int, settings: Settings | None = None):
        self.store = store
        self.user_id = user_id
        self._settings = settings

    def _own(self, channel: str) -> str | None:
        """The deployment's own number or address on ``channel``: never a sender (a reply to it
        would come back in as a message)."""
        own = {"sms": "twilio_from_number", "email": "email_address"}[channel]
        value = getattr(self._settings, own, "") if self._settings is not None else ""
        try:
            return normalise_address(channel, value) if value else None
        except InvalidInput:
            return None

    def add(self, channel: str, address: str, persona_id: int | None = None) -> Contact:
        address = normalise_address(channel, address)
        with self.store.write() as conn:
            if persona_id is not None and not conn.execute(
                    "SELECT 1 FROM personas WHERE id = ? AND user_id = ?", (persona_id, self.user_id)).fetchone():
                raise NotFound(f"no persona {persona_id}")
            # An address belongs to one user, since an inbound text or mail must name its user (E10).
            # Taken by another user, by this one, or the deployment's own: one answer, so it never
            # says that another user has that number or address (G2).
            if address == self._own(channel) or conn.execute("SELECT 1 FROM channel_contacts WHERE channel = ? AND address = ?",
                            (channel, address)).fetchone():
                raise _taken(channel)
            try:
                cur = conn.execute(
                    "INSERT INTO channel_contacts (user_id, channel, address, persona_id, created_at)"
                    " VALUES (?, ?, ?, ?, ?) RETURNING id", (self.user_id, channel, address, persona_id, utcnow()))
            except ConstraintError:  # added by a concurrent request since the check above
                raise _taken(channel) from None
            return self.get(inserted_id(cur))

    def get(self, contact_id: int) -> Contact:
        row = self.store.connection().execute(
            "SELECT * FROM channel_contacts WHERE id = ? AND user_id = ?", (contact_id, self.user_id)).fetchone()
        if row is None:
            raise NotFound(f"no contact {contact_id}")
        return Contact(**dict(row))

    def list(self) -> list[Contact]:
        rows = self.store.connection().execute(
            "SELECT * FROM channel_contacts WHERE user_id = ? ORDER BY channel, address", (self.user_id,))
        return [Contact(**dict(r)) for r in rows]

    def remove(self, contact_id: int) -> None:
        with self.store.write() as conn:
            self.get(contact_id)
            conn.execute("DELETE FROM channel_contacts WHERE id = ? AND user_id = ?", (contact_id, self.user_id))


class PersonaChannels:
    """Which channels a persona answers on (E5). Messages on other channels are still kept."""

    def __init__(self, store: Store, user_id: int):
        self.store = store
        self.user_id = user_id

    def _persona(self, conn: Connection, persona_id: int) -> None:
        if not conn.execute("SELECT 1 FROM personas WHERE id = ? AND user_id = ?",
                            (persona_id, self.user_id)).fetchone():
            raise NotFound(f"no persona {persona_id}")

    def set(self, persona_id: int, channel: str, answers: bool) -> dict[str, bool]:
        if channel not in ANSWERABLE:
            raise InvalidInput(f"unknown channel {channel!r}; expected one of {', '.join(ANSWERABLE)}")
        with self.store.write() as conn:
            self._persona(conn, persona_id)
            conn.execute("INSERT INTO persona_channels (persona_id, channel, answers) VALUES (?, ?, ?)"
                         " ON CONFLICT (persona_id, channel) DO UPDATE SET answers = excluded.answers",
                         (persona_id, channel, int(bool(answers))))
        return self.get(persona_id)

    def get(self, persona_id: int) -> dict[str, bool]:
        conn = self.store.connection()
        self._persona(conn, persona_id)
        return {channel: answers(conn, persona_id, channel) for channel in ANSWERABLE}


def answers(conn: Connection, persona_id: int, channel: str) -> bool:
    row = conn.execute("SELECT answers FROM persona_channels WHERE persona_id = ? AND channel = ?",
                       (persona_id, channel)).fetchone()
    return True if row is None else bool(row[0])
