"""Outreach: scheduled check-ins (U4) and messaging channels (U6): contacts, claims, deliveries."""

from __future__ import annotations

from .base import Entry, Exempt, Kept, Plain, Stored

AREA = "outreach"
_OWN = Kept("the person's own schedule and addresses, not a trace of a conversation: they go with the account")
_CHANNEL = Plain("a channel's name", "channel")

STORED: list[Entry] = [
    Exempt("activation_prefs", AREA, (Plain("a time zone and quiet hours", "timezone", "quiet_start", "quiet_end"),)),
    Exempt("activation_runs", AREA, (Plain("a run's status", "status"),)),
    Stored("activations", AREA, ("rule", "note"), plain=(Plain("a kind of check-in", "kind"), _CHANNEL),
           on_conversation=_OWN, on_message=_OWN),
    Stored("channel_contacts", AREA, ("address",), plain=(_CHANNEL,), on_conversation=_OWN, on_message=_OWN),
    Stored("contact_claims", AREA, ("address",), plain=(_CHANNEL, Plain("a code's hash and salt", "code_hash",
                                                                          "code_salt")),
           on_conversation=_OWN, on_message=_OWN),
    Stored("contact_code_sends", AREA, ("address",), plain=(_CHANNEL,), on_conversation=_OWN, on_message=_OWN),
    # What a delivery was: ids the provider gave it, never its text (that is the message's).
    Exempt("channel_messages", AREA, (
        _CHANNEL, Plain("a direction and a status", "direction", "status"),
        Plain("the provider's ids for the delivery", "external_id", "provider_ref"))),
    Exempt("persona_channels", AREA, (_CHANNEL,)),
]
