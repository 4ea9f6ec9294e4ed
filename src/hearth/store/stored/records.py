"""Records: people, personas, folders, threads, the ledger and its messages (what they store)."""

from __future__ import annotations

from ..engine import Connection
from .base import THREADS, TURNS, Cascade, Doomed, Entry, Exempt, Itself, Kept, Plain, Step, Stored, Trigger, marks

AREA = "records"
_PROMPTS = Step(70, "rewrite", hook="prompts", count="prompts_rebuilt")
_ROLES = Plain("enumerations: a turn's role, kind and the channel it came on", "role", "kind", "channel")


def _events(conn: Connection, d: Doomed) -> int:
    """A single message's ledger event goes, and with it (cascades) its row, its attachments,
    versions, vector and facts' sources, and its keyword index entry (trigger); put-away turns too."""
    u = d.user_id
    if d.stashed:
        conn.execute(f"DELETE FROM events WHERE user_id = ? AND id IN ({marks(d.stashed)})", (u, *d.stashed))
    if d.messages:
        conn.execute(f"DELETE FROM events WHERE user_id = ? AND id IN ({marks(d.messages)})", (u, *d.messages))
    return 0


def _conversations(conn: Connection, d: Doomed) -> int:
    """Whole threads: every row naming them goes by cascade (messages, events, summaries...)."""
    if d.conversations:
        conn.execute(f"DELETE FROM conversations WHERE user_id = ? AND id IN ({marks(d.conversations)})",
                     (d.user_id, *d.conversations))
    return 0


def _folders(conn: Connection, d: Doomed) -> int:
    if d.folders:
        conn.execute(f"DELETE FROM folders WHERE user_id = ? AND id IN ({marks(d.folders)})",
                     (d.user_id, *d.folders))
    return 0


_OWN = ("the person's own settings, not a trace of one conversation: they go with the account")

STORED: list[Entry] = [
    Stored("users", AREA, ("name", "display_name"), user="id",
           plain=(Plain("a password's salted hash, no text the person wrote", "password_hash"),),
           on_user=Itself(), on_conversation=Kept(_OWN), on_message=Kept(_OWN)),
    Exempt("auth_sessions", AREA, (Plain("a session's random id and anti-forgery token", "id", "csrf_token"),)),
    Stored("api_tokens", AREA, ("name",), plain=(Plain("the token's hash", "token_hash"),),
           on_conversation=Kept(_OWN), on_message=Kept(_OWN)),
    Stored("model_connections", AREA, ("base_url", "api_key"),
           plain=(Plain("a provider's and a model's name", "provider", "model"),),
           on_conversation=Kept(_OWN), on_message=Kept(_OWN)),
    Stored("personas", AREA, ("name", "display_name", "identity", "user_label", "assistant_label", "legacy_labels",
                              "tone", "custom_instructions", "sections", "characters", "card"),
           plain=(Plain("a random identifier", "uuid"),),
           on_conversation=Kept(_OWN), on_message=Kept(_OWN)),
    Stored("persona_avatars", AREA, ("data",), plain=(Plain("a media type", "mime"),),
           on_user=Cascade("personas"), on_conversation=Kept(_OWN), on_message=Kept(_OWN)),
    Stored("item_versions", AREA, ("data",),
           plain=(Plain("what was versioned, the kind of change and who made it", "noun", "change", "actor"),),
           on_conversation=Kept(_OWN), on_message=Kept(_OWN)),
    Stored("conversations", AREA, ("title", "custom_instructions", "tags"), conversation="id",
           plain=(Plain("enumerations and a model's name", "state", "snapshot_provenance", "model"),),
           on_conversation=Step(THREADS, "delete", _conversations),
           on_message=Kept("the thread's title, tags and instructions belong to the thread; a title written"
                           " from a first exchange stays when that exchange is forgotten, until renamed")),
    Stored("folders", AREA, ("name",),
           on_conversation=Kept("a folder outlives its threads; forgetting the folder takes them with it"),
           on_message=Kept("a folder's name is not a turn"),
           also=(Step(THREADS, "delete", _folders),)),
    Stored("conversation_tags", AREA, ("tag",), conversation="conversation_id",
           on_conversation=Cascade("conversations"), on_message=Kept("a tag describes the thread, not a turn")),
    Stored("events", AREA, ("payload",), conversation="conversation_id", message="id",
           plain=(Plain("an event's kind and channel", "kind", "channel"),),
           on_conversation=Cascade("conversations"), on_message=Step(TURNS, "delete", _events)),
    Stored("messages", AREA, ("content", "metadata"), conversation="conversation_id", message="id",
           plain=(_ROLES,), on_conversation=Cascade("conversations"), on_message=Cascade("events"),
           also=(_PROMPTS,)),
    Stored("messages_fts", AREA, ("content",), user=None, index_of="messages", engine="sqlite",
           on_user=Trigger("messages"), on_conversation=Trigger("messages"), on_message=Trigger("messages")),
    Stored("messages_postings", AREA, ("lexeme",), user=None, index_of="messages", engine="postgresql",
           on_user=Trigger("messages"), on_conversation=Trigger("messages"), on_message=Trigger("messages")),
    Stored("message_attachments", AREA, ("name", "text", "data"), conversation="conversation_id",
           message="message_id", plain=(Plain("an attachment's kind and media type", "kind", "media_type"),),
           on_conversation=Cascade("conversations"), on_message=Cascade("events")),
]
