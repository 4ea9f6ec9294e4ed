"""Retrieval: sentence embedders, the in-process vector index, keyword search and their fusion."""
