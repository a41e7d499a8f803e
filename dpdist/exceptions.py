"""Exceptions and warnings raised by dpdist.

Every exception a user can meet carries the process exit code that the ``dpdist`` command
line (and a scheduler running ``dpdist run``) reports for it, as the class attribute
``exit_code``:

====  ==================================================================================
code  meaning
====  ==================================================================================
0     success
1     internal error (a bug: anything not listed below)
2     usage or validation error (bad flag, bad parameter, bad input, invalid job file);
      nothing was read or spent
3     the privacy-budget ledger refused the job: it would exceed the dataset's budget
4     no private result: a private test returned "bottom"; the budget counts as spent
5     infrastructure failure: scheduler unreachable, workers lost, storage error, timeout
130   interrupted (Ctrl-C)
143   terminated (SIGTERM: a service stop, an eviction, a batch system's preemption)
====  ==================================================================================
"""

from __future__ import annotations

__all__ = [
    "BudgetExceeded",
    "DataConversionWarning",
    "DpdistError",
    "InfrastructureError",
    "NoPrivateResult",
    "NotPrivateWarning",
    "PrivacyWarning",
    "SeededReleaseWarning",
    "Terminated",
    "UtilityWarning",
    "VacuousReleaseWarning",
    "ValidationError",
]

#: Exit code for anything that is not a :class:`DpdistError` (a bug).
EXIT_INTERNAL = 1
#: Exit code for Ctrl-C.
EXIT_INTERRUPTED = 130
#: Exit code for SIGTERM (128 + 15, what a process killed by it reports).
EXIT_TERMINATED = 143


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (``systemctl stop``, a Kubernetes eviction, a SLURM preemption). The
    command line raises it in the main thread and handles it like Ctrl-C: context managers run
    on the way out (a ledger reservation is resolved: released when no noise can have been
    drawn, else committed as spent) and the command exits with :data:`EXIT_TERMINATED`."""


class DpdistError(Exception):
    """Base of dpdist's own errors; ``exit_code`` is what the command line exits with."""

    exit_code = EXIT_INTERNAL


class ValidationError(DpdistError, ValueError):
    """A parameter or an input failed validation; raised before any data is read or noised."""

    exit_code = 2


class BudgetExceeded(DpdistError, RuntimeError):
    """A privacy-budget ledger refused a reservation: the job would overspend its dataset's
    budget. Raised before any data is read; nothing is spent."""

    exit_code = 3


class NoPrivateResult(DpdistError, RuntimeError):
    """A private test inside a mechanism rejected: the mechanism returned "bottom".

    The privacy budget counts as spent; ``release`` (when set) records the stage that rejected.
    """

    exit_code = 4

    def __init__(self, message: str, *, stage: str | None = None, release=None):
        super().__init__(message)
        self.stage = stage
        self.release = release


class InfrastructureError(DpdistError, RuntimeError):
    """The computation could not run: scheduler unreachable, workers lost, storage
    unreadable or unwritable, or a timeout. ``noise_drawn`` says whether any noise had been
    drawn (then the budget counts as spent) or not (then nothing was spent)."""

    exit_code = 5

    def __init__(self, message: str, *, noise_drawn: bool = False):
        super().__init__(message)
        self.noise_drawn = noise_drawn


class DataConversionWarning(UserWarning):
    """Input data were converted (for example integers to float64) before processing."""


class PrivacyWarning(UserWarning):
    """An unsafe mode is in use: a seeded (reproducible, hence not private) release, a NOT
    PRIVATE baseline, or ``unsafe_no_privacy=True``. Emitted once per fit, as one of the
    subclasses below; the command line prints one banner per subclass, so code that tells the
    modes apart tests the class, never the message."""


class SeededReleaseWarning(PrivacyWarning):
    """The noise was seeded from a user ``random_state``: anyone with the seed can regenerate
    and subtract it, so the release is reproducible and not private (tests and reproduction
    only). Raised instead of :class:`NotPrivateWarning` when a release is both seeded and not
    private for another reason; the message lists every reason."""


class NotPrivateWarning(PrivacyWarning):
    """The result carries no differential-privacy guarantee: a NOT PRIVATE baseline, a
    mechanism whose privacy precondition failed, or ``unsafe_no_privacy=True``."""


class UtilityWarning(UserWarning):
    """Base of the warnings about what a release's guarantee says of its accuracy; privacy is
    unaffected. Emitted as :class:`VacuousReleaseWarning`."""


class VacuousReleaseWarning(UtilityWarning):
    """A release is vacuous: at this data size the error its theorem predicts is at least the
    scale of the quantity (or a condition of the prediction fails), so its guarantee says
    nothing the public parameters did not (e.g. PrivCov on 10 rows: a diagonal of +-1e4 for a
    covariance of scale sigma^2 = 1). The papers' bounds are conservative, so a vacuous release
    may still be accurate; it is just not guaranteed to be. Emitted once per fit; the release
    records the same verdict in ``parameters["utility"]``, and ``plan()`` shows it before any
    data is read (:mod:`dpdist.algorithms.plan`). Privacy is unaffected."""
