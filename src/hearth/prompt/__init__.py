"""Prompt construction: the stored static prompt, the dynamic context, and request assembly."""
