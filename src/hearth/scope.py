"""``Hearth``: opens the store, wires the layers and the provider, and hands out user scopes.

Everything a person can do goes through a ``Scope``, which is bound to one user id: every query
it runs carries that id, so one user's data never reaches another user's prompt, search or export
(G2). ``Hearth.scope()`` without an id is the owner, created on first use.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from hearth.memory.memories import Adjust, Composed, Memories
from hearth.ops.jobs import Handler, UserJobs, enqueue
from hearth.outreach.activations import Activations
from hearth.outreach.channels import Contacts, PersonaChannels, codes, deliver_reply
from hearth.prompt import prepared, stored
from hearth.prompt.assembly import estimate_tokens
from hearth.prompt.dynamic import DynamicContext
from hearth.prompt.macros import user_macro_conversations
from hearth.prompt.prepared import Ready
from hearth.providers.base import Provider
from hearth.records import attachments, ledger
from hearth.records.context import AfterReply, Context
from hearth.records.conversations import Conversations, Folders
from hearth.records.ledger import Message
from hearth.records.personas import Persona, Personas
from hearth.records.users import Users
from hearth.retrieval import searchlog
from hearth.retrieval.archive import Archive
from hearth.settings import Settings
from hearth.store import Connection, Store, open_store
from hearth.store.queries import conversations as stored_conversations
from hearth.store.queries import handoff_sources
from hearth.store.queries import ledger as stored_ledger
from hearth.store.queries import users as stored_users
from hearth.text import IMAGE_TOKENS
from hearth.thread import alternatives
from hearth.thread.alternatives import Alternative
from hearth.thread.send import Events, Reply, SendPath, check_open, collect, keep_partial
from hearth.thread.tools import Toolbox
from hearth.thread.turns import TurnCache
from hearth.wiring import job_handlers, wire

MAX_PROVIDERS = 64  # distinct connections kept built at once

if TYPE_CHECKING:
    from hearth.continuity.branch import Quoted
    from hearth.interop.client_chats import ClientChats
    from hearth.prompt.presets import Presets
    from hearth.providers.catalog import ModelCatalog, ModelChoice
    from hearth.records.conversations import Conversation
    from hearth.retrieval.hybrid import SearchOutcome
    from hearth.wiring import MemoryLayers


class Hearth:
    """One deployment: a database file, a provider and the settings they were opened with."""

    def __init__(self, settings: Settings | None = None, *, provider: Provider | None = None):
        self.settings = settings or Settings.resolve()
        self.store: Store = open_store(self.settings.database_url, self.settings.database_path)
        self.users = Users(self.store)
        self.turns = TurnCache()
        self._provider = provider
        self._embedder = None
        # Providers and model lists by what they depend on (``providers.select.provider_key``): a
        # connection saved in the app is used by the next request that reads it, no restart (W10).
        self._providers: dict[tuple, Provider] = {}
        self._catalogs: dict[tuple, ModelCatalog] = {}
        self._built = threading.Lock()
        # The relationship timeline's process state: the clock idle checkpoints are judged by,
        # live-only notices (E6), and what runs in each conversation now (E7).
        from hearth.continuity.timeline.activity import Activity
        from hearth.continuity.timeline.live import LiveBus

        self.clock: Callable[[], float] = time.time
        self.live = LiveBus()
        self.activity = Activity()

    @classmethod
    def open(cls, home: str | None = None, **overrides: Any) -> "Hearth":
        return cls(Settings.resolve({"home": home, **overrides}))

    @property
    def provider(self) -> Provider:
        """The owner's provider: the deployment's default."""
        return self.provider_for(None)

    def settings_for(self, user_id: int | None) -> Settings:
        """The settings one user's requests run with: the deployment's, with the provider fields of
        the user's stored connection (else the owner's) unless the environment chooses (W10)."""
        if self._provider is not None:
            return self.settings
        from hearth.providers.select import environment_chooses, with_connection

        if environment_chooses(self.settings):
            return self.settings
        from hearth.records.connections import Connections

        connections = Connections(self.store)
        owner = self.users.owner().id
        found = connections.get(user_id) if user_id is not None and user_id != owner else None
        found = found or connections.get(owner)
        return with_connection(self.settings, found.settings_values() if found else None)

    def provider_for(self, user_id: int | None) -> Provider:
        """The provider one user's requests go to, built once per distinct connection."""
        if self._provider is not None:
            return self._provider  # given by the caller (tests, embedding): always that one
        return self.build_provider(self.settings_for(user_id))

    def build_provider(self, settings: Settings) -> Provider:
        """The provider for these settings, shared with every caller whose connection is the same."""
        from hearth.providers import provider_from_settings
        from hearth.providers.select import provider_key

        key = provider_key(settings)
        with self._built:
            found = self._providers.get(key)
        if found is None:
            found = provider_from_settings(settings)
            with self._built:
                if len(self._providers) >= MAX_PROVIDERS:
                    self._providers.clear()  # connections changed many times: start again
                    self._catalogs.clear()
                found = self._providers.setdefault(key, found)
        return found

    @property
    def embedder(self):
        """The configured embedder (S7), created on first use; the local model loads on first embed."""
        if self._embedder is None:
            from hearth.retrieval.embedder import embedder_from_settings

            self._embedder = embedder_from_settings(self.settings)
        return self._embedder

    def job_handlers(self) -> dict[str, Handler]:
        """The job kinds a default worker runs (``registry.job_handlers``)."""
        return job_handlers()

    @property
    def models(self) -> "ModelCatalog":
        """The owner's model catalog (``models_for``)."""
        return self.models_for(None)

    def models_for(self, user_id: int | None) -> "ModelCatalog":
        """The models a user's conversations may choose (W3): their provider's list, read on demand,
        cached briefly, one catalog per distinct connection."""
        from hearth.providers.catalog import ModelCatalog
        from hearth.providers.select import provider_key

        if self._provider is not None:
            key: tuple = ("given",)
            provider = self._provider
        else:
            settings = self.settings_for(user_id)
            key = provider_key(settings)
            provider = self.build_provider(settings)
        with self._built:
            catalog = self._catalogs.get(key)
            if catalog is None:
                catalog = self._catalogs[key] = ModelCatalog(lambda: provider)
            return catalog

    def model_for(self, conversation: "Conversation") -> str:
        """The model a conversation's requests ask for: its own choice, or the deployment's."""
        return conversation.model or self.provider.model

    def input_token_limit(self, model: str | None = None) -> int:
        """Model-specific input safety limit (R1): configured, or derived from the model name (the
        conversation's chosen ``model``, else the deployment's)."""
        if self.settings.input_token_limit:
            return self.settings.input_token_limit
        from hearth.providers import context_window_for

        return context_window_for(model or self.provider.model)

    def context(self, user_id: int | None = None) -> Context:
        """What a job or a flow below the wiring runs with for one user (``records.context``)."""
        return self.scope(user_id)._context

    def scope(self, user_id: int | None = None) -> "Scope":
        if user_id is None:
            user_id = self.users.owner().id
        else:
            self.users.get(user_id)
        return Scope(self, user_id)

    def resume(self, user_id: int | None = None):
        """Startup (E4): the most recently active open conversation, rebuilt from the ledger, with
        its latest capsule and any open span."""
        from hearth.continuity.timeline import resume

        return resume(self.context(user_id))

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> "Hearth":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Scope:
    """Everything one user can see and do."""

    def __init__(self, hearth: Hearth, user_id: int):
        # The deployment and its store stay private: everything public here is bound to this user.
        self._hearth = hearth
        self._store = store = hearth.store
        self.user_id = user_id
        self.personas = Personas(store, user_id)
        self.folders = Folders(store, user_id, self._refresh_sources)
        self.conversations = Conversations(store, user_id, self._refresh_sources)
        self.memories = Memories(store, user_id, self._rebuild_prompts, self._compose_prompts)
        # Who may write in by SMS or email (E10), once they prove their address with a code (U9).
        self.contacts = Contacts(store, user_id, hearth.settings, sender=codes.send)
        self.persona_channels = PersonaChannels(store, user_id)  # where each persona answers (E5)
        self.activations = Activations(store, user_id)  # the companion reaching out, off by default (E11)
        self.jobs = UserJobs(store, user_id)  # this user's background jobs (G2)
        self.archive = Archive(store, user_id)  # imported documents and their chunks (A1)
        self.dynamic = DynamicContext(user_id)  # the dynamic layers in D2 order (filled by ``wire``)
        self.toolbox = Toolbox(user_id)  # the model's tools (filled by ``wire``)
        self._after_reply: list[AfterReply] = []

        def queue(conn: Connection, kind: str, payload: dict[str, Any] | None = None, **options: Any) -> int:
            return enqueue(conn, user_id, kind, payload, **options)

        # What the modules below the wiring get instead of this scope: explicit values and hooks.
        self._context = Context(
            store=store, user_id=user_id, settings=hearth.settings_for(user_id), conversations=self.conversations,
            personas=self.personas, clock=lambda: hearth.clock(), activity=hearth.activity, live=hearth.live,
            turns=hearth.turns, get_provider=lambda: hearth.provider_for(user_id), get_embedder=lambda: hearth.embedder,
            enqueue=queue, handoff_text=self._handoff_text, handoff_info=self._handoff_info,
            rebuild_prompts=self._rebuild_prompts, after_reply=self._run_after_reply, dynamic=self.dynamic,
            toolbox=self.toolbox, review=lambda: self.layers.review)
        # Household status, live context, rolling summary, fragments and the review queue; the
        # dynamic layers in D2 order, the model's tools and the after-reply hooks (wiring.py).
        wiring = wire(self._context, memories=self.memories, activations=self.activations)
        self.layers: MemoryLayers = wiring.layers
        for layer in wiring.dynamic:
            self.dynamic.register(layer)
        for tool in wiring.tools:
            self.toolbox.add(tool)
        self._after_reply.extend(wiring.after_reply)
        from hearth.records.forget import Forgetting

        self.forget = Forgetting(self._context, self.memories)  # delete forever with everything derived (B4, B5)
        from hearth.continuity.timeline import Timeline

        self.timeline = Timeline(self._context)  # spans, checkpoints, capsules, chains, the timeline (E1-E8)

    def _run_after_reply(self, conn: Connection, conversation: "Conversation", user_message: Message,
                         reply: Message) -> None:
        for hook in self._after_reply:
            hook(conn, conversation, user_message, reply)

    @property
    def imports(self):
        """Imports and exports of outside formats: cards, lorebooks, chats, archives (X3, X4)."""
        from hearth.interop.imports import Imports

        return Imports(self._context, self.layers.fragments, self.update_persona)

    # -- stored prompts: the connection-taking parts run inside the caller's transaction --------
    def _handoff_text(self, conn: Connection, conversation_id: int) -> "Quoted | None":
        """The handoff for a conversation's prompt, re-rendered while its source is eligible; its
        boundary is drawn where the prompt's text is made, outside the write lock (U5)."""
        from hearth.continuity.branch import handoff_quote

        return handoff_quote(conn, self.user_id, conversation_id, self._hearth.settings)

    def _handoff_info(self, conn: Connection, conversation_id: int) -> dict | None:
        return handoff_sources.of_conversation(conn, self.user_id, conversation_id)

    def handoff(self, conversation_id: int) -> dict | None:
        """Where a conversation's handoff came from (source conversation and message ids), or None."""
        self.conversations.get(conversation_id)
        return self._handoff_info(self._store.connection(), conversation_id)

    def _rebuild_prompts(self, conn: Connection, conversation_ids: Iterable[int],
                         composed: Composed | None = None, ready: Ready | None = None) -> int:
        return stored.rebuild(conn, self.user_id, conversation_ids, self._handoff_text, composed, ready)

    def _compose_prompts(self, conn: Connection, conversation_ids: Iterable[int],
                         adjust: Adjust) -> Composed:
        return stored.compose(conn, conversation_ids, self._handoff_text, adjust)

    def stored_prompt(self, conversation_id: int) -> str | None:
        """The stored static prompt text, or None before the first send."""
        self.conversations.get(conversation_id)
        return stored_ledger.static_prompt(self._store.connection(), conversation_id)

    # -- visibility: changes that alter what prompts may hold refresh them first (V1, V3) ---------
    def _refresh_sources(self, conn: Connection, source_ids: Iterable[int], ready: Ready | None = None) -> int:
        """Rebuild the stored prompts whose handoff came from any of these conversations (with
        ``ready``, filled outside the write lock: U5)."""
        ids = list(source_ids)
        if not ids:
            return 0
        holders = handoff_sources.holders(conn, self.user_id, ids)
        return self._rebuild_prompts(conn, holders, ready=ready)

    # -- personas: a settings save rebuilds that persona's existing prompts (P5) -----------------
    def update_persona(self, persona_id: int, *, ready: Ready | None = None, **values: Any) -> tuple[Persona, int]:
        """Save a persona's settings; its prompts are rebuilt in the same transaction, their text
        made outside the write lock (``prompt.prepared``, U5). A caller whose own write
        runs under ``prepared.run`` passes its ``ready``."""
        def attempt(ready: Ready | None) -> tuple[Persona, int]:
            with self._store.write() as conn:
                persona = self.personas.update(persona_id, **values)
                return persona, self._rebuild_prompts(conn, self._persona_threads(conn, persona_id), ready=ready)

        return prepared.run(self._store, attempt, ready)

    def restore_persona(self, persona_id: int, version: int) -> tuple[Persona, int]:
        """Apply an older version of a persona's settings as a new version (B2); rebuilds its prompts."""
        def attempt(ready: Ready | None) -> tuple[Persona, int]:
            with self._store.write() as conn:
                values = self.personas.version_values(persona_id, version)
                persona = self.personas.update(persona_id, change=f"restored v{version}", **values)
                return persona, self._rebuild_prompts(conn, self._persona_threads(conn, persona_id), ready=ready)

        return prepared.run(self._store, attempt)

    def _persona_threads(self, conn: Connection, persona_id: int) -> list[int]:
        return stored_conversations.of_persona(conn, self.user_id, persona_id)

    # -- the person: what companions call them ({{user}}, X3) ---------------------------------
    def set_display_name(self, name: str | None) -> int:
        """Set (or with None or "" clear) the person's display name. Stored prompts whose persona
        text names the person by macro are rebuilt in the same transaction (P5); returns how many."""
        value = self._hearth.users.check_display_name(name)

        def attempt(ready: Ready | None) -> int:
            with self._store.write() as conn:
                if stored_users.display_name(conn, self.user_id) == value:
                    return 0
                stored_users.set_display_name(conn, self.user_id, value)
                ledger.append(conn, user_id=self.user_id, kind="user.display_name_set",
                              payload={"chars": len(value or "")})
                return self._rebuild_prompts(conn, user_macro_conversations(conn, self.user_id), ready=ready)

        return prepared.run(self._store, attempt)

    # -- sending -----------------------------------------------------------------------------
    def send_stream(self, conversation_id: int, text: str, *, channel: str = "web",
                    pin_characters: tuple[str, ...] = (), attached: Sequence[Any] = ()) -> Events:
        """Send ``text`` with ``attached`` files (W14: ``records.attachments.check`` says what they may be)."""
        return SendPath(self._context).stream(conversation_id, text, channel=channel, pin_characters=pin_characters,
                                              attached=attached)

    def send(self, conversation_id: int, text: str, *, channel: str = "web",
             pin_characters: tuple[str, ...] = (), attached: Sequence[Any] = ()) -> Reply:
        return collect(self.send_stream(conversation_id, text, channel=channel, pin_characters=pin_characters,
                                        attached=attached), self.conversations)

    def inner_turn(self, conversation_id: int, instruction: str, *, metadata: dict[str, Any]) -> Message:
        """A turn the companion starts itself (E11); the instruction is never saved as a message."""
        return SendPath(self._context).inner(conversation_id, instruction, metadata=metadata)

    def deliver(self, channel: str, persona_id: int, message: Message) -> None:
        """Send a message on a messaging channel to this user's contact there (E10, E11)."""
        deliver_reply(self._context, channel, persona_id, message)

    def retry_stream(self, conversation_id: int, *, channel: str = "web") -> Events:
        """Answer the last unanswered user message again (after a provider error, PR5)."""
        return SendPath(self._context).stream(conversation_id, "", channel=channel, retry=True)

    def retry(self, conversation_id: int, *, channel: str = "web") -> Reply:
        return collect(self.retry_stream(conversation_id, channel=channel), self.conversations)

    # -- alternatives: stop, regenerate, swipe, edit (W2) ---------------------------------------------
    def regenerate_stream(self, conversation_id: int, *, channel: str = "web") -> Events:
        """Write another version of the last reply; it becomes the chosen one when it completes. An
        unanswered newest message (a client regenerating after a failed reply, X1) is answered."""
        return SendPath(self._context).stream(conversation_id, "", channel=channel, regenerate=True)

    def regenerate(self, conversation_id: int, *, channel: str = "web") -> Reply:
        return collect(self.regenerate_stream(conversation_id, channel=channel), self.conversations)

    def edit_stream(self, conversation_id: int, message_id: int, text: str, *,
                    channel: str = "web") -> Events:
        """Replace one of the person's messages with ``text`` and continue from it (W2): the original
        stays as version 0 and the turns that followed it as that version's branch."""
        return SendPath(self._context).stream(conversation_id, text, channel=channel, edit_message_id=message_id)

    def edit(self, conversation_id: int, message_id: int, text: str, *, channel: str = "web") -> Reply:
        return collect(self.edit_stream(conversation_id, message_id, text, channel=channel), self.conversations)

    def keep_partial_reply(self, conversation_id: int, text: str, *, channel: str = "web") -> Message:
        """Keep what arrived of a stopped reply, marked partial (only when the person chooses to)."""
        return keep_partial(self._context, conversation_id, text, channel=channel)

    def undo_partial_reply(self, conversation_id: int, message_id: int) -> None:
        """Remove the partial reply just kept by Stop, when the person undoes it (W12)."""
        self.forget.undo_partial(conversation_id, message_id)

    def alternatives(self, message_id: int) -> list[Alternative]:
        """Every version of a message, the chosen one marked."""
        with self._store.read() as conn:
            return alternatives.listing(conn, self.user_id, message_id)

    def choose_alternative(self, message_id: int, position: int, *, channel: str = "web") -> Message:
        """Swipe: the version at ``position`` becomes what the thread shows and later requests read;
        for a message of the person's, the turns that followed that version come back with it."""
        with self._store.write() as conn:
            message = self.conversations.message(message_id)
            check_open(self.conversations.get(message.conversation_id))
            return alternatives.choose(conn, self.user_id, message_id, position, channel=channel)

    @property
    def clients(self) -> "ClientChats":
        """Chats of OpenAI-compatible clients pinned to conversations (X1)."""
        from hearth.interop.client_chats import ClientChats

        return ClientChats(self._context)

    def set_custom_instructions(self, conversation_id: int, text: str | None) -> bool:
        """Give one conversation its own custom instructions (None: the persona's again).

        A change rebuilds that conversation's stored prompt in the same transaction (P5); the same
        text again changes nothing. Returns whether anything changed."""
        from hearth.prompt.presets import set_custom_instructions

        return set_custom_instructions(self._context, conversation_id, text)

    @property
    def presets(self) -> "Presets":
        """The person's prompt presets: named texts applied as a conversation's instructions (W3)."""
        from hearth.prompt.presets import Presets

        return Presets(self._context)

    def set_model(self, conversation_id: int, name: str | None) -> tuple["Conversation", "ModelChoice | None"]:
        """Choose the model one conversation's requests ask for (None: the deployment's default again).

        The name is checked against the provider's model list when it can be read (``UnknownModel``
        otherwise); a change forgets the Responses chain in the same transaction, so no response id
        of one model is continued with another, switching back included."""
        self.conversations.get(conversation_id)  # an unknown id is 404 before the provider is asked
        choice = None if name is None else self._hearth.models_for(self.user_id).check(name)
        model = choice.model if choice else None
        with self._store.write() as conn:
            conversation = self.conversations.get(conversation_id)
            if conversation.model != model:
                stored_conversations.set_model(conn, self.user_id, conversation_id, model)
                from hearth.continuity.timeline import chains

                chains.reset(conn, conversation_id)
                ledger.append(conn, user_id=self.user_id, conversation_id=conversation_id,
                              kind="conversation.model_set", payload={"default": model is None})
                conversation = self.conversations.get(conversation_id)
            return conversation, choice

    # -- diagnostics ---------------------------------------------------------------------------
    def request_size(self, conversation_id: int) -> dict[str, Any] | None:
        """The last request-size details of a conversation (R2): numbers only."""
        self.conversations.get(conversation_id)
        return stored_ledger.last_request_size(self._store.connection(), conversation_id)

    def visible_estimate(self, conversation_id: int) -> dict[str, int]:
        """The chat header's compact estimate: visible current-thread messages only (R4)."""
        self.conversations.get(conversation_id)
        # Counted in SQL, so a long thread's header costs one aggregate, not a read of every message.
        conn = self._store.connection()
        count, chars = stored_ledger.visible_size(conn, self.user_id, conversation_id)
        # The visible messages' attachments count too (W14): text files by their characters, images
        # at their estimate.
        text_chars, images = attachments.totals(conn, self.user_id, conversation_id)
        return {"messages": count, "tokens": estimate_tokens(chars + text_chars) + IMAGE_TOKENS * images}

    # -- search and the search log (U1, V2, A3) --------------------------------------------------
    def search(self, query: str, *, include_shielded: bool = False, archive: bool = True,
               messages: bool = True, date_from: str | None = None, date_to: str | None = None,
               collections: tuple[str, ...] = (), limit: int = 10, embed: bool = True) -> SearchOutcome:
        """The owner's deliberate search over conversations and the archive; shielded conversations
        only with ``include_shielded``. Logged like every search (A3)."""
        from hearth.retrieval.deliberate import owner_search

        return owner_search(self._context, query, include_shielded=include_shielded, archive=archive, messages=messages,
                            date_from=date_from, date_to=date_to, collections=collections, limit=limit,
                            embed=embed)

    def search_log(self, *, limit: int = 50, before_id: int | None = None,
                   origin: str | None = None) -> list[searchlog.LogEntry]:
        """This user's searches, newest first; page with ``before_id``."""
        return searchlog.entries(self._store.connection(), self.user_id, limit=limit, before_id=before_id,
                                 origin=origin)

    def search_log_entry(self, entry_id: int) -> searchlog.LogEntry:
        return searchlog.entry(self._store.connection(), self.user_id, entry_id)

    # -- new conversations: two ways, named for what they carry ------------------------------------
    # ``conversations.create(persona_id)`` makes a bare conversation. ``new_chat()`` is the New Chat
    # button: it also carries the most recent eligible thread's final eight when the persona has
    # automatic continuity (H6).
    def new_chat(self, persona_id: int | None = None, *, title: str = "", folder_id: int | None = None,
                 channel: str = "web", continue_: bool = True):
        """New conversation that carries the most recent eligible thread's final eight (H6); the
        default persona when none is given, no handoff with ``continue_=False``."""
        from hearth.continuity.branch import new_chat

        return new_chat(self._context, persona_id, title=title, folder_id=folder_id, channel=channel, continue_=continue_)

    def branch(self, source_conversation_id: int, retry_key: str, title: str | None = None, *,
               channel: str = "web"):
        """Branch / Fresh Chat from a chosen conversation, idempotent per retry key (H7, H8)."""
        from hearth.continuity.branch import branch

        return branch(self._context, source_conversation_id, retry_key, title, channel=channel)

    def continue_document(self, document_id: int, retry_key: str, *, persona_id: int | None = None,
                          channel: str = "web"):
        """Continue an imported archive conversation in a new chat, idempotent per retry key (A5, H8)."""
        from hearth.continuity.branch import continue_document

        return continue_document(self._context, document_id, retry_key, persona_id=persona_id, channel=channel)
