"""Model-written work behind one ``Helper`` interface, with offline versions (G3).

``helper_for(hearth)`` picks the implementation from settings: when the configured provider is
``offline`` (no key, no base URL), the deterministic ``OfflineHelper``; otherwise ``ModelHelper``
over the same provider the companion uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    from hearth.scope import Hearth

__all__ = [
    "SUMMARY_MAX_WORDS", "CapsuleResult", "FactSuggestion", "FragmentSuggestion", "Helper", "HelperOutputError", "LiveContextResult",
    "MemorySuggestion", "ModelHelper", "OfflineHelper", "ReviewInput", "StateChange", "StatusField", "SummaryResult",
    "TurnText", "helper_for",
]


def helper_for(hearth: "Hearth") -> Helper:
    from hearth.providers import choose_provider_name

    if choose_provider_name(hearth.settings) == "offline":
        return OfflineHelper()
    return ModelHelper(hearth.provider)
