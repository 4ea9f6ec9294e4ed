"""Model providers (PR1-PR5): one streaming interface, four implementations, chosen by settings.

Implementations live in their own modules and import their SDK only when built:
``openai_responses`` (OpenAI Responses API), ``openai_chat`` (any OpenAI-compatible Chat
Completions server), ``anthropic_messages`` (Anthropic Messages) and ``offline`` (no model).
"""

from .base import ChatMessage, Provider, ProviderRequest, StreamEvent, ToolCall, ToolSpec, Usage
from .select import choose_provider_name, context_window_for, provider_from_settings

__all__ = [
    "ChatMessage",
    "Provider",
    "ProviderRequest",
    "StreamEvent",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "choose_provider_name",
    "context_window_for",
    "provider_from_settings",
]
