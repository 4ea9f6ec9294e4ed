"""The ``hearth`` group, its shared context and the edge where errors become one line.

Every command resolves settings once (flags > HEARTH_* env > config file > defaults), opens the
deployment, acts as one user (the owner unless ``--user`` names another), and prints errors from
the error tree as one clear line. Invalid settings and invalid input exit with code 2, other
errors with code 1.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console

from hearth.scope import Hearth, Scope

from .. import __version__
from ..errors import ConfigError, HearthError, InvalidInput, SchemaError
from ..settings import Settings
from ..store import DriverError
from ..store.connection import translate

console = Console(highlight=False)
# soft_wrap: an error stays one line however long (never folded at the terminal width).
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


class Context:
    def __init__(self, overrides: dict[str, Any], user: str | None):
        self.overrides = overrides
        self.user = user
        self._hearth: Hearth | None = None

    @property
    def settings(self) -> Settings:
        return Settings.resolve(self.overrides)

    @property
    def hearth(self) -> Hearth:
        if self._hearth is None:
            self._hearth = Hearth(self.settings)
        return self._hearth

    def scope(self) -> Scope:
        hearth = self.hearth
        if self.user:
            return hearth.scope(hearth.users.by_name(self.user).id)
        return hearth.scope()


pass_ctx = click.make_pass_decorator(Context)


class HearthGroup(click.Group):
    """Translates the error tree into one line and an exit code at the edge."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (ConfigError, InvalidInput, SchemaError) as exc:
            # A database from a newer Hearth is a deployment's configuration, as a bad setting is.
            err_console.print(f"Error: {exc}", markup=False)
            sys.exit(2)
        except HearthError as exc:
            err_console.print(f"Error: {exc}", markup=False)
            sys.exit(1)
        except (DriverError, UnicodeEncodeError, OverflowError) as exc:
            # Outside a store transaction (which translates on its own): the same translation.
            error = translate(exc)
            if error is None:
                raise
            err_console.print(f"Error: {error}", markup=False)
            sys.exit(2 if isinstance(error, InvalidInput) else 1)


@click.group(cls=HearthGroup)
@click.version_option(__version__, prog_name="hearth")
@click.option("--home", envvar="HEARTH_HOME", help="Data folder (default ~/.local/share/hearth).")
@click.option("--user", "user", help="Act as this user (default: the owner).")
@click.pass_context
def cli(ctx: click.Context, home: str | None, user: str | None) -> None:
    """Hearth: memory and continuity for AI companions."""
    ctx.obj = Context({"home": home}, user)


def main() -> None:
    cli(prog_name="hearth")


def _json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


