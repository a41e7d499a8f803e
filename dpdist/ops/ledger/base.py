"""The ledger's interface and logic, shared by its backends: entries, reservations, and the
budget check of every charge under :mod:`dpdist.ops.composition`'s rule. A backend
(:mod:`~dpdist.ops.ledger.sqlite`, :mod:`~dpdist.ops.ledger.postgres`) supplies the
connection, a locked transaction and its SQL placeholder."""

from __future__ import annotations

import abc
import contextlib
import datetime as _dt
import json
import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import Any, ContextManager, Iterator, Protocol, Sequence

from dpdist.exceptions import BudgetExceeded, InfrastructureError, NoPrivateResult, ValidationError
from dpdist.ops.composition import Charge, Spent, cost_from_dict, cost_to_dict, decimal_of, spent, within
from dpdist.ops.ledger.locations import canonical_dataset
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.events import labelled_events_from_list, labelled_events_to_list
from dpdist.privacy.zcdp import ZCDP, Guarantee

__all__ = ["ChargeProtocol", "Entry", "Ledger", "Reservation", "SCHEMA"]

SCHEMA_VERSION = 2

#: Entry states. ``committed``: the charge is spent (whatever the job's outcome); ``refunded``:
#: the reservation was returned unspent (the job failed before it could read data or draw
#: noise); ``refused``: the charge did not fit the budget and never ran. "released" is never a
#: state: it is the outcome of a committed charge whose job published its result.
RESERVED, COMMITTED, REFUNDED, REFUSED, BUDGET_SET = "reserved", "committed", "refunded", "refused", "budget-set"
#: The outcome of a refunded reservation.
UNSPENT = "refunded-unspent"
#: Stages of a reservation (``running``: data may have been read and noise drawn).
STAGE_RESERVED, STAGE_RUNNING = "reserved", "running"

#: The schema of both backends (``{seq}``, ``{events}``: the column types that differ). ``events``:
#: the typed privacy events of the release a charge was committed for; empty when none.
SCHEMA = """
CREATE TABLE IF NOT EXISTS dpdist_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS dpdist_datasets (
    dataset TEXT PRIMARY KEY, name TEXT, budget TEXT NOT NULL, owner TEXT, updated TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS dpdist_entries (
    seq {seq},
    id TEXT NOT NULL UNIQUE,
    dataset TEXT NOT NULL,
    state TEXT NOT NULL,
    cost TEXT NOT NULL,
    stage TEXT, job TEXT, output TEXT, checksum TEXT, outcome TEXT, note TEXT,
    host TEXT, pid INTEGER, pid_start TEXT,
    created TEXT NOT NULL, finished TEXT,
    events {events});
CREATE INDEX IF NOT EXISTS dpdist_entries_dataset ON dpdist_entries (dataset, seq)
"""


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


