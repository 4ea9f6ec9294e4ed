"""A quick version of every scale benchmark (small N), for ``make bench``: a couple of minutes.

    python benchmarks/run_quick.py [--keep DIR]

Generates a small deployment (20,000 archived messages) in a temporary directory, then runs the
send path on it and on short threads, ingestion, the server footprint, memory edits and trigger
matching, each as its own process, and prints their output with the time each took. The figures
are for checking that everything runs; docs/benchmarks.md holds the full-size ones and the
commands that produced them. Exits non-zero if any benchmark failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def steps(deployment: str) -> list[tuple[str, list[str]]]:
    return [
        ("generate a small deployment", ["generate.py", "--messages", "20000", "--conversations", "100",
                                         "--active", "1000", "--fragments", "500", "--memories", "200",
                                         "--documents", "50", "--home", deployment, "--force"]),
        ("send path on the deployment", ["send_path.py", "--deployment", deployment, "--sends", "60"]),
        ("send path by thread length", ["send_path.py", "--sizes", "1000", "5000", "--sends", "20"]),
        ("ingestion", ["ingest.py", "--messages", "5000", "--embed-messages", "300"]),
        ("server footprint", ["footprint.py", "--deployment", deployment, "--sends", "3", "--settle", "1"]),
        ("memory edits", ["memory_edits.py", "--conversations", "500", "--memories", "100", "--sent", "50"]),
        ("trigger matching", ["triggers.py"]),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", help="build the quick deployment here and keep it")
    args = parser.parse_args()
    failed = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        deployment = args.keep or str(Path(tmp) / "deployment")
        for title, command in steps(deployment):
            script = HERE / command[0]
            if not script.exists():
                print(f"== {title}: {command[0]} not available yet\n")
                continue
            print(f"== {title}: python benchmarks/{' '.join(command)}", flush=True)
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, str(script), *command[1:]], capture_output=True, text=True)
            elapsed = time.perf_counter() - t
            output = proc.stdout.strip()
            if title.startswith("generate"):
                output = "(manifest written to bench.json)"
            print(output)
            if proc.returncode:
                failed.append(title)
                print(proc.stderr.strip()[-3_000:])
                print(f"-- FAILED (exit {proc.returncode}) after {elapsed:.1f} s\n", flush=True)
                if title.startswith("generate"):
                    break  # the deployment benchmarks need it
            else:
                print(f"-- {elapsed:.1f} s\n", flush=True)
    print(f"all quick benchmarks: {time.perf_counter() - started:.0f} s" + (f"; failed: {', '.join(failed)}" if failed else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
