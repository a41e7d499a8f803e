"""Operations: the privacy-budget ledger, job files and the job runner.

This layer sits above ``algorithms`` and ``data`` (it runs estimators and writes results)
and only ``dpdist.cli`` uses it. Estimators reach a ledger through the duck-typed
:class:`~dpdist.ops.ledger.ChargeProtocol` and never import this package.
"""

from dpdist.ops.job import Job, load_job
from dpdist.ops.ledger import Entry, Ledger, Reservation, SQLiteLedger, open_ledger
from dpdist.ops.runner import plan_job, run_job

__all__ = ["Entry", "Job", "Ledger", "Reservation", "SQLiteLedger", "load_job", "open_ledger", "plan_job", "run_job"]