def _process_start(pid: int) -> str | None:
    """Start time of process ``pid`` (Linux ``/proc``), to tell a pid reused from the original."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _process_alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if start is not None and os.path.exists("/proc"):
        return _process_start(pid) == start
    return True


@dataclass(frozen=True)
class Entry:
    """One ledger record: a charge (reserved, committed, refunded), a refusal, or a budget set.

    ``cost`` is the privacy cost (for a budget set: the new total); ``events`` the typed
    privacy events of the release it was committed for (a JSON list; empty when none).
    """

    seq: int
    id: str
    dataset: str
    state: str
    cost: dict
    stage: str | None = None
    job: str | None = None
    output: str | None = None
    checksum: str | None = None
    outcome: str | None = None
    note: str | None = None
    host: str | None = None
    pid: int | None = None
    pid_start: str | None = None
    created: str = ""
    finished: str | None = None
    events: list = field(default_factory=list)

    @property
    def privacy(self) -> Guarantee:
        return cost_from_dict(self.cost)

    @property
    def charge(self) -> Charge:
        """The charge the composition rule counts: the cost, with the typed events when they
        can be read (a list in another form, written by an older version, counts as none)."""
        try:
            events = labelled_events_from_list(self.events)
        except ValidationError:
            events = ()
        return Charge(self.privacy, events)

    @property
    def counts(self) -> bool:
        """Whether this entry counts against the budget (reserved or committed)."""
        return self.state in (RESERVED, COMMITTED)

    def process_state(self) -> str:
        """For a reserved entry: ``alive``, ``gone`` (stale) or ``unknown`` (another host)."""
        if self.state != RESERVED or self.pid is None:
            return "unknown"
        if self.host != socket.gethostname():
            return "unknown"
        return "alive" if _process_alive(self.pid, self.pid_start) else "gone"

    def to_dict(self) -> dict:
        return {
            "seq": self.seq, "id": self.id, "dataset": self.dataset, "state": self.state,
            "stage": self.stage, "cost": self.cost, "job": self.job, "output": self.output,
            "checksum": self.checksum, "outcome": self.outcome, "note": self.note, "host": self.host,
            "pid": self.pid, "created": self.created, "finished": self.finished, "events": self.events,
        }


_COLUMNS = ("seq", "id", "dataset", "state", "cost", "stage", "job", "output", "checksum", "outcome", "note",
            "host", "pid", "pid_start", "created", "finished", "events")


def _entry(row: Sequence) -> Entry:
    d = dict(zip(_COLUMNS, row))
    d["cost"] = json.loads(d["cost"]) if isinstance(d["cost"], str) else d["cost"]
    ev = d["events"]
    d["events"] = (json.loads(ev) if isinstance(ev, str) else ev) or []
    return Entry(**d)


class ChargeProtocol(Protocol):
    """What a caller charging an estimator's fit needs of a ledger:
    ``with ledger.charge(dataset, est.privacy_cost(), job=...) as r: est.fit(X, reservation=r)``.

    ``dataset`` is the data's identifier (its URL or path; a path is canonicalised). The object
    entered has ``cost``, ``running()`` (data may be read from now on), ``commit(output=None,
    checksum=None, outcome="released", note=None, events=None)`` and optionally
    ``record(events)``, where a successful fit keeps its release's events for the commit that
    releases. The estimator commits only when the data refused the pass
    (``outcome="refused-during-pass"``: a revealed bit, counted as spent). Leaving the block
    normally commits; leaving it by an exception commits what a
    :class:`~dpdist.exceptions.NoPrivateResult` spent, refunds the reservation when nothing can
    have been spent (an ``InfrastructureError`` with ``noise_drawn=False``), and else commits
    it as spent. Estimators call this duck-typed interface (:mod:`dpdist.algorithms._base`)
    and never import :mod:`dpdist.ops`.
    """

    def charge(self, dataset: str, cost: Guarantee, *, job: str | None = None) -> ContextManager[Any]: ...


class Reservation:
    """A reserved charge; resolve it with :meth:`commit` (spent) or :meth:`refund` (returned
    unspent), once."""

    def __init__(self, ledger: "Ledger", entry: Entry):
        self.ledger = ledger
        self.id = entry.id
        self.dataset = entry.dataset
        self.cost = entry.privacy
        self.entry = entry
        self.running_ = False
        self.events: tuple = ()

    @property
    def open(self) -> bool:
        return self.entry.state == RESERVED

    def running(self) -> None:
        """Mark the stage at which data may be read and noise drawn (then counted as spent)."""
        self.ledger.mark_running(self.id)
        self.running_ = True

    def record(self, events: Sequence) -> None:
        """Keep the release's ``(label, Event)`` pairs for the commit that releases it."""
        self.events = tuple(events)

    def commit(self, *, output: str | None = None, checksum: str | None = None, outcome: str = "released",
               spent: Guarantee | None = None, note: str | None = None, events: Sequence | None = None) -> Entry:
        """Commit (spent) with the release's ``events`` (:meth:`Ledger.commit`; default: those
        :meth:`record` kept if ``outcome="released"``, else none: a failed run counts by cost)."""
        if events is None:
            events = self.events if outcome == "released" else ()
        self.entry = self.ledger.commit(self.id, output=output, checksum=checksum, outcome=outcome,
                                        spent=spent, note=note, events=events)
        return self.entry

    def refund(self, reason: str) -> Entry:
        self.entry = self.ledger.refund(self.id, reason=reason)
        return self.entry


