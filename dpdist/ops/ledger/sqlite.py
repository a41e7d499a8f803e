"""The SQLite ledger backend: one file on one host (the default ledger)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from typing import Any, Iterator, Sequence

from dpdist.exceptions import InfrastructureError, ValidationError
from dpdist.ops.ledger.base import Ledger
from dpdist.ops.ledger.locations import default_ledger_path

__all__ = ["SQLiteLedger"]


class SQLiteLedger(Ledger):
    """The embedded ledger: one SQLite file, WAL journal, ``BEGIN IMMEDIATE`` transactions.

    Safe for concurrent processes on one host (the file lock serialises writers; readers
    do not block). Not safe on network file systems (NFS, SMB): use PostgreSQL there.
    """

    def __init__(self, path: str | os.PathLike, *, timeout: float = 60.0, create: bool = True):
        path = os.path.abspath(os.path.expanduser(os.fspath(path)))
        self.url = path
        if not create and not os.path.isfile(path):
            raise ValidationError(f"there is no ledger at {path!r} (no budget was set and no job ran with it)")
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            if path == default_ledger_path():
                os.makedirs(parent, exist_ok=True)
            else:
                raise ValidationError(f"ledger directory {parent!r} does not exist")
        try:
            self._conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")  # a committed spend survives power loss
            with self._transaction(lock=True) as cur:
                self._create_schema(cur, seq="INTEGER PRIMARY KEY AUTOINCREMENT",
                                    events="TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(events))")
        except sqlite3.Error as exc:
            raise InfrastructureError(f"cannot open the ledger {path!r}: {exc}") from None

    @contextlib.contextmanager
    def _transaction(self, *, lock: bool) -> Iterator[Any]:
        cur = _Cursor(self._conn.cursor())
        try:
            cur.execute("BEGIN IMMEDIATE" if lock else "BEGIN")
        except sqlite3.Error as exc:
            raise InfrastructureError(f"ledger {self.url!r} unavailable: {exc}") from None
        try:
            yield cur
        except BaseException:
            self._conn.rollback()
            raise
        try:
            cur.execute("COMMIT")
        except sqlite3.Error as exc:
            self._conn.rollback()
            raise InfrastructureError(f"ledger {self.url!r}: commit failed: {exc}") from None

    def close(self) -> None:
        self._conn.close()


class _Cursor:
    """A sqlite3 cursor whose execute errors become InfrastructureError (ledger failures are
    infrastructure failures, exit code 5) and whose execute returns itself."""

    def __init__(self, cur: sqlite3.Cursor):
        self._cur = cur

    def execute(self, sql: str, params: Sequence = ()) -> "_Cursor":
        try:
            self._cur.execute(sql, params)
        except sqlite3.IntegrityError:
            raise
        except sqlite3.Error as exc:
            raise InfrastructureError(f"ledger error: {exc}") from None
        return self

    def fetchone(self):
        return self._cur.fetchone()

    def fetchall(self):
        return self._cur.fetchall()

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount
