"""Settings resolution: flags > HEARTH_* env > config file > defaults; invalid values fail clearly."""

from __future__ import annotations

import logging

import pytest

from hearth import ConfigError, Settings


def test_settings_precedence_flag_env_file_default(tmp_path):
    (tmp_path / "config.toml").write_text('[hearth]\nport = 9000\nmodel = "from-file"\nhost = "127.0.0.2"\n')
    env = {"HEARTH_HOME": str(tmp_path), "HEARTH_PORT": "9100", "HEARTH_MODEL": "from-env"}
    settings = Settings.resolve({"port": 9200}, environ=env)
    assert settings.port == 9200  # flag
    assert settings.model == "from-env"  # env over file
    assert settings.host == "127.0.0.2"  # file over default
    assert settings.database_path == tmp_path / "hearth.db"


def test_settings_default_home_is_the_xdg_data_folder():
    assert str(Settings.resolve(environ={}).home).endswith(".local/share/hearth")


@pytest.mark.parametrize("env", [{"HEARTH_PORT": "eighty"}, {"HEARTH_PORT": "70000"},
                                 {"HEARTH_PROVIDER": "carrier-pigeon"}, {"HEARTH_MAX_BODY_BYTES": "0"}])
def test_invalid_settings_raise_one_clear_error(tmp_path, env):
    with pytest.raises(ConfigError):
        Settings.resolve(environ={"HEARTH_HOME": str(tmp_path), **env})


def test_broken_config_file_is_a_clear_error(tmp_path):
    (tmp_path / "config.toml").write_text("port = [unclosed")
    with pytest.raises(ConfigError, match="config file"):
        Settings.resolve(environ={"HEARTH_HOME": str(tmp_path)})


def test_h2_invalid_seed_limits_fall_back_with_a_warning(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    settings = Settings.resolve(environ={"HEARTH_HOME": str(tmp_path),
                                         "HANDOFF_PER_MESSAGE_CHARACTER_LIMIT": "lots",
                                         "HANDOFF_TOTAL_CHARACTER_BUDGET": "-5",
                                         "TIMELINE_HISTORY_EVENT_LIMIT": "250"})
    assert settings.handoff_per_message_limit == 20_000
    assert settings.handoff_total_budget == 60_000
    assert settings.timeline_history_event_limit == 250
    assert "HANDOFF_PER_MESSAGE_CHARACTER_LIMIT" in caplog.text


def test_s7_embedder_is_chosen_by_settings(tmp_path):
    from hearth import Hearth
    from hearth.retrieval.embedder import LocalEmbedder, OpenAIEmbedder

    local = Hearth(Settings.resolve({"home": str(tmp_path / "a")}, environ={}))
    assert isinstance(local.embedder, LocalEmbedder)
    remote = Hearth(Settings.resolve({"home": str(tmp_path / "b")}, environ={
        "HEARTH_EMBEDDER": "openai", "HEARTH_EMBEDDING_MODEL": "text-embedding-3-large",
        "OPENAI_API_KEY": "sk-test"}))
    assert isinstance(remote.embedder, OpenAIEmbedder) and remote.embedder.dim == 3072
    with pytest.raises(ConfigError, match="embedder"):
        Settings.resolve(environ={"HEARTH_HOME": str(tmp_path), "HEARTH_EMBEDDER": "word2vec"})
