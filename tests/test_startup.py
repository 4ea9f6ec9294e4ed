"""Short-lived commands start fast (S20): the query graph is derived once per model file and kept
in the user's cache folder, and ``hearth --help`` imports none of the layers.

Timings are in ``benchmarks/startup.py`` (ratios to a bare interpreter in the same run); these tests
check what makes them: which process derives, and which modules a command imports.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import pkgutil
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from hearth import Settings
from hearth.errors import ConfigError
from hearth.retrieval import embedder as emb
from hearth.retrieval import query_graph

ROOT = Path(__file__).resolve().parent.parent
# One process of a short-lived command: the embedder's query vector, and what it did for its graph.
CHILD = """
import sys
from hearth.retrieval import query_graph
from hearth.retrieval.embedder import LocalEmbedder
vector = LocalEmbedder(cache_dir=sys.argv[1]).embed_queries(["where did we go in May?"])[0]
counts = query_graph.Counts
print(counts.derived, counts.from_cache, counts.rejected, counts.hashed, " ".join(f"{x:.6f}" for x in vector[:8]))
"""


def run_child(cache: Path) -> tuple[tuple[int, int, int], int, list[float]]:
    """(derived, read from the cache, rejected), files hashed, and the start of the query's vector."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, "-c", CHILD, str(cache)], capture_output=True, text=True, env=env,
                         timeout=600, check=True).stdout.split()
    return (int(out[0]), int(out[1]), int(out[2])), int(out[3]), [float(x) for x in out[4:]]


def settle(path: Path) -> None:
    """Wait until ``path``'s times are old enough for its digest to be remembered by them."""
    stat = path.stat()
    time.sleep(max(0.0, query_graph.SETTLED_S + 0.05 - (time.time_ns() - stat.st_ctime_ns) / 1e9))


@pytest.fixture(scope="module")
def model_file() -> Path:
    try:
        emb.package_file(emb.TOKENIZER_PACKAGE, emb.TOKENIZER_FILE, emb.TOKENIZER_DISTRIBUTION)
        return emb.package_file(emb.MODEL_PACKAGE, emb.MODEL_FILE, emb.MODEL_DISTRIBUTION)
    except ConfigError as exc:
        pytest.skip(f"embedding model packages not installed: {exc}")


@pytest.fixture(scope="module")
def graph_cache(model_file, tmp_path_factory) -> tuple[Path, tuple[int, int, int], int, list[float]]:
    """A cache folder where a first process derived the query graph (once for the module's tests)."""
    cache = tmp_path_factory.mktemp("graph") / "cache"
    return (cache, *run_child(cache))


