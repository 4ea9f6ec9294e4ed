"""S16: the send-path benchmark cannot flatter.

The benchmark's own functions run here on a tiny generated deployment (real SQLite files, the real
send path, the background worker): a repeated text is refused before anything is sent unless the
run asks for repeats, and then the report counts them and their query-cache hits; the report
states the page-cache state, how the sends met the background jobs, and per kind of message the
sends whose recall budget dropped a step, by step.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from hearth.errors import InvalidInput

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    sys.path.insert(0, str(BENCHMARKS))
    import generate
    import send_path

    home = tmp_path_factory.mktemp("s16") / "deployment"
    generate.main(["--messages", "600", "--conversations", "20", "--active", "60", "--fragments", "10",
                   "--memories", "5", "--documents", "3", "--seed", "4", "--home", str(home)])
    return send_path, home


def _active_messages(home: Path) -> int:
    manifest = json.loads((home / "bench.json").read_text())
    with sqlite3.connect(home / "hearth.db") as conn:
        return conn.execute("SELECT count(*) FROM messages WHERE conversation_id = ?",
                            (manifest["active_conversation_id"],)).fetchone()[0]


@pytest.mark.sqlite_only
def test_s16_a_repeated_text_is_refused_unless_the_run_asks_for_repeats_sqlite(bench, tmp_path):
    send_path, home = bench
    texts = tmp_path / "texts.tsv"
    texts.write_text("recall\tDo you remember the lantern by the harbour?\n"
                     "short\tgood night, love\n"
                     "recall\tDo you remember the  lantern by the harbour?\n", encoding="utf-8")
    before = _active_messages(home)
    with pytest.raises(InvalidInput, match="repeat"):
        send_path.run_deployment(send_path.parse(["--deployment", str(home), "--texts", str(texts), "--no-worker"]))
    assert _active_messages(home) == before  # refused before anything was sent

    result = send_path.run_deployment(send_path.parse(["--deployment", str(home), "--texts", str(texts),
                                                       "--no-worker", "--allow-repeats"]))
    assert result["texts"]["distinct"] is False
    assert result["texts"]["repeated_sends"] == 1
    hits = result["texts"]["query_cache_hits"]
    assert hits is None or hits == 1  # the repeated recall cue found its query vector cached

    # The generated texts of every kind are distinct: no send measures another's cache.
    args = send_path.parse(["--deployment", str(home), "--per-class", "40"])
    with sqlite3.connect(home / "hearth.db") as conn:
        conn.row_factory = sqlite3.Row
        messages, repeated = send_path.plan_messages(args, json.loads((home / "bench.json").read_text()), conn)
    assert repeated == 0 and len(messages) == 200
    assert len({" ".join(text.split()) for _, text in messages}) == 200


@pytest.mark.sqlite_only
def test_s16_the_report_states_page_cache_overlap_and_budget_drops_by_kind_sqlite(bench, capsys):
    send_path, home = bench
    # A budget of 1 ms leaves every optional step out (but the rare probe): the drops must show.
    result = send_path.run_deployment(send_path.parse([
        "--deployment", str(home), "--per-class", "4", "--cold", "--overlap", "5", "--recall-budget-ms", "1"]))

    cache = result["page_cache"]
    assert cache["state"] == "cold" and cache["files"] >= 1 and "evicted_mib" in cache
    assert "resident_at_start" in cache and "resident_at_end" in cache

    assert result["mode"].startswith("overlap: another thread queued 5 background jobs a second")
    overlap = result["overlap"]
    assert overlap["ticks"] >= 1 and sum(overlap["queued"].values()) == overlap["ticks"]

    drops = result["budget_drops"]
    assert set(drops) == {"everyday", "recall", "date", "fragment", "short"}
    assert all(d["sends"] == 4 for d in drops.values())
    asked = drops["recall"]["archive_recall_searches"] + drops["date"]["archive_recall_searches"]
    assert asked == 8  # every recall cue and date question searched the archive
    assert drops["recall"]["dropped"].get("feedback", 0) + drops["date"]["dropped"].get("feedback", 0) >= 6
    assert drops["recall"]["sends_with_a_drop"] + drops["date"]["sends_with_a_drop"] >= 6
    assert drops["short"]["archive_recall_searches"] == 0 and drops["short"]["dropped"] == {}

    send_path.print_deployment(result)
    out = capsys.readouterr().out
    assert "page cache: cold" in out
    assert "mode: overlap" in out
    assert "sends whose budget dropped a step, by kind" in out
    assert "all 20 measured texts distinct" in out


@pytest.mark.sqlite_only
def test_s16_s17_a_before_and_after_in_one_run_alternates_one_setting_by_send_sqlite(bench):
    """``--alternate KEY=VALUE``: every other send of each kind runs archive recall with that one
    setting changed and is reported as a kind of its own, beside its own floor; the shipped
    setting is back afterwards."""
    send_path, home = bench
    from hearth.prompt.layers import archive_recall

    shipped = archive_recall.SEND_PATH
    result = send_path.run_deployment(send_path.parse([
        "--deployment", str(home), "--kinds", "date", "--per-class", "4", "--no-worker",
        "--alternate", "dated_shared_search=false"]))
    assert set(result["by_kind"]) == {"date", "date (dated_shared_search=false)"}
    assert all(v["n"] == 2 and v["floor_median_ms"] > 0 for v in result["by_kind"].values())
    assert any("dated_shared_search=false" in note for note in result["notes"])
    assert archive_recall.SEND_PATH is shipped
