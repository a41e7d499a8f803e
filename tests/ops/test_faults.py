"""Faults during ``dpdist run JOB`` on a real cluster: a worker killed with SIGKILL mid-fit (with a
spare worker, and as the only worker), a scheduler that dies mid-job, a full disk and an
unwritable output location.

Every test runs ``dpdist run JOB --json`` as a subprocess against a real ``dask scheduler`` and
``dask worker`` processes on 127.0.0.1 (free ports), and checks the exit code, what is at the
output location, and the ledger's entries. Faults strike at a controlled point, not after a
guessed delay: the workers load ``tests/ops/fault_point.py``, which holds the first worker that
starts a task of a named stage (the fit's first pass, or its noise-drawing stage) and says so
in a file; the test then kills the process it names (found in the scheduler's worker info).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dpdist.data.publish import result_checksum
from dpdist.data.results import load_result
from dpdist.ops.job import load_job
from dpdist.ops.ledger import open_ledger
from dpdist.privacy.budget import ApproxDP
from tests.clusters import dask_cli, free_port, stop_process_groups, user_env
from tests.ops.conftest import dpdist_cmd, job_toml

pytestmark = pytest.mark.slow

FAULT_POINT = Path(__file__).with_name("fault_point.py")
#: Task name prefixes of the stages the faults strike (see the module docstring).
PRIVCOV_NOISE = "_symmetric_task"  # PrivCov's per-row noisy top-k on a symmetric tile pair: draws the noise
FRIENDLY_PASS1 = "chunk_group_moments"  # FriendlyCore's first pass (SpectralNorm), one task per row chunk: draws none

# rows taken as mean-zero: no private mean (whose noise is drawn before FriendlyCore's first pass)
SPECTRAL_NORM = ('[estimator]\nname = "SpectralNorm"\n[estimator.params]\nk = 2\nepsilon = 1.0\ndelta = 1e-6\n'
                 "gap = 0.5\nsigma = 2.3\nn_batches = 20\ntau = 0.6\nassume_centered = true\n")


def _worker_pids(dask_scheduler) -> dict:
    """Run on the scheduler: the pid each worker reported when it registered."""
    return {address: ws.pid for address, ws in dask_scheduler.workers.items()}


class Cluster:
    """A ``dask scheduler`` on 127.0.0.1 and ``dask worker`` processes loading the fault point,
    each worker (with its nanny) in its own process group; everything stopped by :meth:`close`."""

    def __init__(self, root: Path):
        from distributed import Client

        self.root = root
        self.fault_dir = root / "fault"
        self.fault_dir.mkdir(parents=True)
        self.address = f"tcp://127.0.0.1:{free_port()}"
        self.log = open(root / "cluster.log", "a")
        self.env = user_env(DPDIST_FAULT_DIR=str(self.fault_dir))
        self.scheduler = subprocess.Popen(
            [*dask_cli(), "scheduler", "--host", "127.0.0.1", "--port", self.address.rsplit(":", 1)[1],
             "--no-dashboard"], stdout=self.log, stderr=self.log, env=self.env, cwd=root, start_new_session=True)
        self.workers: list[subprocess.Popen] = []
        self.client = None
        deadline = time.monotonic() + 60
        while self.client is None:
            try:
                self.client = Client(self.address, timeout=2, set_as_default=False)
            except OSError:
                if time.monotonic() > deadline or self.scheduler.poll() is not None:
                    self.close()
                    raise
                time.sleep(0.2)

    def workers_alive(self, n: int, *, wait: bool = True) -> None:
        """Exactly ``n`` workers (started or stopped as needed), connected unless ``wait`` is
        False (then a job may start while they do; :meth:`wait_workers` waits)."""
        self.workers = [p for p in self.workers if p.poll() is None]
        while len(self.workers) > n:
            stop_process_groups([self.workers.pop()])
        while len(self.workers) < n:
            self.workers.append(subprocess.Popen(
                [*dask_cli(), "worker", self.address, "--nworkers", "1", "--nthreads", "1", "--no-dashboard",
                 "--preload", str(FAULT_POINT), "--local-directory", str(self.root / "worker-space")],
                stdout=self.log, stderr=self.log, env=self.env, cwd=self.root, start_new_session=True))
        if wait:
            self.wait_workers(n)

    def wait_workers(self, n: int) -> None:
        deadline = time.monotonic() + 60
        while len(self.client.scheduler_info()["workers"]) != n:
            assert time.monotonic() < deadline, f"the cluster did not reach {n} workers"
            time.sleep(0.1)

    def arm(self, stage: str | None) -> None:
        """Hold the first worker that starts a task of ``stage`` (None: disarm)."""
        for name in ("arm", "claimed", "fired.json", "thaw"):
            with contextlib.suppress(FileNotFoundError):
                (self.fault_dir / name).unlink()
        if stage is not None:
            (self.fault_dir / "arm").write_text(stage)

    def fired(self, job: subprocess.Popen, timeout: float = 120) -> dict:
        """The held worker's note, once the job reaches the armed stage."""
        path = self.fault_dir / "fired.json"
        deadline = time.monotonic() + timeout
        while not path.exists():
            if job.poll() is not None:
                out, err = job.communicate()
                pytest.fail(f"the job ended (exit {job.returncode}) before the fault point: {err[-3000:]}")
            assert time.monotonic() < deadline, "the job never reached the fault point"
            time.sleep(0.05)
        return json.loads(path.read_text())

    def thaw(self) -> None:
        """Release the held worker and wait until every worker's event loop answers again (the
        next test's :meth:`arm` removes the thaw file: a worker still polling for it would stay
        held, and the next job would never reach its fault point)."""
        (self.fault_dir / "thaw").write_text("")
        if any(p.poll() is None for p in self.workers):
            with contextlib.suppress(Exception):  # a killed worker does not answer
                self.client.run(os.getpid, wait=True)

    def kill_worker(self, address: str) -> int:
        """SIGKILL the worker at ``address`` and its nanny (so it is not restarted); returns its pid."""
        pid = self.client.run_on_scheduler(_worker_pids)[address]
        group = os.getpgid(pid)
        assert group in {p.pid for p in self.workers}, "not a worker this test started"
        os.killpg(group, signal.SIGKILL)
        return pid

    def kill_scheduler(self) -> None:
        self.client.close()
        self.client = None
        os.killpg(self.scheduler.pid, signal.SIGKILL)
        self.scheduler.wait(timeout=30)

    def close(self) -> None:
        self.thaw()  # a held worker resumes, so that it can stop
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close()
        stop_process_groups([*self.workers, self.scheduler])
        self.log.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("faults"))
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def setup(tmp_path, tiny_dataset):
    """A SQLite ledger giving the tiny dataset a budget, an empty output directory, and a
    maker of job files."""
    out = tmp_path / "out"
    out.mkdir()
    ledger = str(tmp_path / "ledger.sqlite")
    with open_ledger(ledger) as led:
        led.set_budget(tiny_dataset, ApproxDP(2.0, 1e-5))

    def job(address: str, *, estimator: str | None = None, output: str | None = None, ledger_url: str = ledger,
            seed: int | None = None) -> str:
        text = job_toml(tiny_dataset, output or f"{out}/release-{{run}}.zarr", ledger=ledger_url,
                        scheduler=address, estimator=estimator)
        if seed is not None:  # a seeded release, to compare a disturbed run with an undisturbed one
            text = text.replace("sigma = 1.0\n", f"sigma = 1.0\nrandom_state = {seed}\n", 1)
            text = text.replace("\n[scheduler]\n", "\npublish_not_private = true\n[scheduler]\n", 1)
        path = tmp_path / f"job-{len(list(tmp_path.glob('job-*')))}.toml"
        path.write_text(text)
        return str(path)

    return job, ledger, out, tiny_dataset


def start_run(job: str, *, wrapper: list[str] | None = None, no_workers_timeout: float = 30) -> subprocess.Popen:
    """``dpdist run JOB --json`` as a scheduler would start it (the tests that lose every worker
    set ``no_workers_timeout`` to 2 s; 30 s, the default, lets workers start with the job)."""
    env = {**os.environ, "DASK_DPDIST__NO_WORKERS_TIMEOUT": f"{no_workers_timeout:g}"}
    return subprocess.Popen([*(wrapper or []), *dpdist_cmd("run", job, "--json")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def finish(proc: subprocess.Popen, timeout: float = 180) -> tuple[int, dict, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    try:
        return proc.returncode, json.loads(out), err  # --json: stdout holds one JSON document
    except ValueError:
        pytest.fail(f"dpdist run (exit {proc.returncode}) printed no JSON document: {out[-1000:]} {err[-3000:]}")


def charges(ledger: str, dataset: str) -> list:
    with open_ledger(ledger) as led:
        return [e for e in led.history(dataset) if e.state != "budget-set"]


def everything_under(path: Path) -> list[str]:
    """Every file and directory under ``path``, hidden ones (staging, probes) included."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# -- a worker killed with SIGKILL mid-fit ------------------------------------------------------


def test_a_worker_killed_mid_fit_with_a_spare_gives_the_undisturbed_seeded_release(cluster, setup):
    """The worker that started PrivCov's noise stage is killed (with its nanny); dask recomputes
    what it held (the second-moment tree and the noise task) on the spare worker, and the
    job releases exactly the undisturbed seeded release: the noise of entry (i, j) is a pure
    function of (seed, i, j) and the sums' order is fixed by the graph, not by which worker
    runs a task, so the comparison is bitwise."""
    make, ledger, out, dataset = setup
    cluster.workers_alive(2, wait=False)  # they start with the job
    job = make(cluster.address, seed=7)
    cluster.arm(PRIVCOV_NOISE)
    proc = start_run(job)
    held = cluster.fired(proc)
    assert held["key"].startswith(PRIVCOV_NOISE)
    cluster.wait_workers(2)  # the spare is there
    killed = cluster.kill_worker(held["address"])
    assert killed == held["pid"]
    code, result, err = finish(proc)
    assert code == 0, err[-3000:]
    assert cluster.client.scheduler_info()["workers"].keys().isdisjoint({held["address"]})

    reference = load_job(job).build_estimator("synchronous").fit(dataset).release_.values  # undisturbed
    released = load_result(result["output"]).values
    assert released["covariance"].nnz == reference["covariance"].nnz
    assert np.array_equal(released["covariance"].toarray(), reference["covariance"].toarray())
    for name in ("selected", "selected_values", "diagonal"):
        assert np.array_equal(released[name], reference[name]), name
    [entry] = charges(ledger, dataset)
    assert (entry.state, entry.outcome, entry.output) == ("committed", "released", result["output"])
    assert entry.checksum == result["checksum"] == result_checksum(result["output"])


# -- storage: an unwritable output location, a full disk ---------------------------------------


def test_an_output_location_under_a_file_is_refused_before_any_reservation(cluster, setup, tmp_path):
    """A path under a regular file cannot be created, whoever asks (root included, unlike a
    chmod'ed directory): exit 2 before the ledger is touched, nothing written."""
    make, ledger, out, dataset = setup
    (tmp_path / "a-file").write_text("not a directory")
    proc = start_run(make(cluster.address, output=f"{tmp_path}/a-file/release.zarr"))
    code, result, err = finish(proc)
    assert code == 2 and result["status"] == "invalid", err[-3000:]
    assert "a-file" in result["error"]["message"]
    assert charges(ledger, dataset) == [] and everything_under(out) == []


def test_an_output_location_lost_during_the_fit_leaves_nothing_and_counts_as_spent(cluster, setup):
    """The output directory is replaced by a file while the fit is held in its noise stage
    (root cannot write there either). The fit completes, writing the result fails: exit 5,
    nothing at the target, and the reservation counts as spent because noise was drawn."""
    make, ledger, out, dataset = setup
    cluster.workers_alive(1)
    job = make(cluster.address)
    cluster.arm(PRIVCOV_NOISE)
    proc = start_run(job)
    cluster.fired(proc)
    out.rmdir()
    out.write_text("the output directory is gone")
    cluster.thaw()
    code, result, err = finish(proc)
    assert code == 5, err[-3000:]
    assert result["status"] == "infrastructure-failure" and "budget counts as spent" in result["error"]["message"]
    assert out.read_text() == "the output directory is gone"
    [entry] = charges(ledger, dataset)
    assert (entry.state, entry.outcome, entry.checksum) == ("committed", "failed-counted-as-spent", None)


def test_a_full_disk_while_writing_the_result_leaves_no_partial_output(cluster, setup, pg_ledger_url):
    """A full disk, simulated for the job process alone with RLIMIT_FSIZE (writes past the
    limit fail with EFBIG, as they would with ENOSPC; works for root, needs no mount). The
    ledger is in PostgreSQL, so the job writes no local file but its result."""
    make, _, out, dataset = setup
    with open_ledger(pg_ledger_url) as led:
        led.set_budget(dataset, ApproxDP(2.0, 1e-5))
    cluster.workers_alive(1)
    cluster.arm(None)
    limit = 512  # bytes per file: the result's metadata documents are larger
    wrapper = [sys.executable, "-c",
               "import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
               f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit})); os.execv(sys.argv[1], sys.argv[1:])"]
    code, result, err = finish(start_run(make(cluster.address, ledger_url=pg_ledger_url), wrapper=wrapper))
    assert code == 5, err[-3000:]
    message = result["error"]["message"]
    assert result["status"] == "infrastructure-failure" and "File too large" in message
    assert "budget counts as spent" in message
    assert everything_under(out) == []
    [entry] = charges(pg_ledger_url, dataset)
    assert (entry.state, entry.outcome, entry.checksum) == ("committed", "failed-counted-as-spent", None)


# -- SIGTERM (a service stop, an eviction, a preemption) and Ctrl-C in the noise stage ---------


@pytest.mark.parametrize("sig, code, status, what", [
    (signal.SIGTERM, 143, "terminated", "terminated (SIGTERM)"),
    (signal.SIGINT, 130, "interrupted", "interrupted"),
], ids=["SIGTERM", "SIGINT"])
def test_a_signal_in_the_noise_stage_counts_as_spent_and_says_so(cluster, setup, sig, code, status, what):
    """The job is held in PrivCov's noise stage and signalled: it exits at once with the
    signal's code, publishes nothing, commits its reservation as spent, and says so on its one
    stderr line and in the JSON document (entry, spent, noise_drawn)."""
    make, ledger, out, dataset = setup
    cluster.workers_alive(1)
    job = make(cluster.address)
    cluster.arm(PRIVCOV_NOISE)
    proc = start_run(job)
    try:
        cluster.fired(proc)
        proc.send_signal(sig)
        rc, result, err = finish(proc)
    finally:
        cluster.thaw()
    assert rc == code, err[-3000:]
    [entry] = charges(ledger, dataset)
    assert (entry.state, entry.outcome, entry.stage) == ("committed", "failed-counted-as-spent", "running")
    assert err.strip().splitlines() == [
        f"dpdist run: {what}; no result was written; ledger entry {entry.id} committed as spent "
        "(eps=0.1 delta=1e-08): noise may have been drawn"]
    assert (result["status"], result["exit_code"]) == (status, code)
    assert (result["entry"], result["spent"], result["noise_drawn"]) == (entry.id, entry.cost, True)
    assert entry.cost == {"type": "approx-dp", "epsilon": "0.1", "delta": "1E-8"}
    assert everything_under(out) == []


# -- the only worker killed mid-fit (after the storage tests, which use the spare's survivor) --


@pytest.mark.parametrize("stage, spent", [(FRIENDLY_PASS1, False), (PRIVCOV_NOISE, True)],
                         ids=["before-any-noise", "in-the-noise-stage"])
def test_a_job_that_loses_its_only_worker_fails_cleanly(cluster, setup, stage, spent):
    """Exit 5, nothing at the output location, and the ledger follows what the runtime
    reports: refunded when no noise was drawn (killed in FriendlyCore's first pass), counted as
    spent when noise may have been drawn (killed in PrivCov's noise stage)."""
    make, ledger, out, dataset = setup
    cluster.workers_alive(1)
    job = make(cluster.address, estimator=SPECTRAL_NORM if stage == FRIENDLY_PASS1 else None)
    cluster.arm(stage)
    proc = start_run(job, no_workers_timeout=2)
    held = cluster.fired(proc)
    cluster.kill_worker(held["address"])
    code, result, err = finish(proc)
    assert code == 5, err[-3000:]
    message = result["error"]["message"]
    assert result["status"] == "infrastructure-failure" and "no workers for 2 s" in message
    assert everything_under(out) == []
    [entry] = charges(ledger, dataset)
    assert entry.stage == "running"
    if spent:
        # the job's PrivCov centres at a private mean, released by an earlier step of the fit
        assert "noise had been drawn by an earlier step of this fit" in message
        assert (entry.state, entry.outcome, entry.checksum) == ("committed", "failed-counted-as-spent", None)
    else:
        assert "no noise was drawn: nothing was spent" in message
        assert (entry.state, entry.outcome) == ("refunded", "refunded-unspent")


# -- a scheduler that disappears mid-job -------------------------------------------------------


@pytest.mark.parametrize("stage, spent", [(FRIENDLY_PASS1, False), (PRIVCOV_NOISE, True)],
                         ids=["before-any-noise", "in-the-noise-stage"])
def test_a_scheduler_that_dies_mid_job(tmp_path, setup, stage, spent):
    make, ledger, out, dataset = setup
    own = Cluster(tmp_path / "cluster")  # this test kills its scheduler
    try:
        own.workers_alive(1, wait=False)  # it starts with the job
        job = make(own.address, estimator=SPECTRAL_NORM if stage == FRIENDLY_PASS1 else None)
        own.arm(stage)
        proc = start_run(job)
        own.fired(proc)
        own.kill_scheduler()
        code, result, err = finish(proc)
    finally:
        own.close()
    assert code == 5, err[-3000:]
    assert result["status"] == "infrastructure-failure"
    assert everything_under(out) == []
    [entry] = charges(ledger, dataset)
    if spent:
        assert (entry.state, entry.outcome, entry.checksum) == ("committed", "failed-counted-as-spent", None)
    else:
        assert "nothing was spent" in result["error"]["message"]
        assert (entry.state, entry.outcome) == ("refunded", "refunded-unspent")
