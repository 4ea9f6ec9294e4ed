"""SMS through Twilio (E10): signed inbound webhooks, replies through the REST API.

Inbound requests are checked with the official SDK's ``RequestValidator`` against the public URL
Twilio signed; a bad or missing signature stores nothing. Replies are sent with the official
``twilio`` client, split at word boundaries into parts of at most ``sms_part_chars``. The API base
is a setting so the same code can reach a Twilio-compatible endpoint (and the test server).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Mapping
from urllib.parse import parse_qsl

from hearth.errors import Conflict, Forbidden, InvalidInput, ProviderError
from hearth.outreach.channels.contacts import Contact
from hearth.outreach.channels.inbound import record_sent, sent_parts
from hearth.settings import Settings

if TYPE_CHECKING:
    from hearth.records.context import Context
    from hearth.records.ledger import Message

log = logging.getLogger(__name__)

TWILIO_API = "https://api.twilio.com"
MAX_PARTS = 10


def parse_form(body: bytes) -> dict[str, str]:
    """Twilio posts application/x-www-form-urlencoded UTF-8; a repeated key keeps its last value."""
    try:
        text = body.decode("utf-8")
        return dict(parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text), max_num_fields=200))
    except (UnicodeDecodeError, ValueError):
        raise InvalidInput("the webhook body is not a form") from None


def verify(settings: Settings, url: str, params: Mapping[str, str], signature: str | None) -> None:
    """Refuse a request Twilio did not sign for this URL (raises ``Forbidden``)."""
    from twilio.request_validator import RequestValidator

    if not settings.twilio_auth_token:
        raise Forbidden("SMS is not configured (no Twilio auth token)")
    if not signature or not RequestValidator(settings.twilio_auth_token).validate(url, dict(params), signature):
        raise Forbidden("the request signature is missing or wrong")


def split(text: str, limit: int) -> list[str]:
    """Parts of at most ``limit`` characters, broken at whitespace where there is any."""
    text = text.strip()
    parts: list[str] = []
    while len(text) > limit:
        cut = text.rfind(" ", 0, limit + 1)
        newline = text.rfind("\n", 0, limit + 1)
        cut = max(cut, newline)
        if cut < limit // 2:  # one very long word: cut it
            cut = limit
        parts.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        parts.append(text)
    return parts


def client(settings: Settings):
    from twilio.http.http_client import TwilioHttpClient
    from twilio.rest import Client

    if not (settings.twilio_account_sid and settings.twilio_auth_token and settings.twilio_from_number):
        raise Conflict("SMS and calls are not set up: set TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN and HEARTH_TWILIO_FROM")
    base = settings.twilio_api_base.rstrip("/")

    class _ApiBase(TwilioHttpClient):
        """Sends the SDK's requests to the configured API base instead of api.twilio.com."""

        def request(self, method, url, *args, **kwargs):  # type: ignore[no-untyped-def]
            if base != TWILIO_API and url.startswith(TWILIO_API):
                url = base + url[len(TWILIO_API):]
            return super().request(method, url, *args, **kwargs)

    return Client(settings.twilio_account_sid, settings.twilio_auth_token,
                  http_client=_ApiBase(timeout=settings.provider_timeout))


def deliver(ctx: "Context", contact: Contact, reply: "Message", thread: dict[str, str]) -> None:
    """Send ``reply`` to the contact as SMS parts; parts already sent (a retried job) are skipped."""
    from twilio.base.exceptions import TwilioException, TwilioRestException

    settings = ctx.settings
    parts = split(reply.content, settings.sms_part_chars)[:MAX_PARTS]
    done = sent_parts(ctx.store.connection(), "sms", reply.id)
    twilio = client(settings)
    for number, part in enumerate(parts, 1):
        key = f"{reply.id}:{number}/{len(parts)}"
        if key in done:
            continue
        try:
            sent = twilio.messages.create(to=contact.address, from_=settings.twilio_from_number, body=part)
        except TwilioRestException as exc:
            retryable = exc.status in (429,) or exc.status >= 500
            raise ProviderError(f"Twilio refused the SMS (HTTP {exc.status})",
                                "rate_limit" if exc.status == 429 else "server", retryable) from None
        except TwilioException:
            raise ProviderError("Twilio could not be reached", "server", True) from None
        record_sent(ctx, "sms", key, reply, sent.sid or "", contact)
    log.info("sms reply delivered in %d part(s)", len(parts))

