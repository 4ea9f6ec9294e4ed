"""kill -9 during a backup, at every step (S4): the destination is visible only whole and verified.

Each trial runs ``backup`` in a real subprocess that is killed with SIGKILL, either at a named
step (the subprocess replaces ``hearth.ops.backup._checkpoint`` with a function that kills itself
there) or at a moment while the copy is being written. Afterwards the live database is intact,
the destination is either absent or a complete verified backup that restores, and a new backup
to the same name works (or, over a complete one, is refused as existing).
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hearth import Conflict, StoreError
from hearth.ops.backup import STEPS, backup, manifest_path, restore, verify_backup

KILL_AT_STEP = """
import os, signal, sys
from hearth.ops import backup as b
from hearth.store import Store

def checkpoint(name):
    if name == sys.argv[3]:
        os.kill(os.getpid(), signal.SIGKILL)

b._checkpoint = checkpoint
b.backup(Store(sys.argv[1]), sys.argv[2])
"""

RUN = """
import sys
from hearth.ops import backup as b
from hearth.store import Store
b.backup(Store(sys.argv[1]), sys.argv[2])
"""


@pytest.fixture
def deployment(settings, persona, me):
    conversation = me.conversations.create(persona.id, title="Morning")
    for i in range(300):
        me.conversations.add_message(conversation.id, "user" if i % 2 == 0 else "assistant", f"turn {i} " + "x" * 400)
    me.memories.add("Fleur is at home")
    return settings.database_path


def check_after_kill(db: Path, dest: Path, tmp_path: Path) -> str:
    """The guarantees after a kill; returns "complete" or "absent"."""
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    if dest.exists():
        report = verify_backup(dest)  # a visible destination is whole and verified
        restored = tmp_path / f"restored-{dest.stem}.db"
        assert restore(dest, restored).counts == report.counts
        with pytest.raises(Conflict):
            backup_in_process(db, dest)
        return "complete"
    with pytest.raises(StoreError, match="no backup file"):
        verify_backup(dest)
    backup_in_process(db, dest)  # leftovers (temp files, a manifest without its copy) do not block it
    assert verify_backup(dest).counts
    return "absent"


def backup_in_process(db: Path, dest: Path) -> None:
    from hearth.store import Store

    store = Store(db)
    try:
        backup(store, dest)
    finally:
        store.close()


def test_s4_backup_killed_at_every_step_leaves_the_old_state_or_a_complete_verified_backup(
        deployment, hearth, tmp_path):
    hearth.close()
    outcomes = {}
    for step in STEPS:
        dest = tmp_path / f"at-{step}.db"
        proc = subprocess.run([sys.executable, "-c", KILL_AT_STEP, str(deployment), str(dest), step],
                              capture_output=True, timeout=120)
        assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
        outcomes[step] = check_after_kill(deployment, dest, tmp_path)
    # Before the copy is renamed into place there is no backup; from then on a complete one.
    first_visible = STEPS.index("placed")
    assert [outcomes[s] for s in STEPS] == ["absent"] * first_visible + ["complete"] * (len(STEPS) - first_visible)


def test_s4_backup_killed_at_random_moments_while_copying_never_leaves_a_broken_destination(
        deployment, hearth, tmp_path):
    hearth.close()
    rng = random.Random(11)
    seen = set()
    for trial in range(6):
        dest = tmp_path / f"random-{trial}.db"
        proc = subprocess.Popen([sys.executable, "-c", RUN, str(deployment), str(dest)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        partial = dest.with_name(dest.name + ".partial")
        while not (partial.exists() or dest.exists()) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(rng.uniform(0, 0.05))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        seen.add(check_after_kill(deployment, dest, tmp_path))
        assert not manifest_path(dest).with_name(manifest_path(dest).name + ".partial").exists()
    assert seen  # every trial met the guarantees above


def test_s4_verify_refuses_an_unfinished_partial_file(deployment, hearth, tmp_path):
    report = backup(hearth.store, tmp_path / "ok.db")
    partial = tmp_path / "ok.db.partial"
    partial.write_bytes(Path(report.path).read_bytes())
    with pytest.raises(StoreError, match="unfinished"):
        verify_backup(partial)


def test_s4_the_next_backup_removes_and_reports_what_a_killed_backup_left_but_not_what_is_in_use(
        deployment, hearth, tmp_path):
    """A backup killed mid-way leaves its ``.partial`` copy (and, later on, its manifest's). The next
    backup into the same folder, to any name, removes those, since no running backup holds them
    locked, and reports them; a partial a running backup holds, and another program's ``.partial``,
    stay."""
    import fcntl
    import os

    hearth.close()
    folder = tmp_path / "backups"
    dest = folder / "killed.db"
    proc = subprocess.run([sys.executable, "-c", KILL_AT_STEP, str(deployment), str(dest), "manifest_written"],
                          capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    left = sorted(p.name for p in folder.iterdir())
    assert left == ["killed.db.manifest.json.partial", "killed.db.partial"], left
    foreign = folder / "film.mkv.partial"
    foreign.write_bytes(b"another program's download")
    busy = folder / "running.db.partial"
    busy.write_bytes((folder / "killed.db.partial").read_bytes())
    fd = os.open(busy, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # what a running backup holds on its partial copy
    try:
        from hearth.store import Store

        store = Store(deployment)
        try:
            report = backup(store, folder / "next.db")
        finally:
            store.close()
        assert sorted(report.removed) == left
        assert sorted(p.name for p in folder.iterdir()) == [
            "film.mkv.partial", "next.db", "next.db.manifest.json", "running.db.partial"]
        with pytest.raises(Conflict, match="already running"):  # the held name is not taken over
            backup_in_process(deployment, folder / "running.db")
        assert busy.exists()
    finally:
        os.close(fd)
    backup_in_process(deployment, folder / "running.db")  # once released, it is stale: replaced
    assert verify_backup(folder / "running.db").counts and not busy.exists()
