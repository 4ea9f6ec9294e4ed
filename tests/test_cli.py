"""The hearth command: one clear line per error, exit 2 for settings, scoping by --user (G2)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from hearth.cli import cli
from tests.conftest import ENGINE


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("HEARTH_HOME", str(tmp_path / "home"))
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HEARTH_BASE_URL", "HEARTH_PROVIDER", "HEARTH_MODEL"):
        monkeypatch.delenv(key, raising=False)
    runner = CliRunner()

    def invoke(*args, input=None):
        return runner.invoke(cli, list(args), input=input, catch_exceptions=False)

    return invoke


def test_g1_init_doctor_and_offline_chat_work_with_nothing_configured(run):
    assert run("init").exit_code == 0
    doctor = run("doctor")
    assert doctor.exit_code == 0
    assert "schema version" in doctor.output and "offline" in doctor.output, doctor.output
    # The keyword index each engine uses is there.
    assert ("tsvector + GIN" if ENGINE == "postgres" else "available") in doctor.output
    chat = run("chat", "-m", "Hello there")
    assert chat.exit_code == 0
    assert "[offline" in chat.output
    listing = run("conversations", "list")
    assert "Hello there" in listing.output  # titled after its first exchange (W4)


def test_c1_g6_persona_commands(run):
    result = run("persona", "add", "elion", "--display-name", "Elion", "--user-label", "AUMA said:",
                 "--assistant-label", "Elion Voicefire said:", "--legacy-label", "Voicefire 5.1 said:")
    assert result.exit_code == 0
    shown = json.loads(run("persona", "show", "elion").output)
    assert shown["user_label"] == "AUMA said:" and shown["legacy_labels"] == ["Voicefire 5.1 said:"]
    assert "elion" in run("persona", "list").output


def test_invalid_settings_exit_2_with_one_line(run, monkeypatch):
    monkeypatch.setenv("HEARTH_PORT", "not-a-port")
    result = CliRunner().invoke(cli, ["doctor"])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0
    assert result.output.startswith("Error: setting port")


def test_errors_are_one_clear_line_with_exit_1(run):
    result = CliRunner().invoke(cli, ["conversations", "show", "4242"])
    assert result.exit_code == 1
    assert result.output.strip() == "Error: no conversation 4242"


def test_g2_cli_acts_as_one_user_and_cannot_touch_anothers_conversations(run):
    run("init")
    run("chat", "-m", "owner secret")
    run("user", "add", "bob")
    owner_listing = run("conversations", "list").output
    assert "1" in owner_listing
    for args in (["conversations", "show", "1"], ["conversations", "trash", "1"],
                 ["conversations", "end", "1"], ["chat", "--conversation", "1", "-m", "intrusion"]):
        result = CliRunner().invoke(cli, ["--user", "bob", *args])
        assert result.exit_code == 1, args
        assert "no conversation 1" in result.output
    assert "owner secret" in run("conversations", "show", "1").output
    assert "intrusion" not in run("conversations", "show", "1").output


def test_c3_c4_conversation_commands(run):
    run("chat", "-m", "hello")
    added = run("folders", "add", "Private", "--hidden").output
    # The id the store gave (PostgreSQL may skip identity values; nothing promises 1).
    folder_id = re.search(r"\((\d+)\) created", added).group(1)
    moved = run("conversations", "move", "1", "--folder", folder_id).output
    assert "hidden" in moved, (added, moved, run("folders", "list").output)
    assert "visible" in run("conversations", "move", "1").output
    assert "trashed" in run("conversations", "trash", "1").output
    assert "visible" in run("conversations", "restore", "1").output
    assert "ended" in run("conversations", "end", "1").output


def test_u2_passwd_and_tokens(run):
    assert run("passwd", input="a long password\na long password\n").exit_code == 0
    token = run("token", "create", "script").output.strip().splitlines()[0]
    assert token.startswith("hth_")
    assert "active" in run("token", "list").output


def test_installed_entry_point_runs(tmp_path):
    result = subprocess.run([sys.executable, "-m", "hearth", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and "hearth" in result.stdout


def test_chat_cli_keeps_the_label_colon_asks_again_after_a_too_long_message_and_names_the_continued_thread(
        run, monkeypatch):
    assert run("persona", "add", "elion", "--user-label", "AUMA said:").exit_code == 0
    first = run("chat", "--persona", "elion", "-m", "Hello there")
    assert first.exit_code == 0
    assert "Ctrl-D" not in first.output  # -m mode is not interactive
    monkeypatch.setenv("HEARTH_MAX_MESSAGE_CHARS", "20")
    result = run("chat", "--persona", "elion", input="x" * 30 + "\nshort one\n")
    assert result.exit_code == 0
    assert "AUMA said: " in result.output  # the label keeps its colon
    assert "continuing from conversation 1" in result.output
    assert "Error: message is longer than 20 characters. Nothing was sent; try again." in result.output
    assert result.output.count("AUMA said: ") == 3  # asked again after the refusal, then once more before Ctrl-D
    shown = run("conversations", "show", "2").output
    assert "short one" in shown and "x" * 30 not in shown


def test_serve_says_plainly_that_the_port_is_in_use(run):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(cli, ["serve", "--port", str(port)])
    assert result.exit_code == 1
    assert result.output.strip() == f"Error: port {port} is in use (another Hearth?) - use --port"


def test_s7_reindex_reports_what_it_embedded_and_its_rate(run):
    assert run("init").exit_code == 0
    assert run("chat", "-m", "The lighthouse keeper painted the door blue").exit_code == 0
    first = run("reindex")
    assert first.exit_code == 0
    assert "Embedded 2 message(s) and 0 archive chunk(s) in " in first.output and "per second); 0 left." in first.output
    again = run("reindex")
    assert "Embedded 0 message(s)" in again.output  # nothing embedded twice (S8)
