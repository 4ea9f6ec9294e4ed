"""Every SQL statement of the areas, one module per noun (S12).

An area module (``records/personas.py``, ``memory/memories.py``, ...) keeps the logic: checks,
rules, what to do next. It opens a transaction with ``store.write()`` / ``store.read()`` and hands
the connection to functions here, which run the statements and return plain values or frozen
dataclasses, never a cursor or a driver row. A row's dataclass lives beside its statements (the
area module re-exports it), so nothing here imports an area.

Where the engines differ, the function writes both statements side by side and picks one with
``engine_of(conn)``; nothing outside ``store/`` runs a statement or names an engine
(``tests/test_store_seam.py``).
"""
