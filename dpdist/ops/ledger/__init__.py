"""A persistent privacy-budget ledger shared by every job that reads a dataset.

Every production DP system keeps a budget that outlives the process and refuses to
overspend (Tumult's session accountant, PipelineDP's budget accountant, the Census
Bureau's TopDown allocations). This is dpdist's: a small table of datasets with their
owners' total budgets, and an append-mostly table of entries, one per job.

Life of a job (what :meth:`Ledger.charge` and :func:`dpdist.ops.runner.run_job` do)::

    reserve  ->  (mark running)  ->  commit(output, checksum)      success
                                 ->  commit(outcome=...)           no private result, or a
                                                                   failure after noise was drawn
             ->  release(reason)                                   failure before any noise

- **reserve** (before any data is read) inserts a ``reserved`` entry holding the planned
  cost, in one transaction that first locks the dataset and re-checks the dataset's
  committed *and* reserved charges plus the new one under the composition rule of
  :mod:`dpdist.ops.composition`. A refusal raises :class:`~dpdist.exceptions.BudgetExceeded`
  (exit code 3) and is itself recorded as a ``refused`` entry (it spends nothing).
- **commit** turns the reservation into a ``committed`` entry, recording in the *same*
  transaction the output's location and checksum and the release's typed privacy events
  (which the composition rule then accounts, as the release's own accountant does). A result is published only after its
  commit (:func:`dpdist.ops.runner.run_job`), so no released output exists without a
  committed entry.
- **refund** returns a reservation unspent: its job failed before any noise was drawn.
- A ``NoPrivateResult`` commits what the mechanism spent (its outcome says so).

A job killed between reserve and commit leaves a ``reserved`` entry. ``dpdist budget show``
lists it (with whether its process is still alive), and the recovery command
``dpdist budget recover DATASET`` resolves it: a job that never reached the ``running``
stage read no data and is refunded; a job that was running may have drawn noise, so its
reservation is committed as spent (``recovered-as-spent``). Reservations of other hosts,
whose processes cannot be checked, are recovered with ``--older-than SECONDS``.

Backends: :class:`SQLiteLedger` (the default; WAL mode, ``BEGIN IMMEDIATE`` transactions,
safe for many processes on one host, not over network file systems) and
:class:`dpdist.ops.ledger.postgres.PostgresLedger` (many hosts; ``SELECT ... FOR UPDATE`` on the
dataset row). Both keep the same schema and pass the same contract tests.

Where the ledger is: :func:`open_ledger` takes a path or URL. Commands look for it, in this
order, in the ``--ledger`` flag, the ``DPDIST_LEDGER`` environment variable, the job file's
``[ledger]`` table, and the default :data:`DEFAULT_LEDGER_PATH`
(``$XDG_DATA_HOME/dpdist/ledger.sqlite``, i.e. ``~/.local/share/dpdist/ledger.sqlite``). The
flag and the variable pin the ledger: a job file naming another one is refused. The direct
commands (``dpdist covariance``, ``pca``, ``norm``, ``second-moment``) charge the pinned
ledger too; with none pinned they refuse a dataset that has a budget in the default ledger
unless told ``--no-ledger`` (see :mod:`dpdist.ops.runner`).

Estimators (and any code below ``ops``) call a ledger only through the duck-typed
:class:`ChargeProtocol`: ``with ledger.charge(dataset, cost) as reservation: ...``; they
never import this package.

Modules: :mod:`~dpdist.ops.ledger.base` (entries, reservations, the budget check: the logic
both backends share), :mod:`~dpdist.ops.ledger.sqlite` and :mod:`~dpdist.ops.ledger.postgres`
(the backends), :mod:`~dpdist.ops.ledger.locations` (where the ledger is; dataset names). The
series a budget plot draws from a ledger is :func:`dpdist.report.budget.spending_series`.
"""

from dpdist.exceptions import ValidationError
from dpdist.ops.ledger.base import ChargeProtocol, Entry, Ledger, Reservation
from dpdist.ops.ledger.locations import (
    DEFAULT_LEDGER_PATH,
    LEDGER_ENV,
    canonical_dataset,
    default_ledger_path,
    pinned_ledger_url,
    redact_url,
    resolve_ledger_url,
    same_ledger,
)
from dpdist.ops.ledger.sqlite import SQLiteLedger

__all__ = [
    "ChargeProtocol",
    "DEFAULT_LEDGER_PATH",
    "Entry",
    "LEDGER_ENV",
    "Ledger",
    "Reservation",
    "SQLiteLedger",
    "canonical_dataset",
    "default_ledger_path",
    "open_ledger",
    "pinned_ledger_url",
    "redact_url",
    "resolve_ledger_url",
    "same_ledger",
]


def open_ledger(url: str | None = None, *, create: bool = True) -> "Ledger":
    """Open the ledger at ``url`` (see :func:`resolve_ledger_url` for ``None``).

    A plain path or ``sqlite:///PATH`` opens a :class:`SQLiteLedger`; ``postgresql://`` or
    ``postgres://`` opens a :class:`~dpdist.ops.ledger.postgres.PostgresLedger` (extra
    ``dpdist[postgres]``). ``create=False`` (for commands that only read) refuses a SQLite
    ledger file that does not exist instead of creating it.
    """
    if url is None:
        url = resolve_ledger_url()[0]
    if url.startswith(("postgresql://", "postgres://")):
        from dpdist.ops.ledger.postgres import PostgresLedger

        return PostgresLedger(url)
    if url.startswith("sqlite:///"):
        url = "/" + url[len("sqlite:///"):].lstrip("/")
    elif "://" in url:
        raise ValidationError(f"ledger must be a path, sqlite:///PATH or postgresql://..., got {redact_url(url)!r}")
    return SQLiteLedger(url, create=create)
