"""Retrieval: sentence embedders, the in-process vector index, keyword search and their fusion."""

# Set by a process that runs one search and then exits (``hearth search``), before it searches: a
# saved vector graph is then mapped from its file rather than read, and none is built
# (``vector_cache.IndexCache``, S20). Here, not in ``vector_cache``: setting it imports nothing.
short_lived = False
