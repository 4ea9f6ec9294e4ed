"""Per-user settings of the memory layers: cadences, budgets and auto-approve per kind (G4).

Stored in ``layer_settings``; a key never set reads as its default.
"""

from __future__ import annotations

import json
from typing import Any

from hearth.errors import InvalidInput
from hearth.store import Store
from hearth.store.queries import layer_settings

# key -> (default, type, minimum, maximum). Cadences count chat messages (user and assistant).
SETTINGS: dict[str, tuple[Any, type, int, int]] = {
    "summary.every": (30, int, 2, 10_000),
    "live_context.every": (6, int, 1, 10_000),
    "live_context.stale_minutes": (60, int, 0, 1_000_000),
    "review.every": (20, int, 1, 10_000),
    "fragments.max": (6, int, 0, 100),
    "fragments.budget_chars": (3_000, int, 0, 100_000),
    "fragments.budget_tokens": (0, int, 0, 1_000_000),  # 0: no token budget beyond budget_chars
    "fragments.recursion_depth": (2, int, 0, 10),  # lorebook recursion passes (X3)
    # Lorebook entries' own token budget, a share of the model's input limit: SillyTavern's
    # "context %" (25 by default). Plain fragments keep fragments.max and budget_chars (X8).
    "fragments.lore_budget_percent": (25, int, 1, 100),
    "auto_approve.status_change": (False, bool, 0, 1),
    "auto_approve.fragment": (False, bool, 0, 1),
    "auto_approve.memory": (False, bool, 0, 1),
    "auto_approve.checkin": (False, bool, 0, 1),
    # Search-log entries older than this many days are removed as new ones are written (B5); 0 keeps all.
    "search_log.retention_days": (0, int, 0, 36_500),
}


class LayerSettings:
    """Owner settings of the memory layers, stored per user; auto-approve is off by default (G4)."""

    def __init__(self, store: Store, user_id: int):
        self.store = store
        self.user_id = user_id

    def get(self, key: str) -> Any:
        if key not in SETTINGS:
            raise InvalidInput(f"unknown layer setting {key!r}")
        value = layer_settings.get(self.store.connection(), self.user_id, key)
        return json.loads(value) if value is not None else SETTINGS[key][0]

    def all(self) -> dict[str, Any]:
        stored = layer_settings.all_for_user(self.store.connection(), self.user_id)
        return {k: json.loads(stored[k]) if k in stored else spec[0] for k, spec in SETTINGS.items()}

    def set(self, key: str, value: Any) -> Any:
        value = self.coerce(key, value)
        with self.store.write() as conn:
            layer_settings.put(conn, self.user_id, key, json.dumps(value))
        return value

    @staticmethod
    def coerce(key: str, value: Any) -> Any:
        if key not in SETTINGS:
            raise InvalidInput(f"unknown layer setting {key!r}; known: {', '.join(SETTINGS)}")
        _default, kind, low, high = SETTINGS[key]
        if kind is bool:
            if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                return value.strip().lower() in ("1", "true", "yes", "on")
            if not isinstance(value, bool):
                raise InvalidInput(f"{key} must be true or false")
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise InvalidInput(f"{key} must be a whole number from {low} to {high}")
        return value