def test_s20_a_second_process_finds_the_cached_query_graph_and_does_not_derive_it(graph_cache):
    cache, first, hashed, vector = graph_cache
    assert first == (1, 0, 0)  # derived in a child process, then kept
    assert hashed == 2  # the model file and the tokenizer, checked against their SHA-256
    [kept] = list(cache.glob("query-graph-*"))  # one file, no temporary left beside it
    assert kept == query_graph.cache_path(cache, emb.MODEL_SHA256) and emb.MODEL_SHA256 in kept.name
    assert sorted(p.name for p in cache.iterdir()) == sorted([kept.name, query_graph.DIGESTS_FILE])

    settle(kept)
    second, hashed, again = run_child(cache)
    assert second == (0, 1, 0)  # read from the cache: no child process started
    assert again == vector
    assert hashed <= 1  # at most the graph, checked against its digest once; the model files not again
    third, hashed, again = run_child(cache)
    assert third == (0, 1, 0) and hashed == 0 and again == vector  # nothing read twice to learn its digest

    # A damaged cache file does not match its digest: it is derived again and replaced. Its
    # modification time put back, it is still not trusted by identity (its change time moved).
    before = kept.stat()
    data = bytearray(kept.read_bytes())
    data[len(data) // 2] ^= 0xFF
    kept.write_bytes(bytes(data))
    os.utime(kept, ns=(before.st_atime_ns, before.st_mtime_ns))
    fourth, _, rebuilt = run_child(cache)
    assert fourth == (1, 0, 1) and rebuilt == vector
    assert query_graph.read_cached(kept) is not None


def test_s20_a_changed_model_file_is_hashed_again_and_its_graph_derived_again(tmp_path, monkeypatch):
    derived: list[str] = []

    def derive(model_path: Path) -> bytes:  # the child process's work, as its stand-in
        derived.append(model_path.read_text())
        return b"graph of " + model_path.read_bytes()

    monkeypatch.setattr(query_graph, "derived_bytes", derive)
    monkeypatch.setattr(query_graph, "SETTLED_S", 0.0)  # files written here are remembered at once
    monkeypatch.setattr(query_graph.Counts, "hashed", 0)
    cache, model = tmp_path / "cache", tmp_path / "model.onnx"
    model.write_text("first model")

    first = query_graph.file_sha256(model, cache)
    assert first == hashlib.sha256(b"first model").hexdigest() and query_graph.Counts.hashed == 1
    assert query_graph.graph_bytes(model, first, cache) == b"graph of first model"
    assert query_graph.file_sha256(model, cache) == first and query_graph.Counts.hashed == 1  # remembered
    assert query_graph.graph_bytes(model, first, cache) == b"graph of first model"  # from the cache
    assert query_graph.graph_bytes(model, first, cache) == b"graph of first model"
    assert derived == ["first model"] and query_graph.Counts.hashed == 2  # the graph's digest checked once

    model.write_text("second model!")  # another model file (a reinstall, an upgrade)
    second = query_graph.file_sha256(model, cache)
    assert second == hashlib.sha256(b"second model!").hexdigest() and query_graph.Counts.hashed == 3
    assert query_graph.graph_bytes(model, second, cache) == b"graph of second model!"
    assert derived == ["first model", "second model!"]  # derived again, under its own digest

    # Changed in place, same size, modification time put back: the change time still tells.
    before = model.stat()
    time.sleep(0.05)
    model.write_text("third model!!")
    os.utime(model, ns=(before.st_atime_ns, before.st_mtime_ns))
    third = query_graph.file_sha256(model, cache)
    assert third == hashlib.sha256(b"third model!!").hexdigest() and query_graph.Counts.hashed == 4
    assert query_graph.graph_bytes(model, third, cache) == b"graph of third model!!"
    assert len(derived) == 3
    assert len(list(cache.glob("query-graph-*"))) == 3

    # Without a cache folder every start hashes.
    query_graph.file_sha256(model, None)
    query_graph.file_sha256(model, None)
    assert query_graph.Counts.hashed == 6


def test_s20_the_cache_file_holds_the_graphs_digest_and_is_replaced_whole(tmp_path):
    path = tmp_path / "c" / "query-graph-x.onnx"
    assert query_graph.read_cached(path) is None
    assert query_graph.write_cached(path, b"graph bytes")
    data = path.read_bytes()
    assert data.startswith(query_graph.CACHE_MAGIC)
    assert hashlib.sha256(b"graph bytes").hexdigest().encode() in data
    assert query_graph.read_cached(path) == b"graph bytes"
    assert query_graph.write_cached(path, b"another graph")
    assert query_graph.read_cached(path) == b"another graph"
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    path.write_bytes(data.replace(b"graph bytes", b"graph bytez"))
    assert query_graph.read_cached(path) is None
    path.write_bytes(data[:-3])  # cut short, as by a full disk
    assert query_graph.read_cached(path) is None
    blocked = tmp_path / "a-file"
    blocked.write_bytes(b"")
    assert not query_graph.write_cached(blocked / "sub" / "g.onnx", b"graph")  # a warning, not an error


def test_s20_the_cache_folder_is_the_platforms_unless_a_setting_names_one(tmp_path):
    home = str(tmp_path / "home")
    xdg = Settings.resolve({"home": home}, environ={"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    chosen = Settings.resolve({"home": home}, environ={"HEARTH_CACHE_DIR": str(tmp_path / "mine")})
    if sys.platform.startswith("linux"):
        assert xdg.cache_path == tmp_path / "xdg" / "hearth"
        relative = Settings.resolve({"home": home}, environ={"XDG_CACHE_HOME": "relative"})
        assert relative.cache_path == Path.home() / ".cache" / "hearth"
    assert chosen.cache_path == tmp_path / "mine"
    assert emb.embedder_from_settings(chosen).cache_dir is not None


# ``python -m hearth ARGS`` that writes, on its way out, every module it imported (``-X importtime``
# misses those imported by ``importlib.import_module``, as the lazy command group does).
MODULES_CHILD = """
import atexit, runpy, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write("\\n".join(sorted(sys.modules))))
sys.argv = ["hearth", *sys.argv[2:]]
runpy.run_module("hearth", run_name="__main__")
"""


def imported_modules(tmp_path: Path, *argv: str, env: dict[str, str] | None = None) -> tuple[set[str], str]:
    """The modules a ``hearth`` process imported, and what it printed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})}
    out = tmp_path / "modules.txt"
    child = subprocess.run([sys.executable, "-c", MODULES_CHILD, str(out), *argv], capture_output=True,
                           text=True, env=env, timeout=300)
    assert child.returncode == 0, child.stderr
    return set(out.read_text().split()), child.stdout


def test_s20_hearth_help_imports_none_of_the_layers_and_no_command_module(tmp_path):
    imported, out = imported_modules(tmp_path, "--help")
    assert "search" in out and "serve" in out
    heavy = {"numpy", "hearth.scope", "hearth.store", "hearth.retrieval", "hearth.providers", "hearth.settings",
             "rich", "onnxruntime", "fastapi", "pydantic", "httpx", "json"}
    assert imported & heavy == set()
    # The command list is read from hearth.cli.commands: no module that defines a command is imported.
    modules = {f"hearth.cli.{m.name}" for m in pkgutil.iter_modules([str(ROOT / "src" / "hearth" / "cli")])}
    assert imported & modules == {"hearth.cli.base", "hearth.cli.commands"}


def test_s20_a_command_imports_only_its_own_modules(tmp_path):
    imported, out = imported_modules(tmp_path, "search-log", "--help")
    assert "--origin" in out
    assert {m for m in imported if m.startswith("hearth.cli.")} == {"hearth.cli.base", "hearth.cli.commands",
                                                                   "hearth.cli.recall"}
    imported, out = imported_modules(tmp_path, "persona", "--help")  # defined in threads.py, extended by two more
    assert "export-card" in out and "history" in out
    assert {"hearth.cli.threads", "hearth.cli.imports", "hearth.cli.versions"} <= imported
    assert "hearth.cli.recall" not in imported


def test_s20_the_lazy_command_list_is_every_command_with_its_short_help():
    from hearth.cli import base
    from hearth.cli.commands import COMMANDS

    for _, name, _ in pkgutil.iter_modules([str(ROOT / "src" / "hearth" / "cli")]):
        importlib.import_module(f"hearth.cli.{name}")  # every command registered, as before S20
    real = base.cli.commands
    assert set(COMMANDS) == set(real)

    def modules(command: click.Command) -> set[str]:
        found = {command.callback.__module__.rsplit(".", 1)[1]} if command.callback else set()
        for sub in getattr(command, "commands", {}).values():
            found |= modules(sub)
        return found

    for name, (listed, short) in COMMANDS.items():
        command = real[name]
        assert command.callback is not None and listed[0] == command.callback.__module__.rsplit(".", 1)[1]
        # Every module that adds a subcommand to this group is imported with it.
        assert modules(command) <= set(listed), name
        assert not command.hidden and not command.deprecated and not command.short_help
        for limit in (20, 45, 61, 100, 1000):
            assert click.Command(name, help=short).get_short_help_str(limit) == command.get_short_help_str(limit)

    # The listing is click's own, with every command loaded, at any width.
    for width in (60, 80, 200):
        ctx = click.Context(base.cli, terminal_width=width)
        lazy, full = click.HelpFormatter(width=width), click.HelpFormatter(width=width)
        base.cli.format_commands(ctx, lazy)
        click.Group.format_commands(base.cli, ctx, full)
        assert lazy.getvalue() == full.getvalue() and "search-log" in lazy.getvalue()


def test_s20_a_mistyped_command_still_gets_a_suggestion():
    from click.testing import CliRunner

    from hearth.cli import cli

    result = CliRunner().invoke(cli, ["serach"])
    assert result.exit_code == 2 and "Did you mean" in result.output and "search" in result.output


HEAVY_FOR_SEARCH = {"onnxruntime", "tokenizers", "numpy", "hearth.scope", "hearth.wiring", "hearth.outreach",
                    "hearth.continuity.timeline", "hearth.memory.helpers", "hearth.thread.send", "fastapi"}


def make_home(home: Path, text: str) -> None:
    from hearth import Hearth

    with Hearth(Settings.resolve({"home": str(home), "provider": "offline"})) as hearth:
        me = hearth.scope()
        chat = me.conversations.create()
        me.send(chat.id, text)


def test_s20_hearth_search_with_no_vectors_loads_no_model_and_no_layer(tmp_path):
    env = {"HEARTH_CACHE_DIR": str(tmp_path / "cache")}
    # The home goes by HEARTH_HOME, as a shell would set it (the PostgreSQL lane names its database).
    imported, out = imported_modules(tmp_path, "search", "where did we go in May",
                                     env={**env, "HEARTH_HOME": str(tmp_path / "empty")})
    assert "0 result(s)" in out
    assert imported & HEAVY_FOR_SEARCH == set()
    assert not (tmp_path / "cache").exists()  # no model file hashed, no graph read

    # Messages but no vectors yet (before ``hearth reindex``): keyword results, still no model.
    make_home(tmp_path / "home", "We took the night train to Lisbon in May")
    imported, out = imported_modules(tmp_path, "search", "--json", "Lisbon",
                                     env={**env, "HEARTH_HOME": str(tmp_path / "home")})
    results = json.loads(out)["results"]
    assert results and all(r["scores"]["signals"] == ["keyword"] for r in results)
    assert imported & HEAVY_FOR_SEARCH == set()


def test_s20_hearth_search_with_vectors_embeds_its_query_from_the_cached_graph(graph_cache, tmp_path):
    from hearth import Hearth
    from hearth.retrieval.semantic import embed_pending

    cache = graph_cache[0]
    home = tmp_path / "home"
    make_home(home, "We took the night train to Lisbon in May")
    with Hearth(Settings.resolve({"home": str(home)})) as hearth:
        report = embed_pending(hearth.store, emb.LocalEmbedder(cache_dir=cache))
    assert report.messages >= 1
    imported, out = imported_modules(tmp_path, "search", "--json", "a rail journey to Portugal",
                                     env={"HEARTH_CACHE_DIR": str(cache), "HEARTH_HOME": str(home)})
    results = json.loads(out)["results"]
    assert any("vector" in r["scores"]["signals"] for r in results)  # found by meaning, no shared word
    assert "onnxruntime" in imported and "onnx" not in imported  # the cached graph: nothing derived
    assert imported & {"hearth.scope", "hearth.wiring", "hearth.outreach"} == set()


HELP_CHILD = """
import sys
from hearth.cli import base
if sys.argv[1] == "click":  # click measures the terminal itself (with shutil)
    base.cli(["--help"], prog_name="hearth")
else:
    sys.argv = ["hearth", "--help"]
    base.main()
"""


@pytest.mark.parametrize("columns", ["", "40", "60", "79", "100", "250", "x"])
def test_s20_hearth_help_is_as_wide_as_click_would_make_it(columns):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": columns}
    outs = [subprocess.run([sys.executable, "-c", HELP_CHILD, way], capture_output=True, text=True, env=env,
                           timeout=120, check=True).stdout for way in ("click", "hearth")]
    assert outs[0] == outs[1] and "search-log" in outs[0]


@pytest.mark.parametrize("columns", [50, 72, 120])
def test_s20_hearth_help_on_a_terminal_is_as_wide_as_click_would_make_it(columns):
    import fcntl
    import pty
    import struct
    import termios

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = str(ROOT / "src")

    def on_terminal(way: str) -> bytes:
        master, replica = pty.openpty()
        fcntl.ioctl(replica, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
        child = subprocess.Popen([sys.executable, "-c", HELP_CHILD, way], stdout=replica, env=env)
        os.close(replica)
        out = b""
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # the child closed its end
                break
            if not data:
                break
            out += data
        os.close(master)
        assert child.wait(timeout=120) == 0
        return out

    ours, clicks = on_terminal("hearth"), on_terminal("click")
    assert ours == clicks and b"search-log" in ours


def test_s20_hearth_search_acts_as_the_user_it_names_and_no_other(tmp_path):
    from click.testing import CliRunner

    from hearth import Hearth
    from hearth.cli import cli

    home = str(tmp_path / "home")
    with Hearth(Settings.resolve({"home": home, "provider": "offline"})) as hearth:
        owner = hearth.scope()
        owner.send(owner.conversations.create().id, "The owner planted sweet peas by the gate")
        robin = hearth.scope(hearth.users.create("robin").id)
        robin.send(robin.conversations.create().id, "Robin planted sweet peas on the balcony")

    def found(*args: str) -> list[str]:
        result = CliRunner().invoke(cli, ["--home", home, *args, "search", "sweet peas", "--json", "--no-archive"])
        assert result.exit_code == 0, result.output
        return [r["text"] for r in json.loads(result.output)["results"]]

    assert found() and all("gate" in text for text in found() if "sweet peas" in text)
    assert not any("balcony" in text for text in found())
    assert any("balcony" in text for text in found("--user", "robin"))
    assert not any("gate" in text for text in found("--user", "robin"))
    unknown = CliRunner().invoke(cli, ["--home", home, "--user", "nobody", "search", "peas"])
    assert unknown.exit_code == 1 and "no user named 'nobody'" in unknown.output


@pytest.mark.sqlite_only
def test_s20_sqlite_a_short_lived_search_maps_a_current_saved_graph_and_starts_no_build(hearth, me, persona, monkeypatch):
    """``hearth search`` runs one search and exits: a build started then (above 100,000 vectors it
    runs in a thread) was cut off at exit, aborting the process. A short-lived process maps a saved
    graph that holds exactly the table's vectors, loads one that is behind, and builds none."""
    import threading

    import numpy as np

    from hearth import retrieval
    from hearth.retrieval import semantic
    from hearth.retrieval.semantic import ANN, EXACT_FALLBACK
    from tests.test_vector_index_changes import DIM, MODEL, _add, _cache, _search

    def one_search_process():
        cache = _cache()
        monkeypatch.setattr(semantic, "INDEXES", cache)
        return cache

    semantic.forget_queries()
    conversation = me.conversations.create(persona.id)
    ids = _add(hearth, me, conversation.id, np.random.default_rng(20), 1_000)
    monkeypatch.setattr(retrieval, "short_lived", True)  # as `hearth search` sets it

    once = one_search_process()  # nothing saved yet
    hits, mode = _search(hearth, me, ids[500])
    assert mode == EXACT_FALLBACK and hits[0][0] == ids[500]
    assert once.counts.builds == 0 and not once._building
    assert not [t for t in threading.enumerate() if t.name.startswith("hearth-vectors")]

    server = _cache()  # `hearth serve` (or `hearth reindex`) builds the graph and saves it
    with monkeypatch.context() as serving:
        serving.setattr(retrieval, "short_lived", False)
        assert server.get(hearth.store.connection(), str(hearth.store.path), "messages", me.user_id, MODEL,
                          DIM).mode == "ann"
    once = one_search_process()
    hits, mode = _search(hearth, me, ids[500])
    assert mode == ANN and hits[0][0] == ids[500] and hits[0][1] > 0.99
    assert (once.counts.views, once.counts.loads, once.counts.builds) == (1, 1, 0)
    index = once.get(hearth.store.connection(), str(hearth.store.path), "messages", me.user_id, MODEL, DIM)
    assert index.viewed

    [added] = _add(hearth, me, conversation.id, np.random.default_rng(21), 1)  # the file is behind now
    hits, mode = _search(hearth, me, added)  # the mapped graph cannot take it: loaded whole, caught up
    assert mode == ANN and hits[0][0] == added
    assert (once.counts.views, once.counts.loads, once.counts.builds) == (1, 2, 0)
    assert not once.get(hearth.store.connection(), str(hearth.store.path), "messages", me.user_id, MODEL,
                        DIM).viewed
