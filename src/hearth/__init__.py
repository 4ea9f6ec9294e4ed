"""Hearth: a self-hosted memory and continuity engine for AI companions.

    from hearth import Hearth
    hearth = Hearth.open("~/companion")
    me = hearth.scope()
    chat = me.new_chat().conversation
    reply = me.send(chat.id, "Good morning")
"""

from hearth.scope import Hearth, Scope

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
from .settings import Settings

__version__ = "0.1.0"

__all__ = [
    "Hearth", "Scope", "Settings",
    "HearthError", "ConfigError", "StoreError", "StoreBusy", "SchemaError", "InvalidInput", "TooLarge", "NotFound",
    "Conflict", "AuthError", "Forbidden", "RateLimited", "ProviderError", "DispatchRefused",
]
