"""Start-up of short-lived commands (S20), as ratios to a bare interpreter started in the same run.

    python benchmarks/startup.py [--large DIR] [--repeats 7] [--query "where did we go in May"]

Each round starts, one after the other, ``python -c pass`` (the floor), ``hearth --help``,
``hearth search QUERY`` on an empty home and, with ``--large`` (a home made by ``generate.py``),
the same search there, and with ``--uncached`` too the large home's search with a cache folder that
cannot be written (the query graph derived on every start, as before S20; the empty home's search
loads no model at all, having no vector to compare its query with); each is a fresh process, timed
from start to exit (wall clock) and by the CPU time it used (``RUSAGE_CHILDREN``). Rounds interleave the commands so a busy machine slows
each alike. Printed: medians and p99 in milliseconds, and each median as a ratio to the floor's;
the goals are ``--help`` within 5x, the empty search within 30x, the large home's search within 2x
of the empty one's.

Before the rounds, one warm-up run of each command writes Python's bytecode (into a temporary
folder: an installed package has its own, and a source checkout run with PYTHONDONTWRITEBYTECODE
would otherwise compile every module on every start) and, with ``--large``, derives the local
model's query graph into a temporary cache folder and remembers the model files' digests there
(each warm-up's time is printed), and runs ``hearth reindex`` on the large home, which saves its
vector graphs as ``hearth serve`` would: the rounds measure what every later start costs.
``--cache-dir`` uses an existing cache folder instead.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOALS = {"help": ("pass", 5.0), "search_empty": ("pass", 30.0), "search_large": ("search_empty", 2.0)}


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {"median_ms": round(statistics.median(ordered), 1), "p99_ms": round(p99, 1), "n": len(ordered)}


FAILURES: dict[str, list[int]] = {}  # command -> exit codes of its runs that did not end with 0


def timed(argv: list[str], env: dict[str, str], name: str = "") -> tuple[float, float]:
    """(wall ms, CPU ms) of one process run to its end. A run that fails is timed all the same and
    its exit code kept (printed with the figures): one crash does not discard a whole run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    code = subprocess.run(argv, env=env, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    if code != 0:
        FAILURES.setdefault(name, []).append(code)
    return wall, cpu


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--large", help="a home made by generate.py, searched beside the empty one")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--query", default="where did we go in May")
    parser.add_argument("--cache-dir", help="the query graph's cache folder (default: a temporary one)")
    parser.add_argument("--uncached", action="store_true",
                        help="also the large home's search with a cache folder that cannot be written (derived every time)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args(argv)
    if args.uncached and not args.large:
        parser.error("--uncached needs --large: a search on the empty home loads no model")

    scratch = Path(tempfile.mkdtemp(prefix="hearth-startup-"))
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "HEARTH_HOME")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH", "")]))
        env["PYTHONPYCACHEPREFIX"] = str(scratch / "bytecode")
        env["HEARTH_CACHE_DIR"] = args.cache_dir or str(scratch / "cache")
        hearth = [sys.executable, "-m", "hearth"]
        commands = {
            "pass": [sys.executable, "-c", "pass"],
            "help": [*hearth, "--help"],
            "search_empty": [*hearth, "--home", str(scratch / "empty"), "search", args.query],
        }
        if args.large:
            commands["search_large"] = [*hearth, "--home", str(Path(args.large).resolve()), "search", args.query]
        envs = {name: env for name in commands}
        if args.uncached:
            # A cache folder under a regular file cannot be made: each start derives the graph, as before S20.
            (scratch / "not-a-folder").write_bytes(b"")
            commands["search_uncached"] = commands["search_large"]
            envs["search_uncached"] = {**env, "HEARTH_CACHE_DIR": str(scratch / "not-a-folder" / "cache")}

        # Warm-up: bytecode written, the empty home's database created, with --large the query graph
        # derived (by the first search that embeds a query) and the model files' digests remembered,
        # and the large home's vector graph saved as `hearth serve` leaves it (`hearth reindex`).
        if args.large:
            reindexed = timed([*hearth, "--home", str(Path(args.large).resolve()), "reindex"], env, "reindex")[0]
            print(f"large home reindexed (its vector graphs saved) in {reindexed:.0f} ms")
        first = {name: timed(command, envs[name], name)[0] for name, command in commands.items()}
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeats):
            for name, command in commands.items():
                wall, cpu = timed(command, envs[name], name)
                walls[name].append(wall)
                cpus[name].append(cpu)
        graphs = sorted(p.name for p in Path(env["HEARTH_CACHE_DIR"]).glob("query-graph-*"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    figures = {name: {"wall": summary(walls[name]), "cpu": summary(cpus[name])} for name in commands}
    floor = figures["pass"]["wall"]["median_ms"]
    load = os.getloadavg()
    warm = ", ".join(f"{name} {ms:.0f} ms" for name, ms in first.items())
    print(f"start-up of short-lived commands: {args.repeats} rounds, {os.cpu_count()} CPUs, "
          f"load average {load[0]:.1f} / {load[1]:.1f}; warm-up (bytecode written, the query graph derived "
          f"unless the cache folder had it): {warm}; cached graphs: {len(graphs)}")
    print(f"{'command':<14} {'wall median':>12} {'wall p99':>10} {'cpu median':>11} {'x pass':>8} {'x pass (cpu)':>13}")
    cpu_floor = max(figures["pass"]["cpu"]["median_ms"], 1.0)
    for name, figure in figures.items():
        wall, cpu = figure["wall"], figure["cpu"]
        print(f"{name:<14} {wall['median_ms']:>10.1f}ms {wall['p99_ms']:>8.1f}ms {cpu['median_ms']:>9.1f}ms "
              f"{wall['median_ms'] / floor:>7.1f}x {cpu['median_ms'] / cpu_floor:>12.1f}x")
    for name, codes in FAILURES.items():
        print(f"{name}: {len(codes)} of {args.repeats + 1} runs failed (exit codes {sorted(set(codes))};"
              " a negative one is the signal that ended the process)")
    for name, (base, limit) in GOALS.items():
        if name not in figures:
            continue
        ratio = figures[name]["wall"]["median_ms"] / figures[base]["wall"]["median_ms"]
        verdict = "met" if ratio <= limit else "MISSED"
        print(f"goal {name} within {limit:g}x {base}: {ratio:.2f}x ({verdict})")
    if args.json:
        print(json.dumps({"figures": figures, "first_ms": first, "load": load, "failures": FAILURES}, indent=2))


if __name__ == "__main__":
    main()
