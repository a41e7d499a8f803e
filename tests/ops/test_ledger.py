"""The ledger contract on both backends: SQLite (default) and PostgreSQL (a real server)."""

from __future__ import annotations

import pytest

from dpdist.exceptions import InfrastructureError, ValidationError
from dpdist.ops.ledger import canonical_dataset, open_ledger, redact_url, resolve_ledger_url
from tests.ops.conftest import free_port
from tests.ops.ledger_contract import LedgerContract


class TestSQLiteLedger(LedgerContract):
    @pytest.fixture
    def ledger_url(self, tmp_path):
        return str(tmp_path / "ledger.sqlite")

    def test_wal_journal(self, ledger):
        assert ledger._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"

    def test_sqlite_url_form(self, tmp_path):
        with open_ledger(f"sqlite:///{tmp_path}/l.sqlite") as led:
            assert led.url == f"{tmp_path}/l.sqlite"

    def test_missing_directory_is_a_validation_error(self, tmp_path):
        with pytest.raises(ValidationError, match="does not exist"):
            open_ledger(str(tmp_path / "nope" / "l.sqlite"))


class TestPostgresLedger(LedgerContract):
    @pytest.fixture
    def ledger_url(self, pg_ledger_url):
        return pg_ledger_url

    def test_events_are_jsonb(self, ledger):
        with ledger._transaction(lock=False) as cur:
            cur.execute("SELECT data_type FROM information_schema.columns WHERE table_name = 'dpdist_entries' "
                        "AND column_name = 'events' AND table_schema = current_schema()")
            assert cur.fetchone()[0] == "jsonb"


def test_unreachable_postgres_is_an_infrastructure_error_without_the_password():
    pytest.importorskip("psycopg")
    url = f"postgresql://dpdist:s3cret-pw@127.0.0.1:{free_port()}/x?connect_timeout=2"
    with pytest.raises(InfrastructureError) as info:
        open_ledger(url)
    assert "s3cret-pw" not in str(info.value) and "***" in str(info.value)


def test_redact_url():
    assert redact_url("postgresql://u:pw@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redact_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact_url("/var/lib/ledger.sqlite") == "/var/lib/ledger.sqlite"


def test_ledger_location_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv("DPDIST_LEDGER", raising=False)
    assert resolve_ledger_url() == (str(tmp_path / "dpdist" / "ledger.sqlite"), "default")
    assert resolve_ledger_url(job_file="/job.sqlite") == ("/job.sqlite", "job file")
    monkeypatch.setenv("DPDIST_LEDGER", "/env.sqlite")
    assert resolve_ledger_url() == ("/env.sqlite", "DPDIST_LEDGER")
    assert resolve_ledger_url("/flag.sqlite") == ("/flag.sqlite", "--ledger")
    monkeypatch.delenv("DPDIST_LEDGER")
    with open_ledger():  # the default directory is created when missing
        pass
    assert (tmp_path / "dpdist" / "ledger.sqlite").exists()


def test_the_operator_pins_the_ledger_over_the_job_file(monkeypatch, tmp_path):
    """--ledger and DPDIST_LEDGER win over a job file's [ledger]; a job file naming another
    ledger than the pinned one is refused, one naming the same ledger (spelled differently) is not."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DPDIST_LEDGER", str(tmp_path / "ops.sqlite"))
    for job_file in ("ops.sqlite", f"sqlite:///{tmp_path}/ops.sqlite", str(tmp_path / "ops.sqlite")):
        assert resolve_ledger_url(job_file=job_file) == (str(tmp_path / "ops.sqlite"), "DPDIST_LEDGER")
    with pytest.raises(ValidationError, match="job file names the ledger .*own.sqlite.* DPDIST_LEDGER pins"):
        resolve_ledger_url(job_file=str(tmp_path / "own.sqlite"))
    with pytest.raises(ValidationError, match="--ledger pins"):
        resolve_ledger_url(str(tmp_path / "flag.sqlite"), str(tmp_path / "ops.sqlite"))
    assert resolve_ledger_url(str(tmp_path / "flag.sqlite"), "flag.sqlite")[1] == "--ledger"
    with pytest.raises(ValidationError, match=r"postgresql://u:\*\*\*@db/other"):  # the password is masked
        resolve_ledger_url("postgresql://u@db/ledger", "postgresql://u:secret@db/other")
    assert resolve_ledger_url("postgresql://u@db:5432/ledger", "postgresql://u:secret@db:5432/ledger")[1] == "--ledger"


def test_dataset_identifier_is_the_canonical_url(tmp_path):
    assert canonical_dataset("S3://bucket/data.zarr/") == "s3://bucket/data.zarr"
    assert canonical_dataset(f"file://{tmp_path}/d.zarr") == f"{tmp_path}/d.zarr"
    (tmp_path / "real.zarr").mkdir()
    (tmp_path / "link.zarr").symlink_to(tmp_path / "real.zarr")
    assert canonical_dataset(str(tmp_path / "link.zarr")) == str(tmp_path / "real.zarr")
