"""Which models can see images (W14).

An image is sent only to a provider and model that take image input; anything else is refused
before the message is saved, with a message that says so. ``offline`` answers without a model, so
it sees nothing. Models known to read text only are listed by name prefix (as routers spell them,
after any ``vendor/``); any other model of the OpenAI, OpenAI-compatible or Anthropic providers
is taken to see images, and a server that disagrees answers with its own error (PR5).
"""

from __future__ import annotations

# Name prefixes of chat models that take text only: OpenAI's older and reasoning-mini models,
# Anthropic's before Claude 3, and the common local text-only families (Ollama's names).
TEXT_ONLY_PREFIXES = (
    "gpt-3.5", "gpt-4-0314", "gpt-4-0613", "gpt-4-32k", "o1-mini", "o1-preview", "o3-mini",
    "claude-2", "claude-instant",
    "llama2", "llama3:", "llama3.1", "llama3.3", "mistral", "mixtral", "phi3", "phi4", "qwen2.5:",
    "qwen2.5-coder", "deepseek-r1", "gemma2", "codellama", "text-only",
)


def sees_images(provider: str, model: str) -> bool:
    """Whether ``provider`` with ``model`` takes image parts."""
    if provider == "offline":
        return False
    name = (model or "").strip().lower().rsplit("/", 1)[-1]
    if name == "llama3":
        return False
    return not name.startswith(TEXT_ONLY_PREFIXES)
