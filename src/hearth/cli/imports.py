"""Imports and exports: ``hearth import`` (any supported format), card and lorebook exports."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .base import Context, cli, console, err_console, pass_ctx
from .layers import fragments
from .threads import persona

FORMAT_CHOICES = ("auto", "card", "lorebook", "st-chat", "chatgpt", "claude", "labelled", "hearth", "hearth-chat")
ROLE_ONLY = ("chatgpt", "claude")  # formats whose assistant turns need a persona to be named after


@cli.command("import")
@click.argument("args", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(FORMAT_CHOICES), default="auto",
              help="The file format (default: detected from the content).")
@click.option("--collection", default="imports", help="Archive collection for archive formats.")
@click.option("--persona", "persona_name",
              help="Persona the imported assistant turns belong to (asked once when not given).")
@click.option("--date", "document_date", help="Date of a labelled text archive (YYYY-MM-DD).")
@click.option("--mine", is_flag=True, help="Afterwards, propose durable memories from what was imported.")
@click.option("--update", "update", is_flag=True,
              help="A card exported from one of your personas and changed since updates that persona.")
@click.option("--as-new", "as_new", is_flag=True,
              help="A card exported from one of your personas becomes a new persona instead.")
@pass_ctx
def import_cmd(obj: Context, args: tuple[str, ...], fmt: str, collection: str, persona_name: str | None,
               document_date: str | None, mine: bool, update: bool, as_new: bool) -> None:
    """Import files: character cards (PNG/JSON), lorebooks, SillyTavern chats (JSONL), ChatGPT
    exports (.zip or conversations.json), Claude exports, labelled text, or a Hearth export.

    \b
    hearth import card.png lore.json chat.jsonl      # formats detected
    hearth import card mira.json                     # or named first
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from hearth.interop.imports import detect

    from ..errors import InvalidInput

    if update and as_new:
        raise InvalidInput("choose one of --update and --as-new")
    on_match = "update" if update else "new" if as_new else "ask"
    paths = list(args)
    if paths[0] in FORMAT_CHOICES and len(paths) > 1:
        fmt = paths.pop(0)
    for path in paths:
        if not Path(path).is_file():
            raise InvalidInput(f"no such file: {path}")
    scope = obj.scope()
    persona = scope.personas.by_name(persona_name) if persona_name else None
    reports = []
    for path in paths:
        data = Path(path).read_bytes()
        name = Path(path).name
        kind = detect(data, name) if fmt == "auto" else fmt
        if persona is None and kind in ROLE_ONLY + ("st-chat",):
            persona = _ask_persona(scope, kind)
        columns = (TextColumn(f"Importing {name}"), BarColumn(), MofNCompleteColumn())
        with Progress(*columns, console=err_console.rich, transient=True, disable=not err_console.is_terminal) as bar:
            task = bar.add_task("import", total=None)

            def progress(done: int, total: int, bar=bar, task=task) -> None:
                bar.update(task, completed=done, total=total)

            report = scope.imports.file(data, name, fmt=kind, persona=persona, collection=collection,
                                        document_date=document_date, mine=mine, progress=progress,
                                        on_match=on_match)
        if report.ids.get("existing"):  # a changed card of one's own persona: asked, or told how to choose
            choice = _ask_match(report) if interactive() else None
            if choice:
                report = scope.imports.file(data, name, fmt=kind, on_match=choice)
            else:
                report.reason += " (run again with --update or --as-new)"
        if report.status == "refused" and len(paths) == 1:
            raise InvalidInput(report.reason)  # one file, one line: the reason (exit code 2)
        reports.append(report)
        click.echo(_line(report))
    refused = [r for r in reports if r.status == "refused"]
    if refused and len(reports) == 1:
        raise InvalidInput(refused[0].reason)
    # Input refused is exit code 2, as everywhere in the CLI: every file refused is 2; some refused
    # while others were imported is 1 (a partial result the output lists file by file).
    if refused:
        sys.exit(2 if len(refused) == len(reports) else 1)


def _line(report) -> str:
    c = report.counts
    if report.status == "refused":
        return f"{report.file}: refused: {report.reason}"
    if report.format == "hearth":
        return (f"Restored {c.get('conversations', 0)} conversation(s) and {c.get('messages', 0)} message(s) "
                "from the export.")
    if "documents" in c:
        text = (f"{report.file}: Imported {c['documents']} document(s) ({c.get('chunks', 0)} chunks); "
                f"{c.get('duplicates', 0)} already in the archive.")
        if c.get("proposals"):
            text += f" {c['proposals']} memory suggestion(s) wait for review."
        return text
    counts = ", ".join(f"{v} {k}" for k, v in c.items()) or "nothing new"
    return f"{report.file} ({report.format}): {report.status}; {counts}"


def interactive() -> bool:
    return sys.stdin.isatty()


def _ask_match(report) -> str | None:
    """Asked per card: update the persona it was exported from, import it as a new one, or skip."""
    click.echo(f"{report.reason}.")
    choice = click.prompt("This character is already here: update it, import it as new, or skip?",
                          type=click.Choice(["update", "new", "skip"]), default="skip")
    return None if choice == "skip" else choice


def _ask_persona(scope, kind: str):
    """Asked once per run: whose words the imported assistant turns are."""
    personas = scope.personas.list()
    if kind == "st-chat" or len(personas) <= 1 or not interactive():
        return None  # st-chat matches its character by name; otherwise the default persona
    names = [p.name for p in personas]
    choice = click.prompt("Which persona spoke the assistant turns?", type=click.Choice(names), default=names[0])
    return scope.personas.by_name(choice)


def _export_card(obj: Context, name: str, output: str | None, as_json: bool) -> None:
    scope = obj.scope()
    persona = scope.personas.by_name(name)
    if as_json:
        data = json.dumps(scope.imports.card_json(persona.id), indent=2, ensure_ascii=False).encode("utf-8")
    else:
        data = scope.imports.card_png(persona.id)
    target = Path(output or f"{persona.name}.{'json' if as_json else 'png'}")
    target.write_bytes(data)
    console.print(f"Wrote {target} ({len(data)} bytes).", markup=False)


@persona.command("export-card")
@click.argument("name")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), help="Where to write (default NAME.png).")
@click.option("--json", "as_json", is_flag=True, help="Write the V3 card JSON instead of a PNG.")
@pass_ctx
def persona_export_card(obj: Context, name: str, output: str | None, as_json: bool) -> None:
    """Write a persona as a character card V3 PNG (chara and ccv3 chunks) SillyTavern loads."""
    _export_card(obj, name, output, as_json)


@fragments.command("export-lorebook")
@click.option("--book", help="Only this lorebook (the fragments' category); default all fragments.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), help="Where to write (default stdout).")
@pass_ctx
def fragments_export_lorebook(obj: Context, book: str | None, output: str | None) -> None:
    """Write fragments as a SillyTavern World Info JSON file."""
    text = json.dumps(obj.scope().imports.lorebook_json(book), indent=2, ensure_ascii=False)
    if output:
        Path(output).write_text(text + "\n", encoding="utf-8")
        console.print(f"Wrote {output}.", markup=False)
    else:
        click.echo(text)
