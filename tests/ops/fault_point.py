"""A ``dask worker --preload`` module for the fault tests (``tests/ops/test_faults.py``).

Loaded by every worker of the test cluster, with ``DPDIST_FAULT_DIR`` set. While the file
``$DPDIST_FAULT_DIR/arm`` exists, the first worker of the cluster that starts executing a
task whose key name begins with that file's text claims the fault point (an ``O_EXCL``
file, so exactly one worker does), writes ``fired.json`` (its pid, address and the task's
name) and freezes its event loop: the task is assigned and started but can neither run nor
be reported, so the job is held at a known stage until the test kills a process, or writes
``$DPDIST_FAULT_DIR/thaw`` (or 120 s pass) and the worker carries on. Nothing here sleeps
for a guessed time: the test acts on the files.
"""

from __future__ import annotations

import json
import os
import time

from distributed.diagnostics.plugin import WorkerPlugin

FREEZE_SECONDS = 120.0


class FaultPoint(WorkerPlugin):
    name = "dpdist-fault-point"

    def __init__(self, directory: str):
        self.directory = directory
        self.worker = None

    def setup(self, worker) -> None:
        self.worker = worker

    def transition(self, key, start, finish, **kwargs) -> None:
        if finish != "executing":
            return
        try:
            with open(os.path.join(self.directory, "arm")) as f:
                pattern = f.read().strip()
        except FileNotFoundError:
            return
        name = key[0] if isinstance(key, tuple) else str(key)
        if not pattern or not name.startswith(pattern):
            return
        try:
            os.close(os.open(os.path.join(self.directory, "claimed"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        tmp = os.path.join(self.directory, f".fired-{os.getpid()}")
        with open(tmp, "w") as f:
            json.dump({"pid": os.getpid(), "address": self.worker.address, "key": name}, f)
        os.replace(tmp, os.path.join(self.directory, "fired.json"))
        thaw = os.path.join(self.directory, "thaw")
        deadline = time.monotonic() + FREEZE_SECONDS
        while time.monotonic() < deadline and not os.path.exists(thaw):  # the event loop is held:
            time.sleep(0.05)  # no task of this worker runs or reports


async def dask_setup(worker) -> None:
    await worker.plugin_add(FaultPoint(os.environ["DPDIST_FAULT_DIR"]))
