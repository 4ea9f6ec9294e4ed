"""Messaging channels (E5, E10): SMS and email reach the same relationship as the web and CLI.

Each adapter does three things and nothing else: authenticate what arrives (a Twilio signature, a
known mailbox), hand the text to ``inbound.receive`` which stores it on the user's current thread
with its channel, and deliver the reply that a background job produces (``outbound``). No adapter logs message
text, and every secret comes from settings.
"""

from __future__ import annotations

from hearth.outreach.channels.contacts import Contacts, PersonaChannels
from hearth.outreach.channels.inbound import Inbound, receive
from hearth.outreach.channels.outbound import deliver_reply

__all__ = ["Contacts", "Inbound", "PersonaChannels", "deliver_reply", "receive"]
