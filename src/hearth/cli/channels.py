"""Messaging channels: contacts allowed to write in, where each persona answers, the mailbox."""

from __future__ import annotations

import click

from .base import Context, LayerChoice, Table, cli, console, pass_ctx


@cli.group()
def channels() -> None:
    """SMS and email contacts, and which channels each persona answers on."""


@channels.command("add-contact")
@click.argument("channel", type=LayerChoice("hearth.outreach.channels.contacts", "MESSAGING"))
@click.argument("address")
@click.option("--persona", help="The persona this sender talks to (default: the default persona).")
@pass_ctx
def add_contact(obj: Context, channel: str, address: str, persona: str | None) -> None:
    """Add a phone number or email address; it writes in once verified with the code sent to it."""
    scope = obj.scope()
    persona_id = scope.personas.by_name(persona).id if persona else None
    claim = scope.contacts.add(channel, address, persona_id)
    console.print(f"{claim.channel} {claim.address}: {claim.to_dict()['detail']}"
                  f" (hearth channels verify {claim.channel} ADDRESS CODE)", markup=False)


@channels.command("send-code")
@click.argument("channel", type=LayerChoice("hearth.outreach.channels.contacts", "MESSAGING"))
@click.argument("address")
@pass_ctx
def send_code(obj: Context, channel: str, address: str) -> None:
    """Send a new verification code to an address you added."""
    claim = obj.scope().contacts.send_code(channel, address)
    console.print(f"{claim.channel} {claim.address}: {claim.to_dict()['detail']}", markup=False)


@channels.command("verify")
@click.argument("channel", type=LayerChoice("hearth.outreach.channels.contacts", "MESSAGING"))
@click.argument("address")
@click.argument("code")
@pass_ctx
def verify(obj: Context, channel: str, address: str, code: str) -> None:
    """Enter the code sent to an address: it becomes a contact that can write in."""
    contact = obj.scope().contacts.verify(channel, address, code)
    console.print(f"Contact {contact.id} verified: {contact.channel} {contact.address}", markup=False)


@channels.command("contacts")
@pass_ctx
def list_contacts(obj: Context) -> None:
    """List the senders allowed to write in, and the addresses waiting for their code."""
    table = Table("id", "channel", "address", "persona", "verified")
    scope = obj.scope()
    for c in scope.contacts.list():
        table.add_row(str(c.id), c.channel, c.address, str(c.persona_id or "default"), "yes")
    for claim in scope.contacts.pending():
        table.add_row("-", claim.channel, claim.address, str(claim.persona_id or "default"), "waiting for the code")
    console.print(table)


@channels.command("remove-contact")
@click.argument("contact_id", type=click.IntRange(1))
@pass_ctx
def remove_contact(obj: Context, contact_id: int) -> None:
    obj.scope().contacts.remove(contact_id)
    console.print(f"Contact {contact_id} removed.", markup=False)


@channels.command("answer")
@click.argument("persona")
@click.argument("channel", type=LayerChoice("hearth.outreach.channels.contacts", "ANSWERABLE"))
@click.argument("state", type=click.Choice(["on", "off"]))
@pass_ctx
def answer(obj: Context, persona: str, channel: str, state: str) -> None:
    """Turn a persona's replies on one channel on or off (messages are kept either way)."""
    scope = obj.scope()
    scope.persona_channels.set(scope.personas.by_name(persona).id, channel, state == "on")
    console.print(f"{persona} {'answers' if state == 'on' else 'does not answer'} on {channel}.", markup=False)


@channels.command("poll-email")
@pass_ctx
def poll_email(obj: Context) -> None:
    """Read the mailbox once now (the worker also polls it on a schedule)."""
    from hearth.outreach.channels import mail

    hearth = obj.hearth
    counts = mail.poll(hearth, mail.mailbox_user(hearth))
    console.print(", ".join(f"{v} {k}" for k, v in counts.items()), markup=False)


@channels.command("call")
@click.argument("contact_id", type=click.IntRange(1))
@pass_ctx
def call(obj: Context, contact_id: int) -> None:
    """Ring a phone contact; the answered call is a voice session in the same thread."""
    from hearth.outreach.voice import call as place_call

    console.print(f"Calling; Twilio call {place_call(obj.hearth.context(obj.scope().user_id), contact_id)}.", markup=False)
