"""Where the results of a fit live: a session on one scheduler, and handles to its results."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

from dpdist.engine.runtime import Runtime, open_runtime

__all__ = ["Handle", "Session", "open_session"]


class Handle:
    """A result kept where it was computed: a ``distributed`` future, or a local value."""

    __slots__ = ("_obj",)

    def __init__(self, obj: Any):
        self._obj = obj

    def __repr__(self) -> str:  # never show the value
        return "<dpdist Handle>"

    @property
    def graph_input(self) -> Any:
        """What to pass into a delayed graph (the future, or the local value)."""
        return self._obj


class Session:
    """Runs graphs on one :class:`~dpdist.engine.runtime.Runtime` and keeps their
    non-private results where they were computed.

    Parameters
    ----------
    runtime : Runtime
        The fit's runtime (a ``distributed`` client, or a local dask scheduler), with its
        deadline. Every graph, wait and fetch goes through it: nothing here looks up a
        default client.
    """

    def __init__(self, runtime: Runtime):
        self.runtime = runtime

    @property
    def client(self) -> Any:
        """The ``distributed.Client``, or None for a local scheduler."""
        return self.runtime.client

    def persist(self, obj, *, noised: bool = False) -> Handle:
        """Compute a delayed object once (waiting for it), keeping its result on the cluster."""
        return Handle(self.runtime.persist([obj], noised=noised)[0])

    def persist_all(self, objs: Sequence, *, noised: bool = False) -> list[Handle]:
        """Compute several delayed objects together (one pass over shared inputs), keeping
        each result where it was computed."""
        return [Handle(h) for h in self.runtime.persist(list(objs), noised=noised)]

    def persist_each(self, objs: Sequence, *, noised: bool = False) -> list[Handle]:
        """Persist delayed objects one after the other (each finished before the next starts),
        so that their working memories never add up."""
        return [self.persist(obj, noised=noised) for obj in objs]

    def apply(self, fn: Callable, *args: Any, **kwargs: Any) -> Handle:
        """Run ``fn`` where the handles' values live (handles in ``args`` are resolved there)."""
        args = tuple(a.graph_input if isinstance(a, Handle) else a for a in args)
        return Handle(self.runtime.submit(fn, *args, **kwargs))

    def fetch(self, handle: Handle) -> Any:
        """Bring a (noised, releasable) result back to the caller."""
        return self.runtime.result(handle.graph_input, noised=True)


@contextlib.contextmanager
def open_session(scheduler: Any) -> Iterator[Session]:
    """A :class:`Session` on ``scheduler`` (values and time limit as in
    :func:`dpdist.engine.runtime.open_runtime`)."""
    with open_runtime(scheduler) as runtime:
        yield Session(runtime)
