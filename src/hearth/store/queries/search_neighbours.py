"""The chat turns next to a search's candidates (``messages``, read for the fusion's neighbour
score, A2)."""

from __future__ import annotations

from hearth.store import Connection


def adjacent_turns(conn: Connection, message_ids: list[int]) -> list[tuple[int, int | None, int | None]]:
    """(id, the chat turn just before it, the one just after it) in its conversation, for each of
    ``message_ids``: two index walks a turn, asked 500 ids at a time."""
    out: list[tuple[int, int | None, int | None]] = []
    for start in range(0, len(message_ids), 500):
        part = message_ids[start:start + 500]
        rows = conn.execute(
            "SELECT m.id,"
            " (SELECT p.id FROM messages p WHERE p.conversation_id = m.conversation_id AND p.id < m.id"
            "  AND p.kind = 'chat' AND p.role IN ('user', 'assistant') ORDER BY p.id DESC LIMIT 1),"
            " (SELECT n.id FROM messages n WHERE n.conversation_id = m.conversation_id AND n.id > m.id"
            "  AND n.kind = 'chat' AND n.role IN ('user', 'assistant') ORDER BY n.id LIMIT 1)"
            f" FROM messages m WHERE m.id IN ({','.join('?' * len(part))})", part).fetchall()
        out.extend((r[0], r[1], r[2]) for r in rows)
    return out
