"""The lorebook: trigger-word fragments and their activation controls (SPEC 9, 17)."""
