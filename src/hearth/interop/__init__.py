"""Other tools' formats: imports, exports, OpenAI-compatible client chats (SPEC 17)."""
