"""The ``hearth`` group, its shared context and the edge where errors become one line.

Every command resolves settings once (flags > HEARTH_* env > config file > defaults), opens the
deployment, acts as one user (the owner unless ``--user`` names another), and prints errors from
the error tree as one clear line. Invalid settings and invalid input exit with code 2, other
errors with code 1.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from .. import __version__
from ..errors import ConfigError, HearthError, InvalidInput, SchemaError
from .commands import COMMANDS

if TYPE_CHECKING:
    from hearth.scope import Hearth, Scope
    from hearth.settings import Settings
    from hearth.store import Store



class _Console:
    """rich's ``Console``, made on its first use: importing rich costs more than all of
    ``hearth --help`` does without it (S20)."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Any = None

    @property
    def rich(self) -> Any:
        """The console itself, for what rich takes as an argument (a progress bar)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.rich, name)


def Table(*columns: Any, **options: Any) -> Any:  # a class in rich; imported on first use here
    from rich.table import Table as RichTable

    return RichTable(*columns, **options)


def Text(text: str = "", **options: Any) -> Any:
    from rich.text import Text as RichText

    return RichText(text, **options)


console = _Console(highlight=False)
# soft_wrap: an error stays one line however long (never folded at the terminal width).
err_console = _Console(stderr=True, highlight=False, soft_wrap=True)


class Context:
    def __init__(self, overrides: dict[str, Any], user: str | None):
        self.overrides = overrides
        self.user = user
        self._hearth: Hearth | None = None

    @property
    def settings(self) -> Settings:
        from hearth.settings import Settings

        return Settings.resolve(self.overrides)

    @property
    def hearth(self) -> Hearth:
        if self._hearth is None:
            from hearth.scope import Hearth

            self._hearth = Hearth(self.settings)
        return self._hearth

    def scope(self) -> Scope:
        hearth = self.hearth
        if self.user:
            return hearth.scope(hearth.users.by_name(self.user).id)
        return hearth.scope()

    def searcher(self) -> Searcher:
        """What ``hearth search`` needs: the store, the acting user and the embedder, opened without
        a ``Hearth`` (a scope wires every layer of the send path, and imports them; S20)."""
        from hearth.records.users import Users
        from hearth.store import open_store

        settings = self.settings
        store = open_store(settings.database_url, settings.database_path)
        users = Users(store)
        return Searcher(store, (users.by_name(self.user) if self.user else users.owner()).id, settings)


class Searcher:
    """A user's store and embedder for ``retrieval.deliberate.owner_search``; the embedder is made
    (not loaded: the local model loads on its first query) only if a search has vectors to compare."""

    def __init__(self, store: Store, user_id: int, settings: Settings) -> None:
        self.store = store
        self.user_id = user_id
        self.settings = settings

    @property
    def embedder(self) -> Any:
        from hearth.retrieval.embedder import embedder_from_settings

        return embedder_from_settings(self.settings)  # the local model is one per process


pass_ctx = click.make_pass_decorator(Context)


class LayerChoice(click.Choice):
    """A ``click.Choice`` whose values are a constant of a layer, imported when the command runs
    (or shows its own help), not when ``hearth`` starts (S20)."""

    def __init__(self, module: str, name: str) -> None:
        self._source = (module, name)
        self._values: tuple[Any, ...] | None = None
        self.case_sensitive = True

    @property
    def choices(self) -> tuple[Any, ...]:
        if self._values is None:
            module, name = self._source
            self._values = tuple(getattr(importlib.import_module(module), name))
        return self._values

    @choices.setter
    def choices(self, values: tuple[Any, ...]) -> None:
        self._values = tuple(values)


class HearthGroup(click.Group):
    """Imports a command's module only when that command runs (click's lazy-loading pattern,
    ``Group.get_command``), lists every command from ``commands.COMMANDS`` without importing any
    (S20), and translates the error tree into one line and an exit code at the edge."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        # Every module of the command each time, not only the first: a group already registered by
        # one module (``persona`` by threads.py) may still lack the subcommands another one adds.
        for module in COMMANDS.get(cmd_name, ((), ""))[0]:
            importlib.import_module(f"{__package__}.{module}")
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: click.Context,
                        args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            # click suggests close names from the commands registered so far: here, none yet. (A
            # first word like an option was an option error: that one stands as it is.)
            if ctx.resilient_parsing or not args or not args[0][:1].isalnum() or args[0] in self.list_commands(ctx):
                raise
            from difflib import get_close_matches

            close = get_close_matches(args[0], self.list_commands(ctx))
            if not close:
                raise
            names = ", ".join(repr(name) for name in sorted(close))  # worded as click words it
            hint = f" Did you mean {names}?" if len(close) == 1 else f" (Did you mean one of: {names}?)"
            raise click.UsageError(f"{exc.message}{hint}", ctx) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As ``click.Group.format_commands``, with each command's short help taken from the table."""
        rows: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            if name in COMMANDS:
                # A stand-in carrying the first sentence: click shortens it as it would the real help.
                rows.append((name, click.Command(name, help=COMMANDS[name][1])))
            elif not self.commands[name].hidden:
                rows.append((name, self.commands[name]))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, command.get_short_help_str(limit)) for name, command in rows])

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
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise  # click's own (``hearth search --help`` ends in an Exit): no store to import for them
        except Exception as exc:
            # A driver error outside a store transaction (which translates on its own): the same
            # translation. The store is imported here, not at the top (S20); any other error and
            # any the store does not translate go on up unchanged.
            from ..store import DriverError
            from ..store.connection import translate

            error = translate(exc) if isinstance(exc, (DriverError, UnicodeEncodeError, OverflowError)) else None
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
    cli(prog_name="hearth", terminal_width=help_width())


def help_width() -> int:
    """The width click gives help text when it measures the terminal itself (``HelpFormatter``:
    the terminal's columns, at most 80, less 2, at least 50), measured as ``shutil.get_terminal_size``
    does (``COLUMNS``, else the terminal, else 80) but without importing shutil, which with its
    compression modules costs ``hearth --help`` more than all of Hearth's own imports (S20)."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
        columns = columns or 80
    return max(min(columns, 80) - 2, 50)


def _json(data: Any) -> None:
    import json  # here: ``hearth --help`` has no use for it (S20)

    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


