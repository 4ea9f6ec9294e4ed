"""Every ``hearth`` command: the modules that define it and its short help, read without them (S20).

``hearth --help`` lists the commands from this table, and ``hearth NAME`` imports only NAME's
modules (``HearthGroup.get_command``): a command module imports click's decorators at least, and
one that lists every layer's options its layer's constants too. A group may gain subcommands
from more than one module (``persona export-card`` is defined beside the imports, ``persona
history`` beside the version history): each is listed with all of them, the defining one first.
The help text is the command's first sentence, which is all its short help shows;
tests/test_startup.py checks this table against the commands themselves.
"""

from __future__ import annotations

COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {
    "activations": (("activations",), "The companion reaching out on its own (off unless you add one)."),
    "backup": (("maintenance",), "Write a verified copy of the database and its manifest"
                                 " (on PostgreSQL: a SQLite-format copy)."),
    "branch": (("threads",), "Branch / Fresh Chat: a new conversation opening with the source's final exchange."),
    "channels": (("channels",), "SMS and email contacts, and which channels each persona answers on."),
    "chat": (("threads",), "Talk to the companion in the terminal; replies stream as they arrive."),
    "cleanup": (("maintenance",), "Owner-only removal of retired generated-summary rows (needs an owner password)."),
    "compact": (("timeline",), "Compact now (E7): shorten the model's working chain and refresh the capsule."),
    "context": (("layers",), "Live context of a conversation: mood, events, needs, nudges and its rolling summary."),
    "conversations": (("threads", "choices"), "Conversations: list, read, move, trash, restore, end."),
    "doctor": (("health",), "Versions, database, indexes and configuration at a glance."),
    "export": (("maintenance",), "Write all of the acting user's data as one JSON document."),
    "folders": (("threads",), "Folders: hide and show groups of conversations."),
    "forget": (("forget",), "Delete forever with everything derived from it: preview, then apply with the token."),
    "fragments": (("layers", "imports", "versions"),
                  "Memory fragments: durable context brought in when a trigger word appears."),
    "import": (("imports",), "Import files: character cards (PNG/JSON), lorebooks, SillyTavern chats (JSONL),"
                             " ChatGPT exports (.zip or conversations.json), Claude exports, labelled text,"
                             " or a Hearth export."),
    "init": (("health",), "Create the data folder, the database and a first persona."),
    "jobs": (("layers",), "The background job queue."),
    "layers": (("layers",), "Settings of the memory layers: cadences, budgets, auto-approve per kind"
                            " (off by default)."),
    "mcp": (("server",), "Serve Hearth's memory to an MCP client (Claude Desktop, an IDE agent) over stdio."),
    "memory": (("memory",), "Long-term memories and conversation snapshots."),
    "migrate-store": (("maintenance",), "Copy every row to another store, SQLite <-> PostgreSQL; resumable;"
                                        " verified (S11)."),
    "new": (("threads",), "Start a new conversation, continuing the most recent eligible one."),
    "passwd": (("health",), "Set the password of the acting user (the owner by default)."),
    "persona": (("threads", "imports", "versions"), "Personas: who the companion is."),
    "presets": (("choices",), "Prompt presets: named texts to use as a conversation's instructions."),
    "reindex": (("recall",), "Embed every message and archive chunk that has no vector yet,"
                             " and rebuild the vector index."),
    "restore": (("maintenance",), "Replace this deployment's database with a verified backup"
                                  " (stop the server first)."),
    "resume": (("timeline",), "Where Hearth picks up (E4): the latest open conversation, its capsule and open span."),
    "review": (("layers",), "The review queue: suggested status changes and fragments wait for approval."),
    "search": (("recall",), "Search your conversations and archive (keyword + meaning); logged in the search log."),
    "search-log": (("recall",), "What every search looked for, what came back, and how reliable it looked."),
    "serve": (("server",), "Start the HTTP API and web UI."),
    "shield": (("threads",), "Continuity Shield: keep a conversation out of automatic continuity."),
    "status": (("layers", "versions"), "Household status: present-tense facts such as who is home."),
    "threads": (("threads", "choices"), "Conversations: list, read, move, trash, restore, end."),
    "timeline": (("timeline",), "The relationship timeline across every conversation, grouped by activity"
                                " span (E8)."),
    "token": (("health",), "API tokens for programmatic clients."),
    "user": (("health",), "Users of this deployment."),
    "worker": (("layers",), "Run background jobs (summaries, live context, status detection, review) until Ctrl-C."),
}
