"""Hearth: a self-hosted memory and continuity engine for AI companions.

    from hearth import Hearth
    hearth = Hearth.open("~/companion")
    me = hearth.scope()
    chat = me.new_chat().conversation
    reply = me.send(chat.id, "Good morning")
"""

from typing import TYPE_CHECKING, Any

from .errors import (
    AuthError,
    ConfigError,
    Conflict,
    DispatchRefused,
    Forbidden,
    HearthError,
    InvalidInput,
    NotFound,
    ProviderError,
    RateLimited,
    SchemaError,
    StoreBusy,
    StoreError,
    TooLarge,
)

if TYPE_CHECKING:
    from hearth.scope import Hearth, Scope
    from hearth.settings import Settings

__version__ = "0.1.0"

__all__ = [
    "Hearth", "Scope", "Settings",
    "HearthError", "ConfigError", "StoreError", "StoreBusy", "SchemaError", "InvalidInput", "TooLarge", "NotFound",
    "Conflict", "AuthError", "Forbidden", "RateLimited", "ProviderError", "DispatchRefused",
]


def __getattr__(name: str) -> Any:
    # ``Hearth`` and ``Scope`` pull in every layer (numpy, the store, the providers), ``Settings``
    # dataclasses and logging; a short-lived command that needs none of them (``hearth --help``)
    # should not pay for that (S20).
    if name in ("Hearth", "Scope"):
        from hearth import scope

        return getattr(scope, name)
    if name == "Settings":
        from hearth.settings import Settings

        return Settings
    raise AttributeError(f"module 'hearth' has no attribute {name!r}")
