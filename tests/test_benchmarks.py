"""Every benchmark script still runs, at a small size.

CI does not run the benchmarks for their figures, so a change to the library the scripts call
(a renamed attribute, a new check on the send path) could otherwise break `make bench` unnoticed,
as it once did for three of them. Each runs here as its own process, as `run_quick.py` starts it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

SMALL = {
    "memory_edits": ["--conversations", "40", "--memories", "5", "--sent", "5"],
    "ingest": ["--messages", "300", "--embed-messages", "0", "--json"],
    "timeline": ["--events", "2000", "--pages", "3", "--repeat", "1", "--sends", "3", "--json"],
    "doctor": ["--events", "2000", "--runs", "1"],
    "forgetting": ["--prompts", "10"],
    "memory_move": ["--memories", "30", "--conversations", "5", "--sent", "3", "--moves", "2"],
    "duplicates": ["--no-embedder"],
    "send_path": ["--sizes", "200", "--sends", "3", "--json"],
    "startup": ["--repeats", "1"],
    "hostile": ["--size", "300", "--json"],
    "regex_keys": ["--sizes", "200", "--repeats", "1"],
    "remembered": ["--memories", "300", "--repeat", "5", "--json"],
}


def _run(script: str, *args: str, cwd: Path) -> str:
    done = subprocess.run([sys.executable, str(BENCHMARKS / f"{script}.py"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip()
    return done.stdout


@pytest.mark.sqlite_only
@pytest.mark.parametrize("script", sorted(SMALL))
def test_benchmark_script_runs_at_a_small_size_sqlite(script, tmp_path):
    out = _run(script, *SMALL[script], cwd=tmp_path)
    if "--json" in SMALL[script]:
        assert isinstance(json.loads(out), dict)


@pytest.mark.sqlite_only
def test_benchmark_deployment_and_its_send_path_run_at_a_small_size_sqlite(tmp_path):
    home = tmp_path / "deployment"
    _run("generate", "--messages", "1000", "--conversations", "40", "--active", "200", "--fragments", "20",
         "--memories", "10", "--documents", "5", "--seed", "3", "--home", str(home), cwd=tmp_path)
    assert (home / "bench.json").is_file()
    result = json.loads(_run("send_path", "--deployment", str(home), "--per-class", "2", "--pace", "worker",
                             "--json", cwd=tmp_path))
    assert isinstance(result, dict)
    _run("ingest", "--messages", "200", "--embed-messages", "10", "--deployment", str(home), "--json", cwd=tmp_path)
