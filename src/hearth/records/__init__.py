"""Records: the ledger, users, personas, conversations and their versions (SPEC 1, 2, 16)."""
