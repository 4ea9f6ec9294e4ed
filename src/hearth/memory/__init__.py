"""Long-term memory: memories, the review queue, mining, duplicates, model helpers (SPEC 4, 9, 16)."""
