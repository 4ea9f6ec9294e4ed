"""The models a deployment offers for per-chat choice (W3, PR1, PR2).

The provider's own list (``list_models()``, through its SDK) is read on demand, when the web page
or the CLI asks, and kept in memory for ``LIST_TTL`` seconds (a failure for ``FAILED_TTL``), so
opening menus does not ask the provider each time. The send path never reads it: a conversation's
stored model goes into its request as it is.

What is offered: the deployment's default model first, then every listed chat model. Names the
OpenAI-style listings carry for embeddings, speech, images or moderation are left out, as they
cannot answer a chat. A name is checked against the list when the list is known; when listing
failed, any one-line name of sane length is accepted and the caller is told it was not checked.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

from ..errors import InvalidInput, ProviderError, UnknownModel
from ..validation import check_text
from .base import MAX_MODEL_NAME, Provider

LIST_TTL = 60.0
FAILED_TTL = 10.0
SHOWN_IN_ERRORS = 12  # names an unknown-model error lists, so it stays one readable line

_NOT_CHAT = re.compile(r"embed|whisper|tts|dall-e|moderation|transcribe|davinci|babbage|gpt-image|sora|realtime"
                       r"|audio", re.IGNORECASE)


@dataclass(frozen=True)
class ModelList:
    """What ``GET /api/models`` answers."""

    provider: str
    default: str  # the deployment's model: what a conversation without its own choice uses
    models: tuple[str, ...]  # what may be chosen, the default first
    listed: bool  # the provider's own list was read (names are checked against it)
    detail: str | None = None  # why the list could not be read

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ModelChoice:
    """A checked model name: ``checked`` is False when the provider's list could not be read."""

    model: str
    checked: bool
    note: str | None = None


class ModelCatalog:
    def __init__(self, provider: Callable[[], Provider], clock: Callable[[], float] = time.monotonic):
        self._provider = provider
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: tuple[float, ModelList] | None = None

    def get(self, *, refresh: bool = False) -> ModelList:
        with self._lock:
            if self._cached is not None and not refresh and self._clock() < self._cached[0]:
                return self._cached[1]
        found = self._read()
        with self._lock:
            self._cached = (self._clock() + (LIST_TTL if found.listed else FAILED_TTL), found)
        return found

    def _read(self) -> ModelList:
        provider = self._provider()
        lister = getattr(provider, "list_models", None)
        if lister is None:
            return ModelList(provider.name, provider.model, (provider.model,), True)
        try:
            names = lister()
        except ProviderError as exc:
            # The message is content-free by construction (providers.base).
            return ModelList(provider.name, provider.model, (provider.model,), False, str(exc))
        chat = [n for n in names if n != provider.model and not _NOT_CHAT.search(n)]
        return ModelList(provider.name, provider.model, (provider.model, *sorted(chat, key=str.lower)), True)

    def check(self, name: Any) -> ModelChoice:
        """``name`` as a model a conversation may use, or ``UnknownModel`` / ``InvalidInput``."""
        name = check_text(name, "model name", max_chars=MAX_MODEL_NAME, required=True, strip=True)
        if not name.isprintable():
            raise InvalidInput("a model name must be one line of printable characters")
        offered = self.get()
        if name == offered.default:
            return ModelChoice(name, True)
        if not offered.listed:
            return ModelChoice(name, False, f"The provider's model list could not be read ({offered.detail}), "
                                            f"so the name {name!r} was saved without checking it.")
        if name not in offered.models:
            shown = ", ".join(offered.models[:SHOWN_IN_ERRORS])
            more = f" and {len(offered.models) - SHOWN_IN_ERRORS} more" if len(offered.models) > SHOWN_IN_ERRORS else ""
            raise UnknownModel(f"the {offered.provider} provider does not offer a model named {name!r}; "
                               f"it offers {shown}{more}")
        return ModelChoice(name, True)
