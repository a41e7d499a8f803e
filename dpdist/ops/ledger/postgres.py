"""The PostgreSQL ledger backend, for jobs on many hosts (extra ``dpdist[postgres]``: psycopg 3).

SQLite over a network file system is not safe (its locks are not), so jobs that run on
several hosts share a PostgreSQL database instead. The schema and the logic are those of
:class:`~dpdist.ops.ledger.base.Ledger`; this module supplies the connection, the transaction
and the lock: a reservation locks the dataset's row with ``SELECT ... FOR UPDATE``, so two
reservations on one dataset run one after the other (READ COMMITTED sees the first one's
entry once its lock is granted), while reservations on different datasets do not wait.

The URL is libpq's (``postgresql://USER@HOST:PORT/DB``); keep the password out of it and in
``PGPASSWORD`` or ``~/.pgpass`` (libpq reads both), so job files and logs never hold it.
Messages print the URL with any password masked.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from dpdist.exceptions import InfrastructureError, ValidationError
from dpdist.ops.ledger.base import Ledger
from dpdist.ops.ledger.locations import redact_url

__all__ = ["PostgresLedger"]


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise ValidationError(
            "a postgresql:// ledger needs psycopg 3: pip install 'dpdist[postgres]'"
        ) from None
    return psycopg


class PostgresLedger(Ledger):
    """The ledger in a PostgreSQL database (``postgresql://...``)."""

    placeholder = "%s"

    def __init__(self, url: str, *, connect_timeout: float = 30.0):
        psycopg = _psycopg()
        self.url = url
        self._errors = (psycopg.OperationalError, psycopg.InterfaceError)
        try:
            self._conn = psycopg.connect(url, autocommit=True, connect_timeout=int(connect_timeout))
            with self._transaction(lock=True) as cur:
                # one creator at a time (CREATE TABLE IF NOT EXISTS races otherwise)
                cur.execute("SELECT pg_advisory_xact_lock(7420113)")
                self._create_schema(cur, seq="BIGSERIAL PRIMARY KEY", events="JSONB NOT NULL DEFAULT '[]'::jsonb")
        except self._errors as exc:
            raise InfrastructureError(f"cannot reach the ledger {redact_url(url)!r}: {_first_line(exc)}") from None

    @contextlib.contextmanager
    def _transaction(self, *, lock: bool) -> Iterator[Any]:
        try:
            with self._conn.transaction(), self._conn.cursor() as cur:
                yield cur
        except self._errors as exc:
            raise InfrastructureError(f"ledger {redact_url(self.url)!r} unavailable: {_first_line(exc)}") from None

    def _lock_dataset(self, cur, dataset: str) -> None:
        cur.execute("SELECT dataset FROM dpdist_datasets WHERE dataset = %s FOR UPDATE", (dataset,))
        if cur.fetchone() is None:
            # no row to lock yet (no budget): serialise on the dataset's name instead
            cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (dataset,))

    def close(self) -> None:
        self._conn.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
