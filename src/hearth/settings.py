"""Settings, resolved once at the edge and passed in.

Precedence: explicit overrides (CLI flags) > ``HEARTH_*`` environment > optional TOML config file
(``$HEARTH_HOME/config.toml`` or ``HEARTH_CONFIG``) > defaults. A few names come from the original
systems and are read without the prefix (``HANDOFF_PER_MESSAGE_CHARACTER_LIMIT``, ...).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import sys
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from .errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_HANDOFF_PER_MESSAGE = 20_000
DEFAULT_HANDOFF_TOTAL = 60_000
DEFAULT_TIMELINE_LIMIT = 500


@dataclass(frozen=True)
class Settings:
    home: Path = field(default_factory=lambda: Path("~/.local/share/hearth").expanduser())
    # Storage (S9): empty keeps the SQLite file under home; postgresql://... selects PostgreSQL.
    database_url: str = ""
    host: str = "127.0.0.1"
    port: int = 8765
    # Providers (PR2): with no key and no base URL, the offline provider answers.
    provider: str = ""  # "", "offline", "openai", "openai-chat", "anthropic"
    model: str = ""
    base_url: str = ""
    openai_api_key: str = ""
    anthropic_api_key: str = ""
    provider_timeout: float = 60.0
    # Embeddings (S7): the local model by default; "openai" for any OpenAI-compatible server.
    embedder: str = "local"
    embedding_model: str = ""
    # Files worth keeping between processes but never needed (the local model's derived query graph,
    # S20). Empty: the platform's cache folder (XDG_CACHE_HOME/hearth, ~/Library/Caches/hearth,
    # %LOCALAPPDATA%\hearth\Cache), found when settings are resolved.
    cache_dir: str = ""
    # Duplicate checks of new memories (B3) also compare embeddings; off: word overlap and rules only.
    duplicate_embeddings: bool = True
    # Budget (R1): input limit in estimated tokens, room kept for the reply.
    input_token_limit: int = 0  # 0: derived from the model name
    output_token_reserve: int = 4_096
    # Recall on the send path (K1, A2): milliseconds the recall layers may take, from when the layers
    # begin; optional steps (the feedback list) run only while they fit. The owner's search is not bounded.
    recall_budget_ms: int = 40
    # Server limits (U3).
    max_body_bytes: int = 1_000_000
    max_import_bytes: int = 200_000_000  # uploads to /api/imports (exports, cards) may be larger
    max_message_chars: int = 100_000
    # Attachments of a message (W14): how many, each file's bytes, and the characters of text files
    # a message may carry into its request together.
    attachment_max_count: int = 4
    attachment_max_bytes: int = 5_000_000
    attachment_text_chars: int = 100_000
    insecure_no_auth: bool = False
    # Reverse proxies whose X-Forwarded-For / -Proto headers are believed (comma-separated addresses
    # or networks, "*" for any). Empty: none, so a client cannot pick its own address and reset the
    # per-address login limit by rotating a header.
    trusted_proxies: str = ""
    # The web UI's npm-installed files; "" means build/vendor/ of the source checkout.
    web_vendor_dir: str = ""
    # OpenAI-compatible endpoint (X1): also list the provider's model name in /v1/models.
    v1_provider_models: bool = False
    # Seed-given names (no HEARTH_ prefix).
    handoff_per_message_limit: int = DEFAULT_HANDOFF_PER_MESSAGE
    handoff_total_budget: int = DEFAULT_HANDOFF_TOTAL
    timeline_history_event_limit: int = DEFAULT_TIMELINE_LIMIT
    # Messaging channels (E10). Secrets come from settings only, never from the database.
    public_url: str = ""  # the address webhooks are signed for, e.g. https://hearth.example.org
    twilio_account_sid: str = ""
    twilio_auth_token: str = ""
    twilio_from_number: str = ""
    twilio_api_base: str = "https://api.twilio.com"
    sms_part_chars: int = 1_600
    email_address: str = ""  # the companion's own address (From of replies)
    email_user: str = ""  # the Hearth user whose mailbox this is; empty: the owner
    imap_host: str = ""
    imap_port: int = 993
    imap_ssl: bool = True
    imap_username: str = ""
    imap_password: str = ""
    smtp_host: str = ""
    smtp_port: int = 587
    smtp_starttls: bool = True
    smtp_username: str = ""
    smtp_password: str = ""
    email_poll_seconds: float = 60.0
    email_max_bytes: int = 1_000_000
    activation_tick_seconds: float = 60.0  # how often due activations are looked for (E11)
    # Voice (E9): a realtime speech model over WebSocket; the key stays on the server.
    voice_model: str = "gpt-realtime"
    voice_name: str = "marin"
    voice_transcription_model: str = "gpt-4o-mini-transcribe"
    voice_retention_ratio: float = 0.8
    # A phone call's Media Stream that sends no audio this long after its start is closed (U7);
    # Twilio sends a frame every 20 ms while a call is live, silence included.
    voice_idle_seconds: float = 30.0
    # Proving a contact address (U9): how long a code lasts, how many codes one user may have sent
    # to one address an hour, and how many wrong tries void a code.
    contact_code_minutes: float = 10.0
    contact_code_sends_per_hour: int = 5
    contact_code_attempts: int = 5
    realtime_url: str = ""  # the realtime WebSocket base (default: the OpenAI SDK's), e.g. wss://host/v1
    # A job left running by a crashed worker is claimed again after this long.
    job_lease_seconds: float = 300.0
    # Relationship timeline (E2, E3, E7).
    idle_checkpoint_minutes: float = 30.0  # idle time that closes an activity span
    capsule_threshold: float = 0.6  # fraction of the input limit whose use refreshes the capsule
    capsule_recent_turns: int = 8  # verbatim turns a new capsule leaves uncovered
    # Fraction of the model's input limit at which the Responses API compacts the chain on the
    # server (E12: on by default, as every request of the design enables it); 0 turns it off.
    compaction_threshold: float = 0.8

    @property
    def database_path(self) -> Path:
        return self.home / "hearth.db"

    @property
    def cache_path(self) -> Path:
        return Path(self.cache_dir).expanduser() if self.cache_dir else platform_cache_dir(os.environ)

    @classmethod
    def resolve(
        cls,
        overrides: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> "Settings":
        """Build settings from overrides > environment > config file > defaults."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        home = (overrides or {}).get("home") or env.get("HEARTH_HOME")
        home_path = Path(home).expanduser() if home else cls().home
        config_path = Path(env["HEARTH_CONFIG"]) if env.get("HEARTH_CONFIG") else home_path / "config.toml"
        if config_path.is_file():
            values.update(_read_config(config_path))
        values.update(_from_env(env))
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        values["home"] = home_path
        if not values.get("cache_dir"):
            values["cache_dir"] = str(platform_cache_dir(env))
        return cls.build(values)

    @classmethod
    def build(cls, values: Mapping[str, Any]) -> "Settings":
        known = {f.name: f for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for name, raw in values.items():
            if name not in known:
                raise ConfigError(f"unknown setting {name!r}")
            kwargs[name] = _coerce(name, known[name].type, raw)
        settings = cls(**kwargs)
        settings._validate()
        return settings

    def with_(self, **changes: Any) -> "Settings":
        return replace(self, **changes)

    def _validate(self) -> None:
        if not 0 < self.port < 65536:
            raise ConfigError(f"port must be between 1 and 65535, got {self.port}")
        if self.embedder not in ("local", "openai"):
            raise ConfigError(f"embedder must be local or openai; got {self.embedder!r}")
        if self.provider not in ("", "offline", "openai", "openai-chat", "anthropic"):
            raise ConfigError(
                f"provider must be one of offline, openai, openai-chat, anthropic; got {self.provider!r}"
            )
        for name in ("max_body_bytes", "max_import_bytes", "max_message_chars", "output_token_reserve",
                     "attachment_max_count", "attachment_max_bytes", "attachment_text_chars",
                     "sms_part_chars",
                     "email_max_bytes", "email_poll_seconds", "activation_tick_seconds", "job_lease_seconds", "recall_budget_ms",
                     "voice_idle_seconds", "contact_code_minutes", "contact_code_sends_per_hour",
                     "contact_code_attempts"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive")
        if not 0.05 <= self.voice_retention_ratio <= 1.0:
            raise ConfigError("voice_retention_ratio must be between 0.05 and 1.0")
        if self.realtime_url and not self.realtime_url.startswith(("ws://", "wss://")):
            raise ConfigError("realtime_url must start with ws:// or wss://")
        if self.sms_part_chars < 70:
            raise ConfigError("sms_part_chars must be at least 70 (one SMS segment)")
        for name in ("imap_port", "smtp_port"):
            if not 0 < getattr(self, name) < 65536:
                raise ConfigError(f"{name} must be between 1 and 65535")
        for name in ("public_url", "twilio_api_base"):
            value = getattr(self, name)
            if value and not value.startswith(("http://", "https://")):
                raise ConfigError(f"{name} must start with http:// or https://")
        for entry in filter(None, (e.strip() for e in self.trusted_proxies.split(","))):
            if entry != "*":
                try:
                    ipaddress.ip_network(entry, strict=False)
                except ValueError:
                    raise ConfigError(f"trusted_proxies: {entry!r} is not an address or network (or *)") from None
        if self.input_token_limit < 0:
            raise ConfigError("input_token_limit must be zero (automatic) or positive")
        if not 1 <= self.timeline_history_event_limit <= 10_000:
            raise ConfigError("timeline_history_event_limit must be between 1 and 10000")
        if not 0 < self.idle_checkpoint_minutes <= 10_080:
            raise ConfigError("idle_checkpoint_minutes must be more than 0 and at most 10080 (a week)")
        if not 0 < self.capsule_threshold <= 1:
            raise ConfigError("capsule_threshold must be a fraction of the input limit, more than 0 and at most 1")
        if not 0 <= self.compaction_threshold <= 1:
            raise ConfigError("compaction_threshold must be 0 (off) or a fraction of the input limit up to 1")
        if not 1 <= self.capsule_recent_turns <= 200:
            raise ConfigError("capsule_recent_turns must be between 1 and 200")


# Environment names. Seed-given names keep their original spelling; invalid values of those fall
# back to defaults with a warning (H2) instead of failing.
_ENV = {
    "HEARTH_DATABASE_URL": "database_url",
    "HEARTH_HOST": "host",
    "HEARTH_PORT": "port",
    "HEARTH_PROVIDER": "provider",
    "HEARTH_MODEL": "model",
    "HEARTH_BASE_URL": "base_url",
    "OPENAI_API_KEY": "openai_api_key",
    "ANTHROPIC_API_KEY": "anthropic_api_key",
    "HEARTH_PROVIDER_TIMEOUT": "provider_timeout",
    "HEARTH_EMBEDDER": "embedder",
    "HEARTH_EMBEDDING_MODEL": "embedding_model",
    "HEARTH_CACHE_DIR": "cache_dir",
    "HEARTH_DUPLICATE_EMBEDDINGS": "duplicate_embeddings",
    "HEARTH_INPUT_TOKEN_LIMIT": "input_token_limit",
    "HEARTH_OUTPUT_TOKEN_RESERVE": "output_token_reserve",
    "HEARTH_MAX_BODY_BYTES": "max_body_bytes",
    "HEARTH_MAX_IMPORT_BYTES": "max_import_bytes",
    "HEARTH_MAX_MESSAGE_CHARS": "max_message_chars",
    "HEARTH_ATTACHMENT_MAX_COUNT": "attachment_max_count",
    "HEARTH_ATTACHMENT_MAX_BYTES": "attachment_max_bytes",
    "HEARTH_ATTACHMENT_TEXT_CHARS": "attachment_text_chars",
    "HEARTH_WEB_VENDOR_DIR": "web_vendor_dir",
    "HEARTH_TRUSTED_PROXIES": "trusted_proxies",
    "HEARTH_V1_PROVIDER_MODELS": "v1_provider_models",
    "HEARTH_PUBLIC_URL": "public_url",
    "TWILIO_ACCOUNT_SID": "twilio_account_sid",
    "TWILIO_AUTH_TOKEN": "twilio_auth_token",
    "HEARTH_TWILIO_FROM": "twilio_from_number",
    "HEARTH_TWILIO_API_BASE": "twilio_api_base",
    "HEARTH_SMS_PART_CHARS": "sms_part_chars",
    "HEARTH_EMAIL_ADDRESS": "email_address",
    "HEARTH_EMAIL_USER": "email_user",
    "HEARTH_IMAP_HOST": "imap_host",
    "HEARTH_IMAP_PORT": "imap_port",
    "HEARTH_IMAP_SSL": "imap_ssl",
    "HEARTH_IMAP_USERNAME": "imap_username",
    "HEARTH_IMAP_PASSWORD": "imap_password",
    "HEARTH_SMTP_HOST": "smtp_host",
    "HEARTH_SMTP_PORT": "smtp_port",
    "HEARTH_SMTP_STARTTLS": "smtp_starttls",
    "HEARTH_SMTP_USERNAME": "smtp_username",
    "HEARTH_SMTP_PASSWORD": "smtp_password",
    "HEARTH_EMAIL_POLL_SECONDS": "email_poll_seconds",
    "HEARTH_EMAIL_MAX_BYTES": "email_max_bytes",
    "HEARTH_ACTIVATION_TICK_SECONDS": "activation_tick_seconds",
    "HEARTH_JOB_LEASE_SECONDS": "job_lease_seconds",
    "HEARTH_VOICE_MODEL": "voice_model",
    "HEARTH_VOICE_NAME": "voice_name",
    "HEARTH_VOICE_TRANSCRIPTION_MODEL": "voice_transcription_model",
    "HEARTH_VOICE_RETENTION_RATIO": "voice_retention_ratio",
    "HEARTH_VOICE_IDLE_SECONDS": "voice_idle_seconds",
    "HEARTH_CONTACT_CODE_MINUTES": "contact_code_minutes",
    "HEARTH_CONTACT_CODE_SENDS_PER_HOUR": "contact_code_sends_per_hour",
    "HEARTH_CONTACT_CODE_ATTEMPTS": "contact_code_attempts",
    "HEARTH_REALTIME_URL": "realtime_url",
    "HEARTH_IDLE_CHECKPOINT_MINUTES": "idle_checkpoint_minutes",
    "HEARTH_CAPSULE_THRESHOLD": "capsule_threshold",
    "HEARTH_CAPSULE_RECENT_TURNS": "capsule_recent_turns",
    "HEARTH_COMPACTION_THRESHOLD": "compaction_threshold",
    "HEARTH_RECALL_BUDGET_MS": "recall_budget_ms",
}
_LENIENT_ENV = {
    "HANDOFF_PER_MESSAGE_CHARACTER_LIMIT": ("handoff_per_message_limit", DEFAULT_HANDOFF_PER_MESSAGE),
    "HANDOFF_TOTAL_CHARACTER_BUDGET": ("handoff_total_budget", DEFAULT_HANDOFF_TOTAL),
    "TIMELINE_HISTORY_EVENT_LIMIT": ("timeline_history_event_limit", DEFAULT_TIMELINE_LIMIT),
}


def platform_cache_dir(env: Mapping[str, str]) -> Path:
    """The user's cache folder for Hearth on this platform (the XDG base directory rule elsewhere)."""
    if sys.platform == "win32":
        return Path(env.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local") / "hearth" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "hearth"
    xdg = env.get("XDG_CACHE_HOME", "")
    # The specification ignores a relative XDG_CACHE_HOME.
    return (Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache") / "hearth"


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {name: env[key] for key, name in _ENV.items() if env.get(key)}
    for key, (name, default) in _LENIENT_ENV.items():
        if key in env:
            values[name] = positive_int_or_default(key, env[key], default)
    return values


def positive_int_or_default(key: str, raw: str, default: int) -> int:
    """Parse a positive integer; on anything else warn and use the default (never fail)."""
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = 0
    if value <= 0:
        log.warning("%s is not a positive integer; using the default %d", key, default)
        return default
    return value


def _read_config(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    return dict(data.get("hearth", data))


def _coerce(name: str, kind: Any, raw: Any) -> Any:
    kind = kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
        if kind == "bool":
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(raw)
        if kind == "Path":
            return Path(raw).expanduser()
        return str(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"setting {name} has an invalid value {raw!r} (expected {kind})") from None
