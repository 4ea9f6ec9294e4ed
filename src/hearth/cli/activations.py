"""Autonomous activations: morning messages, reflections and check-ins, all off by default."""

from __future__ import annotations

import click

from .base import Context, LayerChoice, Table, _json, cli, console, pass_ctx


@cli.group()
def activations() -> None:
    """The companion reaching out on its own (off unless you add one)."""


@activations.command("add")
@click.argument("kind", type=click.Choice(["morning", "reflection", "checkins"]))
@click.option("--persona", required=True, help="Which persona reaches out.")
@click.option("--at", "at", default="08:00", show_default=True, help="morning: local time of day.")
@click.option("--rule", help="morning: an RFC 5545 RRULE instead of --at, e.g. FREQ=WEEKLY;BYDAY=SA;BYHOUR=9")
@click.option("--idle-hours", type=click.FloatRange(0.5, 336), default=6.0, show_default=True,
              help="reflection: after this long without a message from you.")
@click.option("--channel", type=LayerChoice("hearth.outreach.activations", "DELIVERY"), default="web", show_default=True,
              help="Where the message arrives.")
@pass_ctx
def add(obj: Context, kind: str, persona: str, at: str, rule: str | None, idle_hours: float, channel: str) -> None:
    """Add a morning message, a reflection after quiet, or check-ins on dates you mention."""
    scope = obj.scope()
    persona_id = scope.personas.by_name(persona).id
    activation = scope.activations.add(persona_id, kind, at=at, rule=rule, idle_minutes=round(idle_hours * 60),
                                       channel=channel)
    due = f"; next {activation.next_run_at}" if activation.next_run_at else ""
    console.print(f"Activation {activation.id} ({kind}) added{due}.", markup=False)


@activations.command("list")
@pass_ctx
def list_(obj: Context) -> None:
    table = Table("id", "kind", "persona", "schedule", "channel", "on", "next (UTC)")
    for a in obj.scope().activations.list():
        schedule = a.rule or (f"after {a.idle_minutes} min quiet" if a.idle_minutes else "")
        table.add_row(str(a.id), a.kind, str(a.persona_id), schedule, a.channel, "yes" if a.enabled else "no",
                      a.next_run_at or "")
    console.print(table)


@activations.command("rm")
@click.argument("activation_id", type=click.IntRange(1))
@pass_ctx
def rm(obj: Context, activation_id: int) -> None:
    obj.scope().activations.remove(activation_id)
    console.print(f"Activation {activation_id} removed.", markup=False)


@activations.command("prefs")
@click.option("--timezone", "timezone_name", help="IANA zone, e.g. Europe/London.")
@click.option("--quiet", help="Quiet hours as HH:MM-HH:MM, e.g. 22:00-08:00.")
@click.option("--daily-limit", type=click.IntRange(0, 24))
@pass_ctx
def prefs(obj: Context, timezone_name: str | None, quiet: str | None, daily_limit: int | None) -> None:
    """Show or change the time zone, quiet hours and per-day limit."""
    start, _, end = (quiet or "").partition("-")
    _json(obj.scope().activations.set_prefs(timezone_name=timezone_name, quiet_start=start or None,
                                            quiet_end=end or None, daily_limit=daily_limit).to_dict())


@activations.command("runs")
@click.option("--limit", type=click.IntRange(1, 1000), default=20)
@pass_ctx
def runs(obj: Context, limit: int) -> None:
    """What fired, and what became of it (sent, quiet hours, limit, stopped, missed)."""
    _json(obj.scope().activations.runs(limit))
