"""Users, passwords, browser sessions and API tokens (G2, U2).

Every row in Hearth belongs to a user. A fresh deployment has one owner user. Passwords are hashed
with Argon2id; session cookies and API tokens are random 256-bit secrets stored only as SHA-256
digests, so a copy of the database does not let anyone log in.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from hearth.errors import AuthError, Conflict, ConstraintError, InvalidInput, NotFound
from hearth.records.personas import NAME_RE
from hearth.store import Row, Store, inserted_id, utcnow
from hearth.validation import check_text

SESSION_DAYS = 30
MIN_PASSWORD = 8
MAX_DISPLAY_NAME = 100
_hasher = PasswordHasher()


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


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class Users:
    def __init__(self, store: Store):
        self.store = store

    def owner(self) -> User:
        """The owner, created on first use so a fresh install works at once (G1)."""
        conn = self.store.connection()
        row = conn.execute("SELECT * FROM users WHERE is_owner = 1 ORDER BY id LIMIT 1").fetchone()
        if row is None:
            with self.store.write() as conn:
                row = conn.execute("SELECT * FROM users WHERE is_owner = 1 ORDER BY id LIMIT 1").fetchone()
                if row is None:
                    conn.execute("INSERT INTO users (name, is_owner, created_at) VALUES ('owner', 1, ?)",
                                 (utcnow(),))
                    row = conn.execute("SELECT * FROM users WHERE is_owner = 1").fetchone()
        return User.from_row(row)

    def create(self, name: str, password: str | None = None) -> User:
        """A new account; with ``password``, it can log in at once (both in one transaction)."""
        if not NAME_RE.match(name or ""):
            raise InvalidInput("user name must be 1-64 letters, digits, '.', '_' or '-'")
        if password is not None and (not isinstance(password, str) or len(password) < MIN_PASSWORD):
            raise InvalidInput(f"password must be at least {MIN_PASSWORD} characters")
        digest = _hasher.hash(password) if password is not None else None
        with self.store.write() as conn:
            try:
                cur = conn.execute("INSERT INTO users (name, password_hash, created_at) VALUES (?, ?, ?) RETURNING id",
                                   (name, digest, utcnow()))
            except ConstraintError:
                raise Conflict(f"a user named {name!r} already exists") from None
            return self.get(inserted_id(cur))

    def get(self, user_id: int) -> User:
        row = self.store.connection().execute("SELECT * FROM users WHERE id = ?", (user_id,)).fetchone()
        if row is None:
            raise NotFound(f"no user {user_id}")
        return User.from_row(row)

    def by_name(self, name: str) -> User:
        row = self.store.connection().execute("SELECT * FROM users WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise NotFound(f"no user named {name!r}")
        return User.from_row(row)

    def list(self) -> list[User]:
        return [User.from_row(r) for r in self.store.connection().execute("SELECT * FROM users ORDER BY id")]

    @staticmethod
    def check_display_name(value: Any) -> str | None:
        """A display name as stored: one line of at most MAX_DISPLAY_NAME characters; empty is None."""
        if value is None:
            return None
        value = check_text(value, "display name", max_chars=MAX_DISPLAY_NAME, strip=True)
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
            raise InvalidInput("display name must be one line of text")
        return value or None

    # -- passwords -------------------------------------------------------------------------
    def set_password(self, user_id: int, password: str) -> None:
        if not isinstance(password, str) or len(password) < MIN_PASSWORD:
            raise InvalidInput(f"password must be at least {MIN_PASSWORD} characters")
        digest = _hasher.hash(password)
        with self.store.write() as conn:
            self.get(user_id)
            conn.execute("UPDATE users SET password_hash = ? WHERE id = ?", (digest, user_id))
            # A new password ends every existing browser session of that user.
            conn.execute("DELETE FROM auth_sessions WHERE user_id = ?", (user_id,))

    def password_configured(self) -> bool:
        """True once the owner has a password: the server then requires login everywhere (U2)."""
        row = self.store.connection().execute(
            "SELECT 1 FROM users WHERE is_owner = 1 AND password_hash IS NOT NULL"
        ).fetchone()
        return row is not None

    def check_password(self, name: str, password: str) -> User:
        row = self.store.connection().execute("SELECT * FROM users WHERE name = ?", (name,)).fetchone()
        stored = row["password_hash"] if row else None
        try:
            # Verify against a dummy hash for unknown users so timing does not reveal names.
            _hasher.verify(stored or _dummy_hash(), password or "")
        except (VerificationError, InvalidHashError):
            raise AuthError("wrong user name or password") from None
        if stored is None:
            raise AuthError("wrong user name or password")
        if row["disabled_at"] is not None:
            # Said only after the right password, so the message reveals nothing to a guesser.
            raise AuthError("this account is turned off; ask the owner")
        return User.from_row(row)

    def set_disabled(self, user_id: int, disabled: bool) -> User:
        """Turn an account off (its sessions end, its tokens stop working) or on again. The owner's
        own account cannot be turned off: nobody could turn it on again."""
        with self.store.write() as conn:
            user = self.get(user_id)
            if user.is_owner and disabled:
                raise InvalidInput("the owner's account cannot be turned off")
            conn.execute("UPDATE users SET disabled_at = ? WHERE id = ?", (utcnow() if disabled else None, user_id))
            if disabled:
                conn.execute("DELETE FROM auth_sessions WHERE user_id = ?", (user_id,))
        return self.get(user_id)

    # -- sessions --------------------------------------------------------------------------
    def start_session(self, user_id: int) -> tuple[str, AuthSession]:
        token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        now = datetime.now(timezone.utc)
        expires = (now + timedelta(days=SESSION_DAYS)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        with self.store.write() as conn:
            conn.execute(
                "INSERT INTO auth_sessions (id, user_id, csrf_token, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
                (_digest(token), user_id, csrf, utcnow(), expires),
            )
        return token, AuthSession(user_id, csrf)

    def session(self, token: str) -> AuthSession | None:
        row = self.store.connection().execute(
            "SELECT user_id, csrf_token FROM auth_sessions WHERE id = ? AND expires_at > ?"
            " AND user_id NOT IN (SELECT id FROM users WHERE disabled_at IS NOT NULL)",
            (_digest(token), utcnow()),
        ).fetchone()
        return AuthSession(row["user_id"], row["csrf_token"]) if row else None

    def end_session(self, token: str) -> None:
        with self.store.write() as conn:
            conn.execute("DELETE FROM auth_sessions WHERE id = ?", (_digest(token),))

    # -- API tokens ------------------------------------------------------------------------
    def create_token(self, user_id: int, name: str) -> str:
        name = (name or "").strip()
        if not name or len(name) > 100:
            raise InvalidInput("token name must be 1-100 characters")
        token = "hth_" + secrets.token_urlsafe(32)
        with self.store.write() as conn:
            self.get(user_id)
            conn.execute(
                "INSERT INTO api_tokens (user_id, name, token_hash, created_at) VALUES (?, ?, ?, ?)",
                (user_id, name, _digest(token), utcnow()),
            )
        return token

    def token_user(self, token: str) -> int | None:
        row = self.store.connection().execute(
            "SELECT t.id, t.user_id FROM api_tokens t JOIN users u ON u.id = t.user_id"
            " WHERE t.token_hash = ? AND t.revoked_at IS NULL AND u.disabled_at IS NULL", (_digest(token),)
        ).fetchone()
        return row["user_id"] if row else None

    def list_tokens(self, user_id: int) -> builtins.list[dict]:
        rows = self.store.connection().execute(
            "SELECT id, name, created_at, revoked_at FROM api_tokens WHERE user_id = ? ORDER BY id", (user_id,)
        ).fetchall()
        return [dict(r) for r in rows]

    def revoke_token(self, user_id: int, token_id: int) -> None:
        with self.store.write() as conn:
            cur = conn.execute(
                "UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND user_id = ? AND revoked_at IS NULL",
                (utcnow(), token_id, user_id),
            )
            if cur.rowcount == 0:
                raise NotFound(f"no active token {token_id}")


@functools.cache
def _dummy_hash() -> str:
    return _hasher.hash(secrets.token_urlsafe(16))
