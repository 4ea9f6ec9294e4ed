"""Verified backups and restore (S4).

``backup`` copies the live database with SQLite's online backup API, so writers may keep working
while it runs, then proves the copy usable: it opens the copy read-only, runs ``PRAGMA
integrity_check`` and compares every table's row count with counts taken in the very read
snapshot the copy was made from. Only then is a manifest written beside the copy
(``<file>.manifest.json``: format, schema version, sha256, size, counts) and the fact recorded in
``app_state`` under ``backup.last_verified``, which the continuity cleanup asks for (H11).

A backup writes under ``<file>.partial`` and holds an exclusive ``flock`` on that file until it
ends; the kernel drops the lock when the process dies, even by ``kill -9``. So a ``.partial`` that
can be locked belongs to no running backup: the next backup into its folder and ``hearth doctor``
remove it (:func:`sweep`).

``restore`` refuses anything it cannot verify (no or bad manifest, checksum mismatch, failed
integrity check, row counts that differ, a schema newer than this Hearth) and then changes
nothing. Manifests and errors hold counts, sizes and digests, never conversation text.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from hearth.errors import Conflict, SchemaError, StoreError
from hearth.store import Store, files, state, utcnow
from hearth.store.migrations import LATEST_VERSION

MANIFEST_SUFFIX = ".manifest.json"
PARTIAL = ".partial"
# What SQLite may leave beside a partial copy: the rollback journal of the copy, and the WAL files
# of a PostgreSQL backup's Store.
SQLITE_COMPANIONS = ("-journal", "-wal", "-shm")
SQLITE_MAGIC = b"SQLite format 3\x00"
FORMAT = "hearth-backup"
FORMAT_VERSION = 1
STATE_KEY = "backup.last_verified"
FOLDERS_KEY = "backup.folders"  # where backups were started, for `hearth doctor`'s sweep
MAX_FOLDERS = 8


@dataclass(frozen=True)
class BackupReport:
    path: str
    manifest_path: str
    schema_version: int
    sha256: str
    bytes: int
    counts: dict[str, int]
    created_at: str
    removed: list[str] = field(default_factory=list)  # stale files of killed backups, by name

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def manifest_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + MANIFEST_SUFFIX)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _check_copy(path: Path, expected: dict[str, int]) -> int:
    """Integrity and row counts of a copy; returns its schema version. Raises StoreError."""
    result, version, counts = files.check(path)
    if result != ["ok"]:
        raise StoreError(f"{path.name} failed its integrity check ({len(result)} problem(s))")
    if counts != expected:
        differing = sorted(set(counts) ^ set(expected) | {k for k in counts if counts.get(k) != expected.get(k)})
        raise StoreError(f"{path.name} row counts differ from the source in: {', '.join(differing[:10])}")
    return version


# The steps of a backup, in order; ``_checkpoint`` is called after each (a kill test stops there).
STEPS = ("copied", "verified", "synced", "manifest_written", "manifest_placed", "placed", "dir_synced", "recorded")


def _checkpoint(step: str) -> None:
    """After each step of ``backup``: nothing here; tests replace it to kill the process at a step."""


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _partial(path: Path) -> Path:
    return path.with_name(path.name + PARTIAL)


def _lock(path: Path) -> int | None:
    """An open descriptor holding the exclusive lock on ``path``, or None while a backup holds it."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _hold(partial: Path) -> int:
    """Create ``partial`` and lock it for the whole backup: while locked it is in use.

    A sweep may have removed the file between our open and our lock; then the lock is on a file
    no longer at that name, and we make it again. Another backup to the same name holds the lock:
    after a short wait (a sweep holds it only for a moment) that is a Conflict."""
    deadline = time.monotonic() + 2.0
    while True:
        fd = os.open(partial, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() > deadline:
                raise Conflict(f"a backup to {partial.name[:-len(PARTIAL)]} is already running") from None
            time.sleep(0.05)
            continue
        try:
            if os.stat(partial).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def _is_copy(path: Path) -> bool:
    """A backup's partial copy: empty (killed before the first page) or a SQLite file. Anything
    else named ``*.partial`` (another program's download) is never touched."""
    try:
        with path.open("rb") as handle:
            head = handle.read(len(SQLITE_MAGIC))
    except OSError:
        return False
    return head in (b"", SQLITE_MAGIC)


def _unlink(path: Path, removed: list[str]) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        return
    removed.append(path.name)


def sweep(folder: str | Path, own: Path | None = None) -> list[str]:
    """Remove what killed backups left in ``folder`` and return the names removed (S4).

    A ``*.partial`` copy that no running backup holds locked goes, with its SQLite journal files,
    its manifest's ``.partial`` and a manifest placed without its copy; so do journal files and
    manifest ``.partial`` files whose copy is gone. A copy held locked is in use and stays.
    ``own`` is the destination of the backup about to run: its partial goes whatever it holds."""
    folder = Path(folder)
    removed: list[str] = []
    if not folder.is_dir():
        return removed
    for copy in sorted(folder.glob("*" + PARTIAL)):
        if copy.name.endswith(MANIFEST_SUFFIX + PARTIAL) or not copy.is_file():
            continue
        if not (own is not None and copy == _partial(own)) and not _is_copy(copy):
            continue
        fd = _lock(copy)
        if fd is None:
            continue
        try:  # removed while locked, so a backup starting now makes a new file instead
            dest = copy.with_name(copy.name[:-len(PARTIAL)])
            for suffix in SQLITE_COMPANIONS:
                _unlink(copy.with_name(copy.name + suffix), removed)
            _unlink(_partial(manifest_path(dest)), removed)
            if not dest.exists():
                _unlink(manifest_path(dest), removed)
            _unlink(copy, removed)
        finally:
            os.close(fd)
    # Leftovers whose copy is gone (a running backup always has its copy's partial).
    orphans = [*folder.glob("*" + MANIFEST_SUFFIX + PARTIAL),
               *(p for suffix in SQLITE_COMPANIONS for p in folder.glob("*" + PARTIAL + suffix))]
    for orphan in sorted(orphans):
        name = orphan.name
        stem = (name[:-len(MANIFEST_SUFFIX + PARTIAL)] + PARTIAL if name.endswith(MANIFEST_SUFFIX + PARTIAL)
                else name[:name.rindex(PARTIAL) + len(PARTIAL)])
        if not orphan.with_name(stem).exists():
            _unlink(orphan, removed)
    if own is not None and not own.exists() and not _partial(own).exists():
        _unlink(manifest_path(own), removed)  # placed without its copy, by no running backup
    return removed


def remember_folder(store: Store, folder: Path) -> None:
    """Note where a backup starts, so ``hearth doctor`` can sweep there after a killed one."""
    path = str(folder.resolve())
    with store.write() as conn:
        known = [f for f in state.get(conn, FOLDERS_KEY, []) if f != path]
        state.put(conn, FOLDERS_KEY, [path, *known][:MAX_FOLDERS])


def sweep_known(store: Store, home: Path | None = None) -> dict[str, list[str]]:
    """:func:`sweep` every folder a backup was started in (and ``home``'s ``backups`` folder, where
    the web UI writes them): folder -> names removed, for the folders where something was."""
    folders = [Path(f) for f in state.get(store.connection(), FOLDERS_KEY, [])]
    if home is not None and (home / "backups").resolve() not in folders:
        folders.append((home / "backups").resolve())
    result = {}
    for folder in folders:
        removed = sweep(folder)
        if removed:
            result[str(folder)] = removed
    return result


def _copy_rows(store: Store, partial: Path) -> tuple[dict[str, int], int]:
    """The backup of a store with no file to copy (PostgreSQL): every row copied into a new SQLite
    Hearth file from one repeatable-read snapshot (S4, S11), so it verifies, restores and moves
    like any backup."""
    from hearth.ops.migrate_store import copy_store

    target = Store(partial)
    try:
        with store.read():
            version = store.schema_version()
            report = copy_store(store, target)
    except BaseException:
        target.close()
        _remove_sqlite(partial)
        raise
    target.close()
    if not report.ok:
        _remove_sqlite(partial)
        raise StoreError(f"backup failed: {report.problems[0]}")
    return files.seal(partial), version  # self-contained, as the SQLite backup


def _remove_sqlite(path: Path) -> None:
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        leftover.unlink(missing_ok=True)


def backup(store: Store, dest: str | Path) -> BackupReport:
    """Write a consistent, verified copy of the database to ``dest`` (S4).

    The source counts and the copy come from one read transaction on a dedicated connection, so
    they describe the same snapshot even while other threads write.

    ``dest`` appears only whole and verified: the copy is written to ``<dest>.partial`` beside it,
    verified and fsynced, its manifest is written and fsynced, the manifest is renamed into place
    and then the copy, and the folder is fsynced. A kill at any step leaves either no backup at
    ``dest`` (a manifest without its copy is a leftover the next backup removes) or a complete,
    verified one. The partial copy is held locked while the backup runs; first, :func:`sweep`
    removes the unlocked partials that killed backups left in the folder (``report.removed``).
    """
    dest = Path(dest).expanduser()
    dest.parent.mkdir(parents=True, exist_ok=True)
    removed = sweep(dest.parent, own=dest)
    if dest.exists() or manifest_path(dest).exists():
        raise Conflict(f"{dest} already exists; choose a new backup file name")
    remember_folder(store, dest.parent)
    partial = _partial(dest)
    held = _hold(partial)
    try:
        report = _write(store, dest, partial)
    finally:
        os.close(held)  # after the rename the lock is on ``dest``'s file; releasing it changes nothing
    return replace(report, removed=removed)


def _write(store: Store, dest: Path, partial: Path) -> BackupReport:
    """The copy, its verification and its manifest, under the held ``partial``; see :func:`backup`."""
    manifest_partial = _partial(manifest_path(dest))
    # SQLite copies its file with the online backup API; PostgreSQL calls ``_copy_rows``.
    counts, version = store.engine.backup(store, partial, _copy_rows)
    _checkpoint("copied")
    try:
        _check_copy(partial, counts)
    except StoreError:
        partial.unlink(missing_ok=True)
        raise
    _checkpoint("verified")
    _fsync(partial)
    _checkpoint("synced")
    created = utcnow()
    report = BackupReport(path=str(dest.resolve()), manifest_path=str(manifest_path(dest).resolve()),
                          schema_version=version, sha256=_sha256(partial), bytes=partial.stat().st_size,
                          counts=counts, created_at=created)
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "schema_version": version,
                "sha256": report.sha256, "bytes": report.bytes, "counts": counts, "created_at": created}
    with manifest_partial.open("w", encoding="utf-8") as handle:
        handle.write(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    _checkpoint("manifest_written")
    manifest_partial.replace(manifest_path(dest))
    _checkpoint("manifest_placed")
    partial.replace(dest)
    _checkpoint("placed")
    _fsync(dest.parent)
    _checkpoint("dir_synced")
    record_verified(store, report)
    _checkpoint("recorded")
    return report


def record_verified(store: Store, report: BackupReport) -> None:
    """Remember the newest verified backup so maintenance can require one (H11)."""
    value = {"path": report.path, "sha256": report.sha256, "verified_at": utcnow(),
             "schema_version": report.schema_version}
    with store.write() as conn:
        state.put(conn, STATE_KEY, value)


def last_verified(store: Store) -> dict[str, Any] | None:
    return state.get(store.connection(), STATE_KEY)


def _read_manifest(path: Path) -> dict[str, Any]:
    mpath = manifest_path(path)
    try:
        data = json.loads(mpath.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StoreError(f"{path.name} has no manifest ({mpath.name}); it cannot be verified") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(f"the manifest of {path.name} cannot be read: {exc}") from None
    ok = (isinstance(data, dict) and data.get("format") == FORMAT
          and isinstance(data.get("sha256"), str) and isinstance(data.get("schema_version"), int)
          and isinstance(data.get("counts"), dict)
          and all(isinstance(k, str) and isinstance(v, int) for k, v in data["counts"].items()))
    if not ok:
        raise StoreError(f"the manifest of {path.name} is not a Hearth backup manifest")
    if data.get("format_version", 0) > FORMAT_VERSION:
        raise SchemaError(f"{path.name} was written by a newer Hearth; upgrade Hearth to use it")
    return data


def verify_backup(path: str | Path) -> BackupReport:
    """Prove a backup file restorable: manifest, checksum, integrity, row counts, schema version."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise StoreError(f"no backup file at {path}")
    if path.name.endswith(".partial"):
        raise StoreError(f"{path.name} is an unfinished backup; make a new one")
    manifest = _read_manifest(path)
    digest = _sha256(path)
    if digest != manifest["sha256"]:
        raise StoreError(f"{path.name} does not match its manifest checksum; the file was changed or damaged")
    if manifest["schema_version"] > LATEST_VERSION:
        raise SchemaError(
            f"{path.name} is at schema version {manifest['schema_version']}, newer than this Hearth "
            f"knows ({LATEST_VERSION}); upgrade Hearth to restore it")
    version = _check_copy(path, manifest["counts"])
    if version != manifest["schema_version"]:
        raise StoreError(f"{path.name} has schema version {version}, but its manifest says "
                         f"{manifest['schema_version']}")
    return BackupReport(path=str(path.resolve()), manifest_path=str(manifest_path(path).resolve()),
                        schema_version=version, sha256=digest, bytes=path.stat().st_size,
                        counts=dict(manifest["counts"]), created_at=str(manifest.get("created_at", "")))


def restore(path: str | Path, store_path: str | Path) -> BackupReport:
    """Replace the database at ``store_path`` with a verified backup; refuse anything unverifiable.

    Verification happens first, so a refused file changes nothing. The copy then goes through the
    backup API into the target, which takes the target's locks like any writer: stop the server
    before restoring so no open connection keeps working on the replaced data. An older schema is
    fine: the next open migrates it forward (S1).
    """
    report = verify_backup(path)
    target_path = Path(store_path).expanduser()
    target_path.parent.mkdir(parents=True, exist_ok=True)
    restored, check = files.restore_file(Path(path).expanduser(), target_path)
    if check != ["ok"] or restored != report.counts:
        raise StoreError("the restored database does not match the backup; restore it again from the file")
    return report


def restore_postgres(path: str | Path, store: Store) -> BackupReport:
    """Replace a PostgreSQL deployment's rows with a verified backup, in one transaction (S4, S11).

    The file is verified first, so a refused file changes nothing. It is then copied to a
    temporary file (opening a backup would change its bytes), migrated forward if older, and its
    rows replace every row of ``store`` inside one write transaction: the tables are emptied and
    refilled, the copy is checked row count by row count and with the ledger check, and any
    failure rolls all of it back. Stop the servers and workers before restoring.
    """
    import shutil
    import tempfile

    from hearth.ops.migrate_store import copy_store
    from hearth.store import catalog

    report = verify_backup(path)
    with tempfile.TemporaryDirectory(prefix="hearth-restore-") as folder:
        work = Path(folder) / "restore.db"
        shutil.copyfile(Path(path).expanduser(), work)
        source = Store(work)
        try:
            with store.write() as conn:
                store.engine.empty_tables(conn, [t for t in catalog.tables(conn) if t != "schema_migrations"])
                copied = copy_store(source, store)
                if not copied.ok:
                    raise StoreError(f"the restored database does not match the backup: {copied.problems[0]}")
        finally:
            source.close()
    return report


def restore_deployment(path: str | Path, settings: Any) -> BackupReport:
    """Restore a verified backup into the deployment ``settings`` name: its PostgreSQL database
    (``HEARTH_DATABASE_URL``) or its SQLite file."""
    if settings.database_url:
        from hearth.store import open_store

        store = open_store(settings.database_url, settings.database_path)
        try:
            return restore_postgres(path, store)
        finally:
            store.close()
    return restore(path, settings.database_path)
