"""Messaging contacts: verified addresses (``channel_contacts``), claims waiting for their code
(``contact_claims``), the codes sent (``contact_code_sends``) and the channels each persona
answers on (``persona_channels``)."""

from __future__ import annotations

from dataclasses import dataclass

from hearth.store import Connection, Row, inserted_id


@dataclass(frozen=True)
class Contact:
    """A verified address: inbound messages from it reach its user."""

    id: int
    user_id: int
    channel: str
    address: str
    persona_id: int | None
    created_at: str
    verified_at: str | None = None

    @classmethod
    def from_row(cls, row: Row) -> "Contact":
        return cls(**dict(row))

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "channel": self.channel, "address": self.address,
                "persona_id": self.persona_id, "created_at": self.created_at, "verified_at": self.verified_at}


@dataclass(frozen=True)
class ClaimRow:
    """A claim as stored, its code's hash and salt included."""

    id: int
    persona_id: int | None
    created_at: str
    code_hash: str | None
    code_salt: str | None
    expires_at: str | None
    attempts: int


# -- channel_contacts ---------------------------------------------------------------------------
def by_address(conn: Connection, channel: str, address: str) -> Contact | None:
    row = conn.execute("SELECT * FROM channel_contacts WHERE channel = ? AND address = ?",
                       (channel, address)).fetchone()
    return Contact.from_row(row) if row else None


def get(conn: Connection, contact_id: int, user_id: int | None = None) -> Contact | None:
    """The contact with this id; with ``user_id``, only if it is that user's."""
    if user_id is None:
        row = conn.execute("SELECT * FROM channel_contacts WHERE id = ?", (contact_id,)).fetchone()
    else:
        row = conn.execute("SELECT * FROM channel_contacts WHERE id = ? AND user_id = ?",
                           (contact_id, user_id)).fetchone()
    return Contact.from_row(row) if row else None


def for_user(conn: Connection, user_id: int) -> list[Contact]:
    rows = conn.execute("SELECT * FROM channel_contacts WHERE user_id = ? ORDER BY channel, address", (user_id,))
    return [Contact.from_row(r) for r in rows]


def for_persona_first(conn: Connection, user_id: int, channel: str, persona_id: int) -> Contact | None:
    """The user's contact on ``channel`` that talks to this persona, else their first there."""
    row = conn.execute(
        "SELECT * FROM channel_contacts WHERE user_id = ? AND channel = ?"
        " ORDER BY persona_id IS DISTINCT FROM ?, id LIMIT 1", (user_id, channel, persona_id)).fetchone()
    return Contact.from_row(row) if row else None


def delete_address(conn: Connection, channel: str, address: str) -> None:
    conn.execute("DELETE FROM channel_contacts WHERE channel = ? AND address = ?", (channel, address))


def insert(conn: Connection, user_id: int, channel: str, address: str, persona_id: int | None, created_at: str,
           verified_at: str) -> int:
    return inserted_id(conn.execute(
        "INSERT INTO channel_contacts (user_id, channel, address, persona_id, created_at, verified_at)"
        " VALUES (?, ?, ?, ?, ?, ?) RETURNING id", (user_id, channel, address, persona_id, created_at, verified_at)))


def delete(conn: Connection, contact_id: int, user_id: int) -> None:
    conn.execute("DELETE FROM channel_contacts WHERE id = ? AND user_id = ?", (contact_id, user_id))


# -- contact_claims and contact_code_sends --------------------------------------------------------
def upsert_claim(conn: Connection, user_id: int, channel: str, address: str, persona_id: int | None,
                 created_at: str) -> None:
    conn.execute(
        "INSERT INTO contact_claims (user_id, channel, address, persona_id, created_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (user_id, channel, address) DO UPDATE SET persona_id = excluded.persona_id",
        (user_id, channel, address, persona_id, created_at))


def claim(conn: Connection, user_id: int, channel: str, address: str) -> ClaimRow | None:
    row = conn.execute("SELECT * FROM contact_claims WHERE user_id = ? AND channel = ? AND address = ?",
                       (user_id, channel, address)).fetchone()
    if row is None:
        return None
    return ClaimRow(row["id"], row["persona_id"], row["created_at"], row["code_hash"], row["code_salt"],
                    row["expires_at"], row["attempts"])


def claim_persona(conn: Connection, user_id: int, channel: str, address: str) -> tuple[int | None] | None:
    """The claim's persona as a one-value tuple (a claim may name no persona), or None without a claim."""
    row = conn.execute("SELECT persona_id FROM contact_claims WHERE user_id = ? AND channel = ? AND address = ?",
                       (user_id, channel, address)).fetchone()
    return None if row is None else (row[0],)


def claims_for_user(conn: Connection, user_id: int) -> list[tuple[str, str, int | None]]:
    """(channel, address, persona_id) of the user's addresses waiting for their code."""
    rows = conn.execute(
        "SELECT channel, address, persona_id FROM contact_claims WHERE user_id = ? ORDER BY channel, address",
        (user_id,))
    return [(r[0], r[1], r[2]) for r in rows]


def codes_sent_since(conn: Connection, user_id: int, channel: str, address: str, since: str) -> tuple[int, int]:
    """Codes sent to the address since ``since``: (by this user, by everyone)."""
    mine, everyone = conn.execute(
        "SELECT coalesce(sum(CASE WHEN user_id = ? THEN 1 ELSE 0 END), 0), count(*) FROM contact_code_sends"
        " WHERE channel = ? AND address = ? AND sent_at > ?", (user_id, channel, address, since)).fetchone()
    return int(mine), int(everyone)


def set_code(conn: Connection, user_id: int, channel: str, address: str, code_hash: str, salt: str,
             expires_at: str) -> None:
    conn.execute("UPDATE contact_claims SET code_hash = ?, code_salt = ?, expires_at = ?, attempts = 0"
                 " WHERE user_id = ? AND channel = ? AND address = ?",
                 (code_hash, salt, expires_at, user_id, channel, address))


def record_code_sent(conn: Connection, user_id: int, channel: str, address: str, sent_at: str) -> None:
    conn.execute("INSERT INTO contact_code_sends (user_id, channel, address, sent_at) VALUES (?, ?, ?, ?)",
                 (user_id, channel, address, sent_at))


def count_wrong_try(conn: Connection, claim_id: int, void: bool) -> None:
    """One more wrong try; ``void`` clears the code."""
    conn.execute("UPDATE contact_claims SET attempts = attempts + 1,"
                 " code_hash = CASE WHEN ? THEN NULL ELSE code_hash END WHERE id = ?", (void, claim_id))


def delete_claim(conn: Connection, claim_id: int) -> None:
    conn.execute("DELETE FROM contact_claims WHERE id = ?", (claim_id,))


# -- persona_channels -----------------------------------------------------------------------------
def set_answers(conn: Connection, persona_id: int, channel: str, answers: bool) -> None:
    conn.execute("INSERT INTO persona_channels (persona_id, channel, answers) VALUES (?, ?, ?)"
                 " ON CONFLICT (persona_id, channel) DO UPDATE SET answers = excluded.answers",
                 (persona_id, channel, int(bool(answers))))


def answers(conn: Connection, persona_id: int, channel: str) -> bool:
    """Whether the persona answers on ``channel`` (it does unless told not to)."""
    row = conn.execute("SELECT answers FROM persona_channels WHERE persona_id = ? AND channel = ?",
                       (persona_id, channel)).fetchone()
    return True if row is None else bool(row[0])
