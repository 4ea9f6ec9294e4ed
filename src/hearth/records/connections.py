"""The model connection a person chose in the app (W10): which provider answers, with which model,
key and base URL.

One row per user in ``model_connections``. A user without a row uses the owner's, so a household
connects once and every member's chat works; a member who stores their own uses it instead (their
own key, their own bill). Environment variables and the config file still win over both: a
deployment configured there is the operator's choice (``providers.select.environment_chooses``).

The key is stored in the database, on the server, in plain text: it has to be sent to the provider
as it is, so hashing cannot work, and a key the server could decrypt unattended would sit beside
its decryption key in the same home folder. Whoever can read the home folder (or a backup of the
database) can read the key, so that folder must be readable by the server's account only. It is
never returned whole (``key_hint``), never logged, and never exported (``interop.export``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from hearth.errors import InvalidInput
from hearth.store import Store
from hearth.store.queries import model_connections
from hearth.store.queries.model_connections import ModelConnection, key_hint
from hearth.validation import check_text

__all__ = ["ModelConnection", "key_hint", "Connections", "check_connection", "PROVIDERS"]

PROVIDERS = ("offline", "openai", "openai-chat", "anthropic")
MAX_KEY = 1_000
MAX_URL = 2_000
MAX_MODEL = 200


def check_connection(provider: Any, model: Any, base_url: Any, api_key: Any, *,
                     need_model: bool = False) -> tuple[str, str, str, str]:
    """The four values as stored, or ``InvalidInput`` naming what is missing or wrong
    (``need_model``: an OpenAI-compatible server's model names are its own, so one must be chosen)."""
    if provider not in PROVIDERS:
        raise InvalidInput("provider must be one of offline, openai, openai-chat or anthropic")
    model = check_text(model or "", "model", max_chars=MAX_MODEL, strip=True)
    base_url = check_text(base_url or "", "base URL", max_chars=MAX_URL, strip=True)
    api_key = check_text(api_key or "", "API key", max_chars=MAX_KEY, strip=True)
    if not model.isprintable():
        raise InvalidInput("the model name must be one line of printable characters")
    for label, value in (("base URL", base_url), ("API key", api_key)):
        if not value.isprintable() or any(ch.isspace() for ch in value):
            raise InvalidInput(f"the {label} must be one line without spaces")
    if base_url:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidInput("the base URL must start with http:// or https://, e.g. http://localhost:11434/v1")
    if provider == "offline":
        return provider, "", "", ""
    if provider == "openai-chat" and not base_url:
        raise InvalidInput("an OpenAI-compatible server needs its base URL, e.g. http://localhost:11434/v1 for Ollama")
    if provider == "openai-chat" and need_model and not model:
        raise InvalidInput("choose one of the server's models")
    if provider in ("openai", "anthropic") and not api_key:
        raise InvalidInput(f"{'OpenAI' if provider == 'openai' else 'Anthropic'} needs an API key")
    return provider, model, base_url, api_key


class Connections:
    """The stored connections; the key goes in and only its hint comes out of the web layer."""

    def __init__(self, store: Store):
        self.store = store

    def get(self, user_id: int) -> ModelConnection | None:
        return model_connections.get(self.store.connection(), user_id)

    def save(self, user_id: int, provider: Any, model: Any = "", base_url: Any = "",
             api_key: Any = None) -> ModelConnection:
        """Store a user's connection. ``api_key`` None keeps the stored key (a page never has it to
        send back) while provider and base URL stay the same; "" removes it."""
        if api_key is None:
            api_key = self.stored_key(user_id, provider, base_url)
        values = check_connection(provider, model, base_url, api_key, need_model=True)
        from hearth.records import ledger

        with self.store.write() as conn:
            model_connections.replace(conn, user_id, *values)
            # What changed, never the key or the address (R3).
            ledger.append(conn, user_id=user_id, kind="connection.saved",
                          payload={"provider": values[0], "has_key": bool(values[3])})
        saved = self.get(user_id)
        assert saved is not None
        return saved

    def stored_key(self, user_id: int, provider: Any, base_url: Any) -> str:
        """The user's own stored key, only for the same provider and address: a key is never sent
        anywhere its owner did not send it (a changed address needs the key typed again)."""
        current = self.get(user_id)
        if current and current.provider == provider and current.base_url == (base_url or "").strip():
            return current.api_key
        return ""

    def clear(self, user_id: int) -> bool:
        from hearth.records import ledger

        with self.store.write() as conn:
            gone = model_connections.delete(conn, user_id) > 0
            if gone:
                ledger.append(conn, user_id=user_id, kind="connection.cleared", payload={})
            return gone
