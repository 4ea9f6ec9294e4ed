"""Recall: search, the search log and reindexing (imports live in cli/imports.py)."""

from __future__ import annotations

import time
from typing import Any

import click

from .base import Context, Table, _json, cli, console, err_console, pass_ctx


# -- recall: search, search log, archive import, reindex ----------------------------------------------
@cli.command("search")
@click.argument("query")
@click.option("--include-shielded", is_flag=True, help="Also search shielded conversations (this search only).")
@click.option("--archive/--no-archive", default=True, help="Include archive documents.")
@click.option("--conversations/--no-conversations", "messages", default=True, help="Include conversations.")
@click.option("--from", "date_from", help="Only results on or after this date (YYYY-MM-DD).")
@click.option("--to", "date_to", help="Only results on or before this date (YYYY-MM-DD).")
@click.option("--collection", "collections", multiple=True, help="Limit the archive to these collections.")
@click.option("--limit", type=click.IntRange(1, 100), default=10)
@click.option("--json", "as_json", is_flag=True, help="Print the results with their score breakdown as JSON.")
@pass_ctx
def search_cmd(obj: Context, query: str, as_json: bool, collections: tuple[str, ...], **options: Any) -> None:
    """Search your conversations and archive (keyword + meaning); logged in the search log."""
    from .. import retrieval
    from ..retrieval.deliberate import owner_search

    searcher = obj.searcher()  # not a scope: a search needs none of the layers (S20)
    # One search, then the process ends: a saved graph is mapped and none is built (S20). Set
    # back after, for a caller that runs the command in its own process (tests, scripts).
    retrieval.short_lived = True
    try:
        outcome = owner_search(searcher, query, collections=collections, **options)
    finally:
        retrieval.short_lived = False
        searcher.store.close()
    if as_json:
        _json({"reliability": outcome.reliability, "log_id": outcome.log_id,
               "results": [r.log_record() for r in outcome.results]})
        return
    table = Table("date", "source", "text", "signals", "score")
    for r in outcome.results:
        text = " ".join(r.text.split())
        table.add_row((r.date or "")[:10], r.title, text[:160] + ("…" if len(text) > 160 else ""),
                      "+".join(r.scores.get("signals", [])), f"{r.scores.get('fused', 0):.4f}")
    console.print(table)
    console.print(f"{len(outcome.results)} result(s), reliability {outcome.reliability} "
                  f"(search log entry {outcome.log_id}).", markup=False)


@cli.command("search-log")
@click.option("--limit", type=click.IntRange(1, 500), default=20)
@click.option("--origin", help="Only entries from this origin (owner, keyword_recall, tool:search_archive, ...).")
@click.option("--id", "entry_id", type=int, help="Show one entry in full.")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def search_log_cmd(obj: Context, limit: int, origin: str | None, entry_id: int | None, as_json: bool) -> None:
    """What every search looked for, what came back, and how reliable it looked."""
    scope = obj.scope()
    if entry_id is not None:
        _json(scope.search_log_entry(entry_id).to_dict())
        return
    entries = scope.search_log(limit=limit, origin=origin)
    if as_json:
        _json([e.to_dict() for e in entries])
        return
    table = Table("id", "when", "origin", "query", "results", "reliability", "ms")
    for e in entries:
        table.add_row(str(e.id), e.created_at[:19], e.origin, e.query[:60], f"{e.result_count}/{e.candidate_count}",
                      e.reliability, str(e.duration_ms))
    console.print(table)


@cli.command("reindex")
@click.option("--all-users", is_flag=True, help="Embed for every user, not only the acting one.")
@pass_ctx
def reindex_cmd(obj: Context, all_users: bool) -> None:
    """Embed every message and archive chunk that has no vector yet, and rebuild the vector index.

    Safe to interrupt: finished batches are saved, and the next run continues without duplicates.
    The vector indexes are then brought up to date and saved, so a later `hearth search` maps them.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from ..retrieval.semantic import INDEXES, embed_pending, shared_embedder, warm

    scope = obj.scope()
    embedder = shared_embedder(obj.hearth)
    # The local model runs two intra-op threads (both cores of the target machine); the rate shows
    # texts embedded per second as the run goes.
    columns = (TextColumn("Embedding"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rate]}"), TimeRemainingColumn())
    with Progress(*columns, console=err_console.rich) as bar:
        task = bar.add_task("embed", total=None, rate="")
        started = time.monotonic()

        def progress(done: int, total: int) -> None:
            elapsed = time.monotonic() - started
            rate = f"{done / elapsed:,.0f}/s" if done and elapsed > 0 else ""
            bar.update(task, completed=done, total=total, rate=rate)

        report = embed_pending(obj.hearth.store, embedder, user_id=None if all_users else scope.user_id,
                               progress=progress)
    INDEXES.clear()
    warm(obj.hearth, user_ids=None if all_users else [scope.user_id])
    seconds = time.monotonic() - started
    done = report.messages + report.chunks
    console.print(f"Embedded {report.messages} message(s) and {report.chunks} archive chunk(s) in {seconds:.1f} s"
                  f" ({done / seconds if seconds > 0 else 0:,.0f} per second); {report.remaining} left.", markup=False)
