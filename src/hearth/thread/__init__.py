"""One thread: the send path, its turns, alternatives, titles, tools and search (SPEC 5, 12, 18)."""