def nothing_spent(exc: BaseException) -> bool:
    """Whether a failure certainly drew no noise (then a reservation may be refunded)."""
    if isinstance(exc, (ValidationError, BudgetExceeded)):
        return True
    if isinstance(exc, InfrastructureError):
        return not exc.noise_drawn
    return False


def spent_by(exc: NoPrivateResult, reserved: Guarantee) -> Guarantee:
    """What a rejected mechanism spent: its release's guarantee when it records one of the
    reserved kind and no larger, else the whole reservation (conservative)."""
    privacy = getattr(getattr(exc, "release", None), "privacy", None)
    if not within(privacy, reserved):
        return reserved
    return ZCDP(privacy.rho) if isinstance(privacy, ZCDP) else privacy


class Ledger(abc.ABC):
    """The ledger interface (``reserve``, ``commit``, ``release``, ``history``, ``remaining``)
    and its logic; a backend supplies a locked transaction and its SQL dialect."""

    #: Placeholder of the backend's DB-API driver.
    placeholder = "?"
    url: str

    # -- backend hooks -------------------------------------------------------------------
    @abc.abstractmethod
    def _transaction(self, *, lock: bool) -> ContextManager[Any]:
        """A cursor inside one transaction; ``lock=True`` takes the write lock up front."""

    def _lock_dataset(self, cur, dataset: str) -> None:  # pragma: no cover - SQLite locks the file
        """Serialise reservations on ``dataset`` (Postgres: ``SELECT ... FOR UPDATE``)."""

    def close(self) -> None:
        """Close the connection."""

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _create_schema(self, cur, **types: str) -> None:
        """Create the tables (if missing) with the backend's column ``types``; record the version."""
        for stmt in filter(str.strip, SCHEMA.format(**types).split(";")):
            cur.execute(stmt)
        self._exec(cur, "INSERT INTO dpdist_meta (key, value) VALUES ('schema', ?) ON CONFLICT DO NOTHING",
                   (str(SCHEMA_VERSION),))
        version = int(self._exec(cur, "SELECT value FROM dpdist_meta WHERE key = 'schema'").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise ValidationError(f"this ledger has schema version {version}, newer than this dpdist's "
                                  f"{SCHEMA_VERSION}: upgrade dpdist to use it")
        if version == 1:
            # Version 1 called a reservation returned unspent "released", the word a committed
            # (spent) charge uses for its published outcome; the same transaction renames it.
            self._exec(cur, "UPDATE dpdist_entries SET state = ? WHERE state = 'released'", (REFUNDED,))
            self._exec(cur, "UPDATE dpdist_entries SET outcome = ? WHERE outcome = 'released-unspent'", (UNSPENT,))
            self._exec(cur, "UPDATE dpdist_meta SET value = ? WHERE key = 'schema'", (str(SCHEMA_VERSION),))

    def _sql(self, sql: str) -> str:
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)

    def _exec(self, cur, sql: str, params: Sequence = ()) -> Any:
        cur.execute(self._sql(sql), tuple(params))
        return cur

    # -- datasets ------------------------------------------------------------------------
    def set_budget(self, dataset: str, total: Guarantee, *, name: str | None = None, owner: str | None = None,
                   force: bool = False) -> Entry:
        """Set (or change) the total budget of ``dataset``, recorded in its history.

        Changing the kind (``(epsilon, delta)`` vs ``rho``) is refused when existing charges
        could not be composed under the new kind. A total below what the dataset's committed
        and open charges already spend is refused unless ``force`` (every later job on it is
        then refused). ``name`` and ``owner`` left None keep the dataset's current ones.
        """
        dataset = canonical_dataset(dataset)
        if not isinstance(total, (ApproxDP, ZCDP)) or (isinstance(total, ZCDP) and total.rho <= 0):
            raise ValidationError(f"a budget must be ApproxDP(epsilon, delta) or ZCDP(rho > 0), got {total!r}")
        with self._transaction(lock=True) as cur:
            self._lock_dataset(cur, dataset)
            used = spent(total, [e.charge for e in self._entries(cur, dataset) if e.counts])  # kind compatible?
            if not used.fits and not force:
                raise ValidationError(
                    f"a total of {total.describe()} for {dataset!r} is below what its committed and open charges "
                    f"already spend ({used.reason}); nothing was changed. To set it anyway (every later job on it "
                    "is then refused), pass force=True (dpdist budget set --force)")
            budget = json.dumps(cost_to_dict(total))
            row = self._exec(cur, "SELECT name, owner FROM dpdist_datasets WHERE dataset = ?", (dataset,)).fetchone()
            if row is None:
                self._exec(cur, "INSERT INTO dpdist_datasets (dataset, name, budget, owner, updated) "
                                "VALUES (?, ?, ?, ?, ?)", (dataset, name, budget, owner, _now()))
            else:
                owner = owner if owner is not None else row[1]
                self._exec(cur, "UPDATE dpdist_datasets SET name = ?, budget = ?, owner = ?, updated = ? "
                                "WHERE dataset = ?", (name if name is not None else row[0], budget, owner,
                                                      _now(), dataset))
            return self._insert(cur, dataset, BUDGET_SET, cost_to_dict(total), note=f"owner {owner}" if owner else None)

    def datasets(self) -> list[dict]:
        """Every dataset with a budget: ``dataset``, ``name``, ``budget``, ``owner``, ``updated``."""
        with self._transaction(lock=False) as cur:
            rows = self._exec(cur, "SELECT dataset, name, budget, owner, updated FROM dpdist_datasets "
                                   "ORDER BY dataset").fetchall()
        return [{"dataset": r[0], "name": r[1], "budget": json.loads(r[2]), "owner": r[3], "updated": r[4]}
                for r in rows]

    def knows(self, dataset: str) -> bool:
        """Whether ``dataset`` (its canonical identifier) has a budget or any entry here."""
        with self._transaction(lock=False) as cur:
            if self._total(cur, dataset) is not None:
                return True
            return self._exec(cur, "SELECT 1 FROM dpdist_entries WHERE dataset = ? LIMIT 1",
                              (dataset,)).fetchone() is not None

    def lookup(self, dataset_or_name: str) -> str:
        """The canonical identifier of a dataset given by URL/path or by its declared name."""
        with self._transaction(lock=False) as cur:
            rows = self._exec(cur, "SELECT dataset FROM dpdist_datasets WHERE name = ?",
                              (dataset_or_name,)).fetchall()
        if len(rows) == 1:
            return rows[0][0]
        if len(rows) > 1:
            raise ValidationError(f"the name {dataset_or_name!r} labels {len(rows)} datasets; give the URL")
        return canonical_dataset(dataset_or_name)

    def total(self, dataset: str) -> Guarantee | None:
        """The dataset's total budget, or None when its owner has set none."""
        with self._transaction(lock=False) as cur:
            return self._total(cur, canonical_dataset(dataset))

    def _total(self, cur, dataset: str) -> Guarantee | None:
        row = self._exec(cur, "SELECT budget FROM dpdist_datasets WHERE dataset = ?", (dataset,)).fetchone()
        return None if row is None else cost_from_dict(json.loads(row[0]))

    # -- entries -------------------------------------------------------------------------
    def _entries(self, cur, dataset: str) -> list[Entry]:
        rows = self._exec(cur, f"SELECT {', '.join(_COLUMNS)} FROM dpdist_entries WHERE dataset = ? ORDER BY seq",
                          (dataset,)).fetchall()
        return [_entry(r) for r in rows]

    def _entry_by_id(self, cur, entry_id: str) -> Entry:
        row = self._exec(cur, f"SELECT {', '.join(_COLUMNS)} FROM dpdist_entries WHERE id = ?",
                         (entry_id,)).fetchone()
        if row is None:
            raise ValidationError(f"no ledger entry {entry_id!r}")
        return _entry(row)

    def _insert(self, cur, dataset: str, state: str, cost: dict, *, stage: str | None = None,
                job: str | None = None, output: str | None = None, note: str | None = None,
                outcome: str | None = None, finished: bool = True) -> Entry:
        entry_id = uuid.uuid4().hex
        pid = os.getpid()
        now = _now()
        self._exec(
            cur,
            "INSERT INTO dpdist_entries (id, dataset, state, cost, stage, job, output, outcome, note, host, pid, "
            "pid_start, created, finished, events) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (entry_id, dataset, state, json.dumps(cost), stage, job, output, outcome, note, socket.gethostname(),
             pid, _process_start(pid), now, now if finished else None, "[]"),
        )
        return self._entry_by_id(cur, entry_id)

    def reserve(self, dataset: str, cost: Guarantee, *, job: str | None = None,
                output: str | None = None) -> Reservation:
        """Reserve ``cost`` on ``dataset`` before reading any data.

        Raises
        ------
        BudgetExceeded
            The dataset has no budget, or the reservation would exceed it (the refusal is
            recorded as a ``refused`` entry).
        ValidationError
            ``cost`` is not a privacy cost, or cannot be charged against this budget's kind.
        """
        dataset = canonical_dataset(dataset)
        cost_dict = cost_to_dict(cost)
        with self._transaction(lock=True) as cur:
            self._lock_dataset(cur, dataset)
            total = self._total(cur, dataset)
            if total is None:
                reason = f"dataset {dataset!r} has no privacy budget in this ledger; its owner sets one with " \
                         f"'dpdist budget set {dataset} --epsilon E --delta D' (or --rho)"
            else:
                result = spent(total, [e.charge for e in self._entries(cur, dataset) if e.counts] + [cost])
                reason = "" if result.fits else (
                    f"reserving {cost.describe()} on {dataset!r} would exceed its budget {total.describe()}: "
                    f"{result.reason}"
                )
            if not reason:
                entry = self._insert(cur, dataset, RESERVED, cost_dict, stage=STAGE_RESERVED, job=job,
                                     output=output, finished=False)
                return Reservation(self, entry)
            self._insert(cur, dataset, REFUSED, cost_dict, job=job, output=output, note=reason, outcome="refused")
        raise BudgetExceeded(reason)

    def mark_running(self, entry_id: str) -> None:
        """Record that the reserved job now reads data (noise may be drawn from here on)."""
        with self._transaction(lock=True) as cur:
            n = self._exec(cur, "UPDATE dpdist_entries SET stage = ? WHERE id = ? AND state = ?",
                           (STAGE_RUNNING, entry_id, RESERVED)).rowcount
            if n != 1:
                raise ValidationError(f"reservation {entry_id!r} is not open")

    def commit(self, entry_id: str, *, output: str | None = None, checksum: str | None = None,
               outcome: str = "released", spent: Guarantee | None = None, note: str | None = None,
               events: Sequence = ()) -> Entry:
        """Commit a reservation, recording the output's location and checksum in the same
        transaction. ``spent`` (no larger than the reservation) replaces the reserved cost.

        ``events``: the ``(label, Event)`` pairs of the release the charge paid for
        (``Release.events``), stored with the entry; the composition rule then accounts the
        charge by them as well as by its cost (:mod:`dpdist.ops.composition`). Give none for a
        charge spent without a release: it counts by its cost alone.
        """
        stored = json.dumps(labelled_events_to_list(events))
        with self._transaction(lock=True) as cur:
            entry = self._entry_by_id(cur, entry_id)
            if entry.state != RESERVED:
                raise ValidationError(f"reservation {entry_id!r} is {entry.state}, not reserved")
            cost = entry.cost
            if spent is not None:
                cost = cost_to_dict(spent)
                if cost["type"] != entry.cost["type"] or any(
                    decimal_of(cost[k]) > decimal_of(entry.cost[k]) for k in cost if k != "type"
                ):
                    raise ValidationError(f"spent {cost} exceeds the reservation {entry.cost}")
            self._exec(cur, "UPDATE dpdist_entries SET state = ?, cost = ?, output = ?, checksum = ?, outcome = ?, "
                            "note = ?, finished = ?, events = ? WHERE id = ? AND state = ?",
                       (COMMITTED, json.dumps(cost), output if output is not None else entry.output, checksum,
                        outcome, note, _now(), stored, entry_id, RESERVED))
            return self._entry_by_id(cur, entry_id)

    def refund(self, entry_id: str, *, reason: str) -> Entry:
        """Return a reservation unspent: its job failed before any noise was drawn."""
        with self._transaction(lock=True) as cur:
            n = self._exec(cur, "UPDATE dpdist_entries SET state = ?, outcome = ?, note = ?, finished = ? "
                                "WHERE id = ? AND state = ?",
                           (REFUNDED, UNSPENT, reason, _now(), entry_id, RESERVED)).rowcount
            if n != 1:
                raise ValidationError(f"reservation {entry_id!r} is not open")
            return self._entry_by_id(cur, entry_id)

    def entry(self, entry_id: str) -> Entry:
        """The entry ``entry_id`` as the ledger holds it now."""
        with self._transaction(lock=False) as cur:
            return self._entry_by_id(cur, entry_id)

    def history(self, dataset: str) -> list[Entry]:
        """Every entry of ``dataset`` in order: budget sets, reservations, commits, refusals."""
        with self._transaction(lock=False) as cur:
            return self._entries(cur, canonical_dataset(dataset))

    def remaining(self, dataset: str, *, extra: Guarantee | None = None) -> Spent:
        """What the dataset's committed and reserved charges (plus ``extra``, a dry run) spend
        of its total; ``.remaining()`` is what is left.

        Raises
        ------
        BudgetExceeded
            The dataset has no budget.
        """
        dataset = canonical_dataset(dataset)
        with self._transaction(lock=False) as cur:
            total = self._total(cur, dataset)
            if total is None:
                raise BudgetExceeded(f"dataset {dataset!r} has no privacy budget in this ledger")
            charges = [e.charge for e in self._entries(cur, dataset) if e.counts]
        return spent(total, charges + ([extra] if extra is not None else []))

    @contextlib.contextmanager
    def charge(self, dataset: str, cost: Guarantee, *, job: str | None = None, output: str | None = None,
               unspent_until_running: bool = False) -> Iterator[Reservation]:
        """Reserve ``cost`` for the block; resolve the reservation when the block ends.

        - the block commits explicitly (``reservation.commit(output=..., checksum=...)``), or
          ends normally: committed (the result reached the caller);
        - :class:`~dpdist.exceptions.NoPrivateResult`: committed with what was spent;
        - an error certain to have drawn no noise (validation, or an infrastructure failure
          with ``noise_drawn=False``): refunded;
        - any other exception (a bug, Ctrl-C, SIGTERM, a failure after noise): committed as spent,
          since the ledger cannot prove no noise was drawn; with ``unspent_until_running``
          (for callers that mark :meth:`Reservation.running` before reading data, as the
          job runner does), refunded when it happened before that mark.

        The failure leaves with the entry as resolved in its ``ledger_entry`` attribute (the
        command line reports from it whether and what the failure spent).

        Examples
        --------
        >>> with ledger.charge("s3://bucket/claims.zarr", est.privacy_cost()) as r:  # doctest: +SKIP
        ...     est.fit("s3://bucket/claims.zarr", reservation=r)
        """
        reservation = self.reserve(dataset, cost, job=job, output=output)
        try:
            yield reservation
        except BaseException as exc:
            try:
                if reservation.open:
                    note = f"{type(exc).__name__}: {str(exc)[:500]}"
                    if isinstance(exc, NoPrivateResult):
                        reservation.commit(outcome="no-private-result", spent=spent_by(exc, reservation.cost),
                                           note=str(exc)[:500])
                    elif nothing_spent(exc) or (unspent_until_running and not reservation.running_):
                        reservation.refund(note)
                    else:
                        reservation.commit(outcome="failed-counted-as-spent", note=note)
            except BaseException as failure:  # the ledger failed, or the job was resolved elsewhere
                self._tell_entry(failure, reservation, reread=True)
                raise
            self._tell_entry(exc, reservation)
            raise
        if reservation.open:
            reservation.commit(outcome="released")

    def _tell_entry(self, exc: BaseException, reservation: Reservation, *, reread: bool = False) -> None:
        """Attach the reservation's ledger entry, as it stands, to the failure leaving
        :meth:`charge` (``exc.ledger_entry``), so whoever reports the failure can say whether
        and what it spent. ``reread``: the entry as the ledger now holds it, when it can be read."""
        entry = reservation.entry
        if reread:
            with contextlib.suppress(Exception):
                entry = self.entry(reservation.id)
        with contextlib.suppress(AttributeError, TypeError):
            exc.ledger_entry = entry  # type: ignore[attr-defined]

    # -- recovery ------------------------------------------------------------------------
    def open_reservations(self, dataset: str | None = None) -> list[Entry]:
        """Reservations not yet committed or refunded (of ``dataset``, or of every dataset)."""
        with self._transaction(lock=False) as cur:
            sql = f"SELECT {', '.join(_COLUMNS)} FROM dpdist_entries WHERE state = ?"
            params: tuple = (RESERVED,)
            if dataset is not None:
                sql += " AND dataset = ?"
                params += (canonical_dataset(dataset),)
            return [_entry(r) for r in self._exec(cur, sql + " ORDER BY seq", params).fetchall()]

    def recover(self, dataset: str | None = None, *, older_than: float | None = None) -> list[Entry]:
        """Resolve stale reservations (the recovery command ``dpdist budget recover``).

        A reservation is stale when its process (on this host) is gone, or, with
        ``older_than`` seconds, when it is older than that (for jobs of other hosts, whose
        processes cannot be checked). A stale reservation that never reached the
        ``running`` stage read no data and is released; one that was running may have drawn
        noise and is committed as spent (outcome ``recovered-as-spent``). The stage is read in
        the transaction that resolves the reservation, so a job that marks itself running
        after the list was read is counted as spent.
        """
        now = _dt.datetime.now(_dt.timezone.utc)
        done = []
        for e in self.open_reservations(dataset):
            state = e.process_state()
            age = (now - _dt.datetime.fromisoformat(e.created)).total_seconds()
            if state == "alive" or (state == "unknown" and (older_than is None or age <= older_than)):
                continue
            why = "process gone" if state == "gone" else f"reserved {age:.0f}s ago on host {e.host}"
            resolved = self._recover_one(e.id, why)
            if resolved is not None:
                done.append(resolved)
        return done

    def _recover_one(self, entry_id: str, why: str) -> Entry | None:
        """Resolve one stale reservation, deciding by its stage *inside* the transaction that
        resolves it: a job on another host may mark itself running at any moment before, and
        then it may have read data and drawn noise. The refund only matches a reservation still
        at the ``reserved`` stage; when it matches nothing, the reservation (if still open) is
        committed as spent. None when the job resolved it itself meanwhile."""
        with self._transaction(lock=True) as cur:
            n = self._exec(cur, "UPDATE dpdist_entries SET state = ?, outcome = ?, note = ?, finished = ? "
                                "WHERE id = ? AND state = ? AND stage = ?",
                           (REFUNDED, UNSPENT, f"recovered ({why}); the job read no data", _now(),
                            entry_id, RESERVED, STAGE_RESERVED)).rowcount
            if n != 1:
                n = self._exec(cur, "UPDATE dpdist_entries SET state = ?, outcome = ?, note = ?, finished = ? "
                                    "WHERE id = ? AND state = ?",
                               (COMMITTED, "recovered-as-spent",
                                f"recovered ({why}); the job may have drawn noise", _now(), entry_id,
                                RESERVED)).rowcount
            return self._entry_by_id(cur, entry_id) if n == 1 else None
