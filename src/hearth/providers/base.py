"""The provider interface (PR1): stream a reply as text deltas, tool calls and usage.

Every provider takes the same plain request: a list of ``ChatMessage`` (system, user, assistant,
tool) and a list of ``ToolSpec``. It yields ``StreamEvent``s and raises ``ProviderError`` with a
clear, content-free reason for bad keys, rate limits, server errors, timeouts and broken streams.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Iterator, Protocol

from ..errors import ProviderError


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ImagePart:
    """An image attached to a user message (W14): each provider sends it as its SDK's own image part."""

    media_type: str  # image/png | image/jpeg | image/gif | image/webp
    data: bytes
    name: str = ""

    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.base64()}"


@dataclass(frozen=True)
class ChatMessage:
    role: str  # system | user | assistant | tool
    content: str
    tool_call_id: str | None = None  # role == "tool": the call this result answers
    tool_calls: tuple[ToolCall, ...] = ()  # role == "assistant": calls the model made
    images: tuple[ImagePart, ...] = ()  # role == "user": attached images (W14)
    attached_chars: int = 0  # characters of ``content`` that came from attached text files (R2)
    attached_files: int = 0  # how many text files ``content`` carries (R2)


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class StreamEvent:
    type: str  # "text" | "tool_call" | "usage" | "compacted" (Responses API: the server compacted the chain)
    text: str = ""
    tool_call: ToolCall | None = None
    usage: Usage | None = None
    # Responses API only (E7): the id of the finished response, for chaining the next turn.
    response_id: str = ""


@dataclass(frozen=True)
class ProviderRequest:
    messages: list[ChatMessage]
    tools: list[ToolSpec] = field(default_factory=list)
    max_output_tokens: int = 4096
    # Responses API only (E7). With a previous response id, only the messages after the last
    # assistant message are sent; the server holds the rest of the chain.
    previous_response_id: str | None = None
    # Responses API only (E7): enable server-side compaction at this many input tokens.
    compact_threshold: int | None = None
    # Responses API only (E7): the replacement input of a "Compact now", sent in place of the
    # earlier chain (no previous response id) until the next successful turn.
    replacement_input: tuple[dict[str, Any], ...] = ()
    # The model this request asks for (a conversation's own choice); None: the provider's default.
    model: str | None = None


@dataclass(frozen=True)
class CompactResult:
    """What the Responses compaction endpoint returned: the replacement input items (E7)."""

    output: list[dict[str, Any]]
    usage: Usage
    id: str = ""


class Provider(Protocol):
    name: str
    model: str

    def stream(self, request: ProviderRequest) -> Iterator[StreamEvent]:
        """Yield the reply. A tool call ends the turn: the caller runs it and calls again."""
        ...


# Providers may also offer ``list_models() -> list[str]``: the model names the server offers, read
# on demand (never on the send path; ``providers.catalog`` caches it). Without it, only the
# provider's own ``model`` is offered.
MAX_LISTED_MODELS = 1000  # a server that pages forever cannot keep a listing running
MAX_MODEL_NAME = 200
LIST_TIMEOUT = 10.0  # seconds: a model list is asked for while a person waits for a menu


def listed_names(ids: Iterator[Any]) -> list[str]:
    """Model ids from a listing, in order: storable one-line names only, at most MAX_LISTED_MODELS."""
    names: dict[str, None] = {}  # ordered, without repeats
    for count, value in enumerate(ids):
        if count >= MAX_LISTED_MODELS:
            break
        if (isinstance(value, str) and value.strip() == value and 0 < len(value) <= MAX_MODEL_NAME
                and value.isprintable()):
            names[value] = None
    return list(names)


# ---------------------------------------------------------------------------------------------
# Shared helpers for the SDK-backed providers. Error messages are one line and never carry
# conversation content or the provider's own error text (which may echo the request) (PR5).

_STATUS_WORDING = {
    400: ("bad_request", False, "The model provider refused the request as invalid (400)."),
    401: ("auth", False, "The model provider rejected the API key (401)."),
    402: ("auth", False, "The model provider refused the request for billing reasons (402)."),
    403: ("auth", False, "The model provider denied access with this API key (403)."),
    404: ("bad_request", False, "The model provider does not know this model or endpoint (404)."),
    408: ("timeout", True, "The model provider timed out (408); try again shortly."),
    413: ("bad_request", False, "The request is too large for the model provider (413)."),
    422: ("bad_request", False, "The model provider could not process the request (422)."),
    429: ("rate_limit", True, "The model provider is rate-limiting requests (429); try again shortly."),
    529: ("server", True, "The model provider is overloaded (529); try again shortly."),
}


def status_error(status: int) -> ProviderError:
    """The ProviderError for an HTTP error status from a provider."""
    if status in _STATUS_WORDING:
        kind, retryable, message = _STATUS_WORDING[status]
        return ProviderError(message, kind=kind, retryable=retryable)
    if status >= 500:
        return ProviderError(
            f"The model provider had a server error ({status}); try again shortly.", kind="server"
        )
    return ProviderError(
        f"The model provider refused the request ({status}).", kind="bad_request", retryable=False
    )


def timeout_error(seconds: float) -> ProviderError:
    return ProviderError(
        f"The model provider did not answer within {seconds:g} seconds; try again.", kind="timeout"
    )


def unreachable_error(base_url: str) -> ProviderError:
    where = f" at {base_url}" if base_url else ""
    return ProviderError(f"Could not reach the model provider{where}.", kind="server")


def stream_error() -> ProviderError:
    return ProviderError(
        "The model provider's reply stream broke off before it finished; try again.", kind="stream"
    )


def parse_tool_arguments(raw: str | None) -> dict[str, Any]:
    """Decode a tool call's JSON arguments; anything but a JSON object becomes a stream error."""
    if not raw or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise ProviderError(
            "The model provider sent tool arguments that are not valid JSON.", kind="stream"
        ) from None
    if not isinstance(value, dict):
        raise ProviderError(
            "The model provider sent tool arguments that are not a JSON object.", kind="stream"
        )
    return value


def transport_errors() -> tuple[type[BaseException], ...]:
    """HTTP-client transport exceptions that an SDK may let escape from a stream it is reading."""
    found: list[type[BaseException]] = []
    for module_name in ("httpx", "httpx2"):
        try:
            module = __import__(module_name)
        except ImportError:
            continue
        error = getattr(module, "TransportError", None)
        if isinstance(error, type) and issubclass(error, BaseException):
            found.append(error)
    return tuple(found)


def map_transport_error(exc: BaseException, *, started: bool, timeout: float, base_url: str) -> ProviderError:
    if "Timeout" in type(exc).__name__:  # ReadTimeout, ConnectTimeout, ...
        return timeout_error(timeout)
    return stream_error() if started else unreachable_error(base_url)
