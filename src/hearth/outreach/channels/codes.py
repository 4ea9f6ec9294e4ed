"""Verification codes on their way to an address (U9): an SMS through the Twilio client, a mail
through SMTP. The code is in the message and nowhere else: never logged, stored only hashed."""

from __future__ import annotations

import logging
from email.message import EmailMessage

from hearth.errors import ConfigError, InvalidInput, ProviderError
from hearth.settings import Settings

log = logging.getLogger(__name__)


def text(settings: Settings, code: str) -> str:
    return (f"Your Hearth verification code is {code}. It expires in {settings.contact_code_minutes:g} minutes. "
            "If you did not ask for it, ignore this message.")


def send(settings: Settings, channel: str, address: str, code: str) -> None:
    """Send ``code`` to ``address``; a provider failure is a retryable ``ProviderError``."""
    if channel == "sms":
        from twilio.base.exceptions import TwilioException

        from hearth.outreach.channels.sms import client

        try:
            client(settings).messages.create(to=address, from_=settings.twilio_from_number, body=text(settings, code))
        except TwilioException:
            raise ProviderError("Twilio did not send the verification code", "server", True) from None
    elif channel == "email":
        if not (settings.smtp_host and settings.email_address):
            raise ConfigError("email codes need HEARTH_SMTP_HOST and HEARTH_EMAIL_ADDRESS")
        message = EmailMessage()
        message["From"], message["To"], message["Subject"] = settings.email_address, address, "Your Hearth code"
        message.set_content(text(settings, code))
        from hearth.outreach.channels.mail import send_mail

        send_mail(settings, message, "the verification code")
    else:
        raise InvalidInput(f"no verification codes on {channel!r}")
    log.info("%s verification code sent", channel)  # no address, no code
