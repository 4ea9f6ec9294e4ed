"""Interop: client chats pinned to threads (X1) and what imports created (X3)."""

from __future__ import annotations

from .base import Entry, Exempt, Plain

AREA = "interop"

STORED: list[Entry] = [
    Exempt("client_chats", AREA, (Plain("a digest of a client's chat id or of its first turns", "key"),)),
    Exempt("import_sources", AREA, (Plain("a kind of import and a digest of its source", "kind", "source_key"),)),
]
