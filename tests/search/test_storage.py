"""Storage URLs: default path, bad URLs, SQLite setup."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dse.errors import InputError
from dse.search.storage import URL_RULE, default_storage_url, open_storage


def test_default_storage_url():
    url = default_storage_url(Path("results/llama70b"), "hw")
    assert url == "sqlite:///results/llama70b/hw.db"
    assert default_storage_url(Path("/abs/dir"), "s-1.b") == "sqlite:////abs/dir/s-1.b.db"
    with pytest.raises(InputError):
        default_storage_url(Path("r"), "../escape")


@pytest.mark.parametrize("url", ["", "not a url", "results/x.db", "nosuchdb://host/db",
                                 "sqlite:/"])
def test_bad_storage_url_raises_input_error(url):
    with pytest.raises(InputError) as e:
        open_storage(url)
    assert e.value.where == "--storage"
    assert e.value.rule in (URL_RULE,) or e.value.rule.startswith("could not be opened")


def test_bad_url_message_names_the_rule():
    with pytest.raises(InputError, match="must be a SQLAlchemy URL such as sqlite:///path.db"):
        open_storage("not a url")


def test_unreachable_database_raises_input_error_without_password():
    with pytest.raises(InputError) as e:
        open_storage("postgresql+psycopg2://u:secret@127.0.0.1:1/db")
    assert "secret" not in str(e.value) and "could not be opened" in str(e.value)


def test_sqlite_storage_is_created_in_wal_mode(tmp_path):
    path = tmp_path / "new" / "dir" / "s.db"
    storage = open_storage(f"sqlite:///{path}", heartbeat_interval_s=3)
    assert storage.heartbeat_interval == 3 and storage.grace_period == 7
    with sqlite3.connect(path) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_in_memory_sqlite_has_no_heartbeat():
    assert open_storage("sqlite:///:memory:").heartbeat_interval is None
