"""Model-written work behind one ``Helper`` interface, with offline versions (G3).

``helper_for(deployment)`` picks the implementation from settings: when the configured provider is
``offline`` (no key, no base URL), the deterministic ``OfflineHelper``; otherwise ``ModelHelper``
over the same provider the companion uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from hearth.memory.helpers.base import (
    SUMMARY_MAX_WORDS,
    CapsuleResult,
    FactSuggestion,
    FragmentSuggestion,
    Helper,
    HelperOutputError,
    LiveContextResult,
    MemorySuggestion,
    ReviewInput,
    StateChange,
    StatusField,
    SummaryResult,
    TurnText,
)
from hearth.memory.helpers.model import ModelHelper
from hearth.memory.helpers.offline import OfflineHelper

if TYPE_CHECKING:
    from hearth.providers.base import Provider
    from hearth.settings import Settings

__all__ = [
    "SUMMARY_MAX_WORDS", "CapsuleResult", "FactSuggestion", "FragmentSuggestion", "Helper", "HelperOutputError", "LiveContextResult",
    "MemorySuggestion", "ModelHelper", "OfflineHelper", "ReviewInput", "StateChange", "StatusField", "SummaryResult",
    "TurnText", "helper_for",
]


class WithProvider(Protocol):
    """Where the settings and the provider come from: a ``Hearth`` or a user's ``Context``."""

    @property
    def settings(self) -> Settings: ...

    @property
    def provider(self) -> Provider: ...


def helper_for(source: WithProvider) -> Helper:
    from hearth.providers import choose_provider_name

    if choose_provider_name(source.settings) == "offline":
        return OfflineHelper()
    return ModelHelper(source.provider)
