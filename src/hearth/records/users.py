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
from datetime import datetime, timedelta, timezone
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from hearth.errors import AuthError, Conflict, ConstraintError, InvalidInput, NotFound
from hearth.records.personas import NAME_RE
from hearth.store import Store
from hearth.store.queries import users as stored
from hearth.store.queries.users import AuthSession, User
from hearth.validation import check_text

SESSION_DAYS = 30
MIN_PASSWORD = 8
MAX_DISPLAY_NAME = 100
_hasher = PasswordHasher()


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class Users:
    def __init__(self, store: Store):
        self.store = store

    def owner(self) -> User:
        """The owner, created on first use so a fresh install works at once (G1)."""
        user = stored.owner(self.store.connection())
        if user is None:
            with self.store.write() as conn:
                user = stored.owner(conn)
                if user is None:
                    user = stored.insert_owner(conn)
        return user

    def create(self, name: str, password: str | None = None) -> User:
        """A new account; with ``password``, it can log in at once (both in one transaction)."""
        if not NAME_RE.match(name or ""):
            raise InvalidInput("user name must be 1-64 letters, digits, '.', '_' or '-'")
        if password is not None and (not isinstance(password, str) or len(password) < MIN_PASSWORD):
            raise InvalidInput(f"password must be at least {MIN_PASSWORD} characters")
        digest = _hasher.hash(password) if password is not None else None
        with self.store.write() as conn:
            try:
                user_id = stored.insert(conn, name, digest)
            except ConstraintError:
                raise Conflict(f"a user named {name!r} already exists") from None
            return self.get(user_id)

    def get(self, user_id: int) -> User:
        user = stored.get(self.store.connection(), user_id)
        if user is None:
            raise NotFound(f"no user {user_id}")
        return user

    def by_name(self, name: str) -> User:
        user = stored.by_name(self.store.connection(), name)
        if user is None:
            raise NotFound(f"no user named {name!r}")
        return user

    def list(self) -> list[User]:
        return stored.all_users(self.store.connection())

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
            stored.set_password_hash(conn, user_id, digest)
            # A new password ends every existing browser session of that user.
            stored.delete_sessions_of(conn, user_id)

    def password_configured(self) -> bool:
        """True once the owner has a password: the server then requires login everywhere (U2)."""
        return stored.owner_has_password(self.store.connection())

    def check_password(self, name: str, password: str) -> User:
        found = stored.by_name_with_hash(self.store.connection(), name)
        password_hash = found[1] if found else None
        try:
            # Verify against a dummy hash for unknown users so timing does not reveal names.
            _hasher.verify(password_hash or _dummy_hash(), password or "")
        except (VerificationError, InvalidHashError):
            raise AuthError("wrong user name or password") from None
        if found is None or password_hash is None:
            raise AuthError("wrong user name or password")
        if found[0].disabled:
            # Said only after the right password, so the message reveals nothing to a guesser.
            raise AuthError("this account is turned off; ask the owner")
        return found[0]

    def set_disabled(self, user_id: int, disabled: bool) -> User:
        """Turn an account off (its sessions end, its tokens stop working) or on again. The owner's
        own account cannot be turned off: nobody could turn it on again."""
        with self.store.write() as conn:
            user = self.get(user_id)
            if user.is_owner and disabled:
                raise InvalidInput("the owner's account cannot be turned off")
            stored.set_disabled(conn, user_id, disabled)
            if disabled:
                stored.delete_sessions_of(conn, user_id)
        return self.get(user_id)

    # -- sessions --------------------------------------------------------------------------
    def start_session(self, user_id: int) -> tuple[str, AuthSession]:
        token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        now = datetime.now(timezone.utc)
        expires = (now + timedelta(days=SESSION_DAYS)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        with self.store.write() as conn:
            stored.insert_session(conn, _digest(token), user_id, csrf, expires)
        return token, AuthSession(user_id, csrf)

    def session(self, token: str) -> AuthSession | None:
        return stored.live_session(self.store.connection(), _digest(token))

    def end_session(self, token: str) -> None:
        with self.store.write() as conn:
            stored.delete_session(conn, _digest(token))

    # -- API tokens ------------------------------------------------------------------------
    def create_token(self, user_id: int, name: str) -> str:
        name = (name or "").strip()
        if not name or len(name) > 100:
            raise InvalidInput("token name must be 1-100 characters")
        token = "hth_" + secrets.token_urlsafe(32)
        with self.store.write() as conn:
            self.get(user_id)
            stored.insert_token(conn, user_id, name, _digest(token))
        return token

    def token_user(self, token: str) -> int | None:
        return stored.token_user(self.store.connection(), _digest(token))

    def list_tokens(self, user_id: int) -> builtins.list[dict]:
        return stored.tokens_of(self.store.connection(), user_id)

    def revoke_token(self, user_id: int, token_id: int) -> None:
        with self.store.write() as conn:
            if stored.revoke_token(conn, user_id, token_id) == 0:
                raise NotFound(f"no active token {token_id}")


@functools.cache
def _dummy_hash() -> str:
    return _hasher.hash(secrets.token_urlsafe(16))
