"""Continuity between threads and over time: handoffs, branches, the timeline (SPEC 6, 8, 11)."""
