"""Where the ledger is, and how datasets and ledgers are named.

Commands look for the ledger, in this order, in the ``--ledger`` flag, the ``DPDIST_LEDGER``
environment variable, the job file's ``[ledger]`` table, and the default
:data:`DEFAULT_LEDGER_PATH`. The flag and the variable pin the ledger: a job file naming
another one is refused. A dataset is named by the canonical location of its data.
"""

from __future__ import annotations

import os

from dpdist.data.validation import canonical_location
from dpdist.exceptions import ValidationError

__all__ = [
    "DEFAULT_LEDGER_PATH",
    "LEDGER_ENV",
    "canonical_dataset",
    "default_ledger_path",
    "pinned_ledger_url",
    "redact_url",
    "resolve_ledger_url",
    "same_ledger",
]

#: Environment variable naming the ledger (a path, ``sqlite:///PATH`` or ``postgresql://...``).
LEDGER_ENV = "DPDIST_LEDGER"


def default_ledger_path() -> str:
    """``$XDG_DATA_HOME/dpdist/ledger.sqlite`` (``~/.local/share/dpdist/ledger.sqlite``)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "dpdist", "ledger.sqlite")


DEFAULT_LEDGER_PATH = "$XDG_DATA_HOME/dpdist/ledger.sqlite (default ~/.local/share/dpdist/ledger.sqlite)"


def resolve_ledger_url(flag: str | None = None, job_file: str | None = None) -> tuple[str, str]:
    """The ledger to use and where that choice came from: flag, environment, job file, default.

    The operator pins the ledger with ``--ledger`` (``flag``) or ``DPDIST_LEDGER``; a pinned
    ledger wins over a job file's ``[ledger] url``, and a job file naming a different ledger
    than the pinned one is refused (a job must not move its spending to a ledger of its own).

    Raises
    ------
    ValidationError
        The job file names a ledger other than the pinned one.
    """
    pinned = pinned_ledger_url(flag)
    if pinned is not None:
        url, source = pinned
        if job_file and not same_ledger(job_file, url):
            raise ValidationError(
                f"the job file names the ledger {redact_url(job_file)!r}, but {source} pins "
                f"{redact_url(url)!r}; remove the job file's [ledger] table or make it name the pinned ledger")
        return url, source
    if job_file:
        return job_file, "job file"
    return default_ledger_path(), "default"


def pinned_ledger_url(flag: str | None = None) -> tuple[str, str] | None:
    """The ledger the operator configured, ``--ledger`` (``flag``) else ``DPDIST_LEDGER``, with
    its source; None when neither is set."""
    if flag:
        return flag, "--ledger"
    env = os.environ.get(LEDGER_ENV)
    if env:
        return env, LEDGER_ENV
    return None


def _ledger_key(url: str) -> str:
    """A ledger location without what does not change which ledger it is: a SQLite path made
    absolute (``sqlite:///`` removed), a database URL without its password."""
    from urllib.parse import urlsplit, urlunsplit

    if url.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        netloc = f"{parts.username}@{host}" if parts.username else host
        return urlunsplit(parts._replace(scheme="postgresql", netloc=netloc))
    if url.startswith("sqlite:///"):
        url = "/" + url[len("sqlite:///"):].lstrip("/")
    return os.path.realpath(os.path.abspath(os.path.expanduser(url)))


def same_ledger(a: str, b: str) -> bool:
    """Whether two ledger locations name the same ledger."""
    return _ledger_key(a) == _ledger_key(b)


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages, logs and metadata)."""
    from urllib.parse import urlsplit, urlunsplit

    if "://" not in url:
        return url
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    netloc = f"{parts.username}:***@{host}" if parts.username else f"***@{host}"
    return urlunsplit(parts._replace(netloc=netloc))

def canonical_dataset(url: str) -> str:
    """A dataset's stable identifier: its URL, with local paths made absolute and real
    (:func:`dpdist.data.validation.canonical_location`; the ledger applies it to every path).

    The identifier is the location of the data, never a free name: two names for the same
    store would otherwise be two budgets. A declared name is kept beside it as a label
    (``dpdist budget`` accepts either).
    """
    return canonical_location(url)
