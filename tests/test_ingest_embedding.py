"""Batched embedding on ingest (S19): many turns to one model call, each keeping its context."""

from __future__ import annotations

import math

import numpy as np

from hearth.retrieval.semantic import EMBED_BATCH, embed_pending, message_text


class CountingEmbedder:
    """Unit vectors from letter counts that note the texts of every call."""

    name = "counting-letters"
    dim = 26

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for ch in text.lower():
                if "a" <= ch <= "z":
                    rows[i, ord(ch) - 97] += 1
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)


def test_s19_ingest_embeds_many_turns_per_model_call_with_their_context(hearth, me, persona):
    # 300 turns in two threads, short answers beside long turns, as an imported chat has them.
    turns = 300
    texts = [("yes, last May" if i % 3 else f"Tell me again about the orchard visit number {i}, " * 4)
             for i in range(turns)]
    with hearth.store.write():
        for half in (0, 1):
            chat = me.conversations.create(persona.id, f"Thread {half}")
            for i in range(half * turns // 2, (half + 1) * turns // 2):
                me.conversations.add_message(chat.id, "user" if i % 2 == 0 else "assistant", texts[i])
    embedder = CountingEmbedder()

    report = embed_pending(hearth.store, embedder, user_id=me.user_id)

    assert report.messages == turns and report.remaining == 0
    # One model call per window of turns, not one per turn nor per small batch: 300 turns, 2 calls.
    assert EMBED_BATCH >= 256
    assert len(embedder.calls) == math.ceil(turns / EMBED_BATCH) == 2
    sent = [text for call in embedder.calls for text in call]
    # Each turn keeps its speaker and the start of the turn it answers (none for a thread's first).
    expected = []
    for half in (0, 1):
        for i in range(half * turns // 2, (half + 1) * turns // 2):
            label = persona.user_label if i % 2 == 0 else persona.assistant_label
            previous = texts[i - 1] if i != half * turns // 2 else ""
            expected.append(message_text(label, texts[i], previous))
    assert sent == expected
    # Every turn's stored vector is the one its own text gives, written once.
    with hearth.store.read() as conn:
        rows = conn.execute("SELECT message_id, embedding FROM message_embeddings WHERE model = ?"
                            " ORDER BY message_id", (embedder.name,)).fetchall()
    stored = np.vstack([np.frombuffer(bytes(row[1]), dtype="<f4") for row in rows])
    assert len(rows) == turns
    np.testing.assert_allclose(stored, CountingEmbedder().embed(expected), atol=1e-6)
