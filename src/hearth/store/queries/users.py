"""Statements of ``users``, ``auth_sessions`` and ``api_tokens`` (G2, U2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hearth.store.connection import inserted_id, utcnow
from hearth.store.engine import Connection, Row


@dataclass(frozen=True)
class User:
    id: int
    name: str
    is_owner: bool
    has_password: bool
    created_at: str
    display_name: str | None = None  # what companions call the person ({{user}}, X3); None: "the person"
    disabled: bool = False  # the owner turned this account off: no login, no API token (W10)

    @classmethod
    def from_row(cls, row: Row) -> "User":
        return cls(row["id"], row["name"], bool(row["is_owner"]), row["password_hash"] is not None,
                   row["created_at"], row["display_name"], row["disabled_at"] is not None)


@dataclass(frozen=True)
class AuthSession:
    user_id: int
    csrf_token: str


def owner(conn: Connection) -> User | None:
    """The first owner, or None."""
    row = conn.execute("SELECT * FROM users WHERE is_owner = 1 ORDER BY id LIMIT 1").fetchone()
    return User.from_row(row) if row else None


def insert_owner(conn: Connection) -> User:
    conn.execute("INSERT INTO users (name, is_owner, created_at) VALUES ('owner', 1, ?)", (utcnow(),))
    return User.from_row(conn.execute("SELECT * FROM users WHERE is_owner = 1").fetchone())


def insert(conn: Connection, name: str, password_hash: str | None) -> int:
    """A new user's id; a taken name raises ``ConstraintError``."""
    cur = conn.execute("INSERT INTO users (name, password_hash, created_at) VALUES (?, ?, ?) RETURNING id",
                       (name, password_hash, utcnow()))
    return inserted_id(cur)


def get(conn: Connection, user_id: int) -> User | None:
    row = conn.execute("SELECT * FROM users WHERE id = ?", (user_id,)).fetchone()
    return User.from_row(row) if row else None


def by_name(conn: Connection, name: str) -> User | None:
    row = conn.execute("SELECT * FROM users WHERE name = ?", (name,)).fetchone()
    return User.from_row(row) if row else None


def by_name_with_hash(conn: Connection, name: str) -> tuple[User, str | None] | None:
    """A user and their password hash, to check a login."""
    row = conn.execute("SELECT * FROM users WHERE name = ?", (name,)).fetchone()
    return (User.from_row(row), row["password_hash"]) if row else None


def all_users(conn: Connection) -> list[User]:
    return [User.from_row(r) for r in conn.execute("SELECT * FROM users ORDER BY id")]


def ids(conn: Connection) -> list[int]:
    return [user_id for (user_id,) in conn.execute("SELECT id FROM users").fetchall()]


def set_password_hash(conn: Connection, user_id: int, password_hash: str) -> None:
    conn.execute("UPDATE users SET password_hash = ? WHERE id = ?", (password_hash, user_id))


def owner_has_password(conn: Connection) -> bool:
    return conn.execute("SELECT 1 FROM users WHERE is_owner = 1 AND password_hash IS NOT NULL").fetchone() is not None


def set_disabled(conn: Connection, user_id: int, disabled: bool) -> None:
    conn.execute("UPDATE users SET disabled_at = ? WHERE id = ?", (utcnow() if disabled else None, user_id))


def insert_session(conn: Connection, digest: str, user_id: int, csrf_token: str, expires_at: str) -> None:
    conn.execute(
        "INSERT INTO auth_sessions (id, user_id, csrf_token, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
        (digest, user_id, csrf_token, utcnow(), expires_at),
    )


def live_session(conn: Connection, digest: str) -> AuthSession | None:
    """The unexpired session with that digest of an account that is not turned off."""
    row = conn.execute(
        "SELECT user_id, csrf_token FROM auth_sessions WHERE id = ? AND expires_at > ?"
        " AND user_id NOT IN (SELECT id FROM users WHERE disabled_at IS NOT NULL)",
        (digest, utcnow()),
    ).fetchone()
    return AuthSession(row["user_id"], row["csrf_token"]) if row else None


def delete_session(conn: Connection, digest: str) -> None:
    conn.execute("DELETE FROM auth_sessions WHERE id = ?", (digest,))


def delete_sessions_of(conn: Connection, user_id: int) -> None:
    conn.execute("DELETE FROM auth_sessions WHERE user_id = ?", (user_id,))


def insert_token(conn: Connection, user_id: int, name: str, digest: str) -> None:
    conn.execute(
        "INSERT INTO api_tokens (user_id, name, token_hash, created_at) VALUES (?, ?, ?, ?)",
        (user_id, name, digest, utcnow()),
    )


def token_user(conn: Connection, digest: str) -> int | None:
    """The user of a live token of an account that is not turned off."""
    row = conn.execute(
        "SELECT t.id, t.user_id FROM api_tokens t JOIN users u ON u.id = t.user_id"
        " WHERE t.token_hash = ? AND t.revoked_at IS NULL AND u.disabled_at IS NULL", (digest,)
    ).fetchone()
    return row["user_id"] if row else None


def tokens_of(conn: Connection, user_id: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT id, name, created_at, revoked_at FROM api_tokens WHERE user_id = ? ORDER BY id", (user_id,)
    ).fetchall()
    return [dict(r) for r in rows]


def revoke_token(conn: Connection, user_id: int, token_id: int) -> int:
    """Revoke an active token; how many were (0 or 1)."""
    return conn.execute(
        "UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND user_id = ? AND revoked_at IS NULL",
        (utcnow(), token_id, user_id),
    ).rowcount


def display_name(conn: Connection, user_id: int) -> str | None:
    return conn.execute("SELECT display_name FROM users WHERE id = ?", (user_id,)).fetchone()[0]


def set_display_name(conn: Connection, user_id: int, value: str | None) -> None:
    conn.execute("UPDATE users SET display_name = ? WHERE id = ?", (value, user_id))
