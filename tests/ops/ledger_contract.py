"""The ledger contract: every backend passes these tests (subclass :class:`LedgerContract` and
give a ``ledger_url`` fixture, as zarr's ``StoreTests`` are subclassed per store)."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from decimal import Decimal

import pytest

from dpdist.exceptions import BudgetExceeded, InfrastructureError, NoPrivateResult, ValidationError
from dpdist.ops.ledger import open_ledger
from dpdist.privacy.budget import ApproxDP
from dpdist.privacy.events import (
    BoundedRangeEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    EpsilonDeltaEvent,
    GaussianEvent,
    LaplaceEvent,
    NoOpEvent,
    SelfComposedEvent,
    ZCDPEvent,
)
from dpdist.privacy.zcdp import ZCDP, cks20_epsilon
from tests.ops.conftest import dpdist_cmd, job_toml

DS = "/data/claims.zarr"

#: A release's events with every event type that has a guarantee, and floats a decimal text rounds.
EVERY_EVENT = (
    ("public radius", NoOpEvent()),
    ("norm", LaplaceEvent(1 / 3)),
    ("mean", GaussianEvent(154.74004560435844)),
    ("count", DiscreteLaplaceEvent(0.1, 3)),
    ("lattice", DiscreteGaussianEvent(7.3e12, 1e-300)),
    ("zcdp step", ZCDPEvent(0.0)),
    ("test", EpsilonDeltaEvent(0.5, 1e-9)),
    ("rows", ComposedEvent((SelfComposedEvent(BoundedRangeEvent(0.010324292632649884), 12), GaussianEvent(2.0)))),
)


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def gdp_epsilon_by_hand(mu: float, delta: float) -> float:
    """Smallest epsilon with Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) <= delta (the
    privacy profile of mu-GDP, Dong, Roth & Su 2019 Corollary 2.13), by bisection with erfc:
    independent of the accountant's root finder."""
    lo, hi = 0.0, 50.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if _phi(-mid / mu + mu / 2) - math.exp(mid) * _phi(-mid / mu - mu / 2) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def cli(capsys, *args: str) -> str:
    """``dpdist ARGS`` in this process (exit code 0 asserted); returns its standard output."""
    from dpdist.cli.main import main

    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def _wait_for(predicate, timeout: float = 120.0, what: str = "condition"):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


FORK_JOBS = """
import json, os, sys, time, traceback
from dpdist.cli.main import build_parser, main
build_parser()  # import every command, and what a run imports lazily, before forking
import distributed, zarr, dpdist.ops.runner, dpdist.data.publish
try:
    import psycopg
except ImportError:
    pass
barrier, job, logs, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
pids = []
for i in range(n):
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(f"{logs}/{i}.out", os.O_WRONLY | os.O_CREAT, 0o644), 1)
        os.dup2(os.open(f"{logs}/{i}.err", os.O_WRONLY | os.O_CREAT, 0o644), 2)
        code = 1
        try:
            while not os.path.exists(barrier):
                time.sleep(0.001)
            code = main(["run", job, "--json"])
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    pids.append(pid)
print("ready", flush=True)
codes = {i: os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for i, pid in enumerate(pids)}
print(json.dumps(codes))
"""


class LedgerContract:
    """Semantics of reserve/commit/refund/history/remaining, the same on every backend."""

    @pytest.fixture
    def ledger(self, ledger_url):
        with open_ledger(ledger_url) as led:
            yield led

    # -- budgets and refusals ---------------------------------------------------------------
    def test_reserve_without_a_budget_is_refused_and_recorded(self, ledger):
        with pytest.raises(BudgetExceeded, match="no privacy budget"):
            ledger.reserve(DS, ApproxDP(0.1, 1e-8), job="j")
        [entry] = ledger.history(DS)
        assert entry.state == "refused" and entry.job == "j"

    def test_decimal_budget_admits_exactly_its_share(self, ledger):
        # 3 x 0.1 > 0.3 in binary floating point; the ledger counts the decimals written
        ledger.set_budget(DS, ApproxDP(0.3, 1e-6))
        for _ in range(3):
            ledger.reserve(DS, ApproxDP(0.1, 1e-7)).commit(output="o", checksum="c")
        with pytest.raises(BudgetExceeded, match="exceed"):
            ledger.reserve(DS, ApproxDP(0.1, 1e-7))
        left = ledger.remaining(DS)
        assert left.epsilon == Decimal("0.3") and left.delta == Decimal("3e-7")
        rem = left.remaining()
        assert (Decimal(rem["epsilon"]), Decimal(rem["delta"])) == (0, Decimal("7e-7"))

    def test_delta_is_a_budget_too(self, ledger):
        ledger.set_budget(DS, ApproxDP(10.0, 1e-6))
        ledger.reserve(DS, ApproxDP(0.1, 6e-7)).commit()
        with pytest.raises(BudgetExceeded, match="delta"):
            ledger.reserve(DS, ApproxDP(0.1, 6e-7))

    def test_open_reservations_count_against_the_budget(self, ledger):
        ledger.set_budget(DS, ApproxDP(1.0, 1e-6))
        r = ledger.reserve(DS, ApproxDP(0.6, 1e-7))
        with pytest.raises(BudgetExceeded):
            ledger.reserve(DS, ApproxDP(0.6, 1e-7))
        r.refund("test")
        ledger.reserve(DS, ApproxDP(0.6, 1e-7))  # refunded budget is available again

    # -- schema versions ----------------------------------------------------------------------
    def _as_stored(self, ledger, sql: str, params=()) -> None:
        with ledger._transaction(lock=True) as cur:
            ledger._exec(cur, sql, params)

    def test_a_version_1_ledger_is_renamed_on_open(self, ledger, ledger_url):
        """Version 1 stored a reservation returned unspent as state "released" (the word a
        spent charge uses for its published outcome); opening it renames the state and the
        outcome in place, and the budget reads the same."""
        ledger.set_budget(DS, ApproxDP(1.0, 1e-6))
        ledger.reserve(DS, ApproxDP(0.25, 1e-7), job="spent").commit(output="o", checksum="c")
        back = ledger.reserve(DS, ApproxDP(0.5, 1e-7), job="back").refund("scheduler unreachable")
        before = ledger.remaining(DS).remaining()
        self._as_stored(ledger, "UPDATE dpdist_entries SET state = 'released', outcome = 'released-unspent' "
                                "WHERE id = ?", (back.id,))
        self._as_stored(ledger, "UPDATE dpdist_meta SET value = '1' WHERE key = 'schema'")
        with open_ledger(ledger_url) as reopened:
            states = [(e.job, e.state, e.outcome) for e in reopened.history(DS)]
            assert states == [(None, "budget-set", None), ("spent", "committed", "released"),
                              ("back", "refunded", "refunded-unspent")]
            assert reopened.remaining(DS).remaining() == before
            with reopened._transaction(lock=False) as cur:
                version = reopened._exec(cur, "SELECT value FROM dpdist_meta WHERE key = 'schema'").fetchone()[0]
            assert version == "2"

    def test_a_ledger_of_a_newer_schema_is_refused_unchanged(self, ledger, ledger_url):
        ledger.set_budget(DS, ApproxDP(1.0, 1e-6))
        self._as_stored(ledger, "UPDATE dpdist_meta SET value = '3' WHERE key = 'schema'")
        with pytest.raises(ValidationError, match="schema version 3, newer"):
            open_ledger(ledger_url)
        with ledger._transaction(lock=False) as cur:
            assert ledger._exec(cur, "SELECT value FROM dpdist_meta WHERE key = 'schema'").fetchone()[0] == "3"

    def test_commit_records_output_and_checksum(self, ledger):
        ledger.set_budget(DS, ApproxDP(1.0, 1e-6))
        r = ledger.reserve(DS, ApproxDP(0.25, 1e-7), job="weekly", output="s3://b/out.zarr")
        assert r.entry.state == "reserved" and r.entry.finished is None
        e = r.commit(output="s3://b/out.zarr", checksum="sha256:ab")
        assert (e.state, e.output, e.checksum, e.outcome) == ("committed", "s3://b/out.zarr", "sha256:ab", "released")
        assert e.finished is not None
        with pytest.raises(ValidationError, match="committed, not reserved"):
            ledger.commit(r.id)
        with pytest.raises(ValidationError, match="not open"):
            ledger.refund(r.id, reason="late")

    def test_commit_cannot_spend_more_than_reserved(self, ledger):
        ledger.set_budget(DS, ApproxDP(1.0, 1e-6))
        r = ledger.reserve(DS, ApproxDP(0.25, 1e-7))
        with pytest.raises(ValidationError, match="exceeds the reservation"):
            r.commit(spent=ApproxDP(0.5, 1e-7))
        assert r.commit(spent=ApproxDP(0.1, 1e-7)).cost == {"type": "approx-dp", "epsilon": "0.1", "delta": "1E-7"}

    def test_history_is_ordered_and_survives_reopening(self, ledger, ledger_url):
        ledger.set_budget(DS, ApproxDP(1.0, 1e-6), name="claims", owner="alice")
        ledger.reserve(DS, ApproxDP(0.5, 1e-7)).commit(output="a", events=(("noise", LaplaceEvent(2.0)),))
        ledger.reserve(DS, ApproxDP(0.25, 1e-7)).refund("scheduler unreachable")
        with open_ledger(ledger_url) as again:
            hist = again.history(DS)
            assert [e.state for e in hist] == ["budget-set", "committed", "refunded"]
            assert [e.seq for e in hist] == sorted(e.seq for e in hist)
            assert hist[1].events == [{"step": "noise", "type": "laplace", "noise_multiplier": 2.0}]
            assert again.lookup("claims") == DS
            assert again.remaining(DS).epsilon == Decimal("0.5")

    # -- the context manager ------------------------------------------------------------------
    @pytest.mark.parametrize("exc, state, outcome", [
        (None, "committed", "released"),
        (ValidationError("bad k"), "refunded", "refunded-unspent"),
        (InfrastructureError("scheduler gone", noise_drawn=False), "refunded", "refunded-unspent"),
        (InfrastructureError("worker lost", noise_drawn=True), "committed", "failed-counted-as-spent"),
        (NoPrivateResult("bottom", stage="norm"), "committed", "no-private-result"),
        (RuntimeError("a bug"), "committed", "failed-counted-as-spent"),
    ])
    def test_charge_resolves_the_reservation(self, ledger, exc, state, outcome):
        ledger.set_budget(DS, ApproxDP(1.0, 1e-6))
        try:
            with ledger.charge(DS, ApproxDP(0.5, 1e-7), job="j"):
                if exc is not None:
                    raise exc
        except type(exc) if exc is not None else ():
            pass
        [entry] = [e for e in ledger.history(DS) if e.state != "budget-set"]
        assert (entry.state, entry.outcome) == (state, outcome)
        expected_left = Decimal("1.0") if state == "refunded" else Decimal("0.5")
        assert Decimal(ledger.remaining(DS).remaining()["epsilon"]) == expected_left

    def test_no_private_result_commits_what_its_release_spent(self, ledger):
        class Rel:
            privacy = ApproxDP(0.2, 5e-8)  # e.g. PrivPCA rejected after its PrivNorm share

        ledger.set_budget(DS, ApproxDP(1.0, 1e-6))
        with pytest.raises(NoPrivateResult):
            with ledger.charge(DS, ApproxDP(0.5, 1e-7)):
                raise NoPrivateResult("bottom", stage="norm", release=Rel())
        assert ledger.remaining(DS).epsilon == Decimal("0.2")

    # -- the releases' events ----------------------------------------------------------------
    def test_a_commit_stores_the_release_events_and_they_read_back_exactly(self, ledger, ledger_url):
        ledger.set_budget(DS, ApproxDP(10.0, 1e-3))
        r = ledger.reserve(DS, ApproxDP(9.0, 1e-4))
        assert r.entry.events == []  # a reservation holds none
        r.commit(output="o", checksum="c", events=EVERY_EVENT)
        with open_ledger(ledger_url) as again:
            [entry] = [e for e in again.history(DS) if e.state == "committed"]
        assert entry.charge.events == EVERY_EVENT
        assert entry.events[1] == {"step": "norm", "type": "laplace", "noise_multiplier": 1 / 3}
        assert entry.to_dict()["events"] == entry.events

    def test_refunds_refusals_and_spending_without_a_release_store_no_events(self, ledger):
        ledger.set_budget(DS, ApproxDP(1.0, 1e-6))
        ledger.reserve(DS, ApproxDP(0.5, 1e-7)).refund("scheduler unreachable")
        with pytest.raises(BudgetExceeded):
            ledger.reserve(DS, ApproxDP(2.0, 1e-7))
        with pytest.raises(RuntimeError):
            with ledger.charge(DS, ApproxDP(0.5, 1e-7)):
                raise RuntimeError("a failure after the noise")
        entries = [e for e in ledger.history(DS) if e.state != "budget-set"]
        assert [(e.state, e.events) for e in entries] == [("refunded", []), ("refused", []), ("committed", [])]
        spent = ledger.remaining(DS)  # the failure counts its reserved cost, by the stated rule
        assert (spent.epsilon, spent.delta, spent.accounted_by) == (Decimal("0.5"), Decimal("1E-7"), "")

    def test_events_must_be_labelled_events(self, ledger):
        ledger.set_budget(DS, ApproxDP(1.0, 1e-6))
        r = ledger.reserve(DS, ApproxDP(0.5, 1e-7))
        with pytest.raises(ValidationError, match="must be \\(label, Event\\) pairs"):
            r.commit(events=[GaussianEvent(2.0)])
        assert r.open and ledger.entry(r.id).state == "reserved"  # nothing changed

    def test_gaussian_releases_compose_as_one_gaussian_mechanism(self, ledger):
        """Charges of (1, 1e-6) whose releases ran one Gaussian mechanism of noise multiplier 5
        (mu = 0.2, itself (0.834, 1e-6)-DP) on a total of (2.6, 1e-5). By their stated costs two
        fit. Their events compose exactly to one Gaussian of mu = sqrt(k) 0.2 (GDP), so the
        fifth reservation fits: 1 + eps_GDP(0.4, 1e-5 - 1e-6) = 2.565 <= 2.6, where zCDP
        (rho = 4 x 0.02, CKS20) would need 2.703; the sixth does not: 1 + eps(0.447, 9e-6)."""
        cost, events = ApproxDP(1.0, 1e-6), (("covariance", GaussianEvent(5.0)),)
        for ds, with_events in (("/data/plain.zarr", False), (DS, True)):
            ledger.set_budget(ds, ApproxDP(2.6, 1e-5))
            admitted = 0
            while True:
                try:
                    r = ledger.reserve(ds, cost)
                except BudgetExceeded:
                    break
                admitted += 1
                if admitted == 5:
                    open_fifth = ledger.remaining(ds)
                r.commit(events=events if with_events else ())
            assert admitted == (5 if with_events else 2)
        # the fifth reservation's check, by hand: its stated 1.0 plus the four releases' GDP at 9e-6
        by_hand = 1.0 + gdp_epsilon_by_hand(0.4, 9e-6)
        assert by_hand == pytest.approx(2.5651570369, abs=1e-9)
        assert open_fifth.accounted_by == "gdp" and open_fifth.delta_for_events == Decimal("0.000009")
        assert by_hand <= float(open_fifth.epsilon) <= by_hand * (1 + 1e-9)  # rounded up, never down
        assert 1.0 + cks20_epsilon(0.08, 9e-6) > 2.6  # zCDP alone would have refused it
        spent = ledger.remaining(DS)  # five releases, all the delta: eps_GDP(sqrt(5) 0.2, 1e-5)
        five = gdp_epsilon_by_hand(math.sqrt(5) * 0.2, 1e-5)
        assert spent.fits and five <= float(spent.epsilon) <= five * (1 + 1e-9)
        assert spent.to_dict()["spent"]["events_accounted_by"] == "gdp"

    def test_events_in_another_form_count_by_the_stated_cost(self, ledger):
        """An entry whose events are not labelled typed events (an older writer's free-form
        list) counts by its cost alone."""
        ledger.set_budget(DS, ApproxDP(1.0, 1e-6))
        r = ledger.reserve(DS, ApproxDP(0.5, 1e-7))
        r.commit(events=(("covariance", GaussianEvent(50.0)),))
        assert ledger.remaining(DS).accounted_by == "gdp"
        with ledger._transaction(lock=True) as cur:
            ledger._exec(cur, "UPDATE dpdist_entries SET events = ? WHERE id = ?",
                         ('[{"kind": "laplace", "scale": 0.5}]', r.id))
        assert ledger.entry(r.id).charge.events == ()
        spent = ledger.remaining(DS)
        assert (spent.epsilon, spent.delta, spent.accounted_by) == (Decimal("0.5"), Decimal("1E-7"), "")

    # -- zCDP --------------------------------------------------------------------------------
    def test_rho_budget_adds_rhos_and_counts_pure_dp_as_eps_squared_over_2(self, ledger):
        ledger.set_budget(DS, ZCDP(0.5))
        ledger.reserve(DS, ZCDP(0.3)).commit()
        ledger.reserve(DS, ApproxDP(0.6, 0.0)).commit()  # 0.18
        assert ledger.remaining(DS).rho == Decimal("0.48")
        with pytest.raises(BudgetExceeded):
            ledger.reserve(DS, ZCDP(0.03))
        with pytest.raises(ValidationError, match="cannot be charged against a zCDP"):
            ledger.reserve(DS, ApproxDP(0.01, 1e-9))
        assert len(ledger.history(DS)) == 4  # the invalid charge left no entry

    def test_zcdp_charges_on_an_approx_budget_are_converted_at_the_end(self, ledger):
        # one (0.5, 1e-7) charge and two zCDP charges of rho 0.01: the rhos add to 0.02 and
        # are converted once at the delta left, 1e-6 - 1e-7 (CKS20)
        eps_z = cks20_epsilon(0.02, 9e-7)
        ledger.set_budget(DS, ApproxDP(0.5 + eps_z + 1e-9, 1e-6))
        ledger.reserve(DS, ApproxDP(0.5, 1e-7)).commit()
        ledger.reserve(DS, ZCDP(0.01)).commit()
        ledger.reserve(DS, ZCDP(0.01)).commit()
        spent = ledger.remaining(DS)
        assert spent.fits and spent.zcdp_rho == Decimal("0.02")
        # converting each rho separately would need 2 * eps(0.01) > eps(0.02): the rule composes first
        assert 2 * cks20_epsilon(0.01, 4.5e-7) > eps_z
        with pytest.raises(BudgetExceeded):
            ledger.reserve(DS, ZCDP(1e-6))

    def test_a_total_below_what_is_spent_is_refused_unless_forced(self, ledger):
        ledger.set_budget(DS, ApproxDP(1.0, 1e-6), name="claims", owner="alice")
        ledger.reserve(DS, ApproxDP(0.6, 1e-8)).commit(output="o", checksum="c")
        ledger.reserve(DS, ApproxDP(0.2, 1e-8))  # open: counts too
        with pytest.raises(ValidationError, match="below what its committed and open charges already spend"):
            ledger.set_budget(DS, ApproxDP(0.7, 1e-6))
        assert ledger.total(DS) == ApproxDP(1.0, 1e-6)
        assert [e.state for e in ledger.history(DS)] == ["budget-set", "committed", "reserved"]
        ledger.set_budget(DS, ApproxDP(0.8, 1e-6))  # exactly what is spent: allowed
        ledger.set_budget(DS, ApproxDP(0.5, 1e-6), force=True)
        assert ledger.total(DS) == ApproxDP(0.5, 1e-6)
        [info] = ledger.datasets()
        assert (info["name"], info["owner"]) == ("claims", "alice")  # kept when not given
        with pytest.raises(BudgetExceeded):
            ledger.reserve(DS, ApproxDP(0.01, 1e-9))

    def test_budget_kind_change_is_refused_when_charges_do_not_fit_the_kind(self, ledger):
        ledger.set_budget(DS, ApproxDP(1.0, 1e-6))
        ledger.reserve(DS, ApproxDP(0.1, 1e-7)).commit()
        with pytest.raises(ValidationError, match="zCDP"):
            ledger.set_budget(DS, ZCDP(1.0))

    # -- real processes ------------------------------------------------------------------------
    def test_twenty_concurrent_jobs_on_a_budget_for_ten(self, ledger, ledger_url, tiny_dataset, tmp_path):
        """20 `dpdist run` processes released together on a budget that admits 10."""
        ledger.set_budget(tiny_dataset, ApproxDP(1.0, 1e-6))
        out = tmp_path / "out"
        out.mkdir()
        job = tmp_path / "job.toml"
        job.write_text(job_toml(tiny_dataset, f"{out}/cov-{{run}}.zarr", epsilon=0.1, delta=1e-8,
                                ledger=ledger_url))
        barrier = tmp_path / "go"
        logs = tmp_path / "logs"
        logs.mkdir()
        # One interpreter imports dpdist once and forks 20 job processes (importing it 20 times
        # costs ~40 s of CPU on 2 cores); each waits at the barrier, then runs the CLI's
        # `dpdist run JOB --json` with its own ledger connection: the 20 reservations race.
        helper = subprocess.Popen([sys.executable, "-c", FORK_JOBS, str(barrier), str(job), str(logs), "20"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert helper.stdout.readline().strip() == "ready"
            barrier.write_text("go")
            out_, err_ = helper.communicate(timeout=600)
        finally:
            if helper.poll() is None:
                helper.kill()
        assert helper.returncode == 0, err_[-3000:]
        exit_codes = json.loads(out_)
        results = [((logs / f"{i}.out").read_text(), (logs / f"{i}.err").read_text(), exit_codes[str(i)])
                   for i in range(20)]
        codes = sorted(rc for _, _, rc in results)
        n_ok = codes.count(0)
        # by their stated costs exactly 10 fit; a reservation made after earlier jobs committed
        # their releases' events may fit too (those events compose to less than 10 x 0.1)
        assert n_ok >= 10 and codes == [0] * n_ok + [3] * (20 - n_ok), [
            err[-2000:] for _, err, rc in results if rc not in (0, 3)]
        statuses = sorted(json.loads(out_)["status"] for out_, _, _ in results)
        assert statuses == ["refused"] * (20 - n_ok) + ["released"] * n_ok
        hist = ledger.history(tiny_dataset)
        states = sorted(e.state for e in hist)
        assert states == ["budget-set"] + ["committed"] * n_ok + ["refused"] * (20 - n_ok)  # no record lost
        admitted = sorted((e for e in hist if e.state == "committed"), key=lambda e: e.seq)
        for e in hist:  # a refusal comes only once 10 charges count: no reservation was lost in the race
            if e.state == "refused":
                assert sum(a.seq < e.seq for a in admitted) >= 10
        for j, e in enumerate(admitted[10:], start=10):  # beyond 10 only by events committed before it
            assert any(a.finished < e.created for a in admitted[:j]), (j, e)
        spent = ledger.remaining(tiny_dataset)
        assert spent.fits and spent.epsilon <= Decimal("1.0")
        from dpdist.data.publish import result_checksum

        committed = [e for e in hist if e.state == "committed"]
        assert sorted(os.listdir(out)) == sorted(os.path.basename(e.output) for e in committed)
        for e in committed:  # every published result has its committed entry and checksum
            assert result_checksum(e.output) == e.checksum

    def test_killed_job_is_reported_and_recovered(self, ledger, ledger_url, tiny_dataset, tmp_path, capsys):
        """Two jobs killed with SIGKILL between reserve and commit: a `dpdist run` stuck before
        reading data (its scheduler never answers) and a Python job killed while running."""
        ledger.set_budget(tiny_dataset, ApproxDP(1.0, 1e-6))
        silent = socket.socket()  # accepts TCP connections, never speaks: the client waits
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        job = tmp_path / "job.toml"
        job.write_text(job_toml(tiny_dataset, str(tmp_path / "never.zarr"), epsilon=0.2, ledger=ledger_url,
                                scheduler=f"tcp://127.0.0.1:{silent.getsockname()[1]}",
                                extra="timeout = 600\n"))
        waiting = subprocess.Popen(dpdist_cmd("run", str(job)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        running_script = (
            "import sys, time\nfrom dpdist.ops.ledger import open_ledger\nfrom dpdist.privacy.budget import ApproxDP\n"
            "led = open_ledger(sys.argv[1])\n"
            "with led.charge(sys.argv[2], ApproxDP(0.3, 1e-8), job='python-job') as r:\n"
            "    r.running()\n    print('running', flush=True)\n    time.sleep(600)\n")
        running = subprocess.Popen([sys.executable, "-c", running_script, ledger_url, tiny_dataset],
                                   stdout=subprocess.PIPE, text=True)
        try:
            assert running.stdout.readline().strip() == "running"
            _wait_for(lambda: len(ledger.open_reservations(tiny_dataset)) == 2, what="two reservations")
            for p in (waiting, running):
                os.kill(p.pid, signal.SIGKILL)
                p.wait(timeout=30)
        finally:
            for p in (waiting, running):
                if p.poll() is None:
                    p.kill()
            silent.close()
        status = json.loads(cli(capsys, "budget", "show", tiny_dataset, "--ledger", ledger_url, "--json"))
        assert sorted((r["job"], r["stage"], r["process"]) for r in status["open_reservations"]) == [
            ("python-job", "running", "gone"), ("tiny-job", "reserved", "gone")]
        assert Decimal(status["remaining"]["epsilon"]) == Decimal("0.5")  # both still count while open
        text = cli(capsys, "budget", "show", tiny_dataset, "--ledger", ledger_url)
        assert "STALE" in text and f"dpdist budget recover {tiny_dataset}" in text

        rec = cli(capsys, "budget", "recover", tiny_dataset, "--ledger", ledger_url, "--json")
        done = {e["job"]: (e["state"], e["outcome"]) for e in json.loads(rec)}
        assert done == {"tiny-job": ("refunded", "refunded-unspent"),  # never read data
                        "python-job": ("committed", "recovered-as-spent")}  # may have drawn noise
        assert ledger.open_reservations(tiny_dataset) == []
        assert Decimal(ledger.remaining(tiny_dataset).remaining()["epsilon"]) == Decimal("0.7")
        assert not os.path.exists(tmp_path / "never.zarr")

    def test_recover_leaves_live_jobs_alone(self, ledger):
        ledger.set_budget(DS, ApproxDP(1.0, 1e-6))
        r = ledger.reserve(DS, ApproxDP(0.1, 1e-8))  # this process: alive
        assert ledger.recover(DS) == []
        assert ledger.recover(DS, older_than=3600) == []
        assert r.open and ledger.open_reservations(DS)[0].process_state() == "alive"

    def _stale_reservation(self, ledger, ledger_url):
        """A reservation made by a job through its own connection, recorded as of another host
        (so only ``older_than`` makes it stale); returns the job's reservation and connection."""
        job_ledger = open_ledger(ledger_url)
        r = job_ledger.reserve(DS, ApproxDP(0.1, 1e-8), job="other-host-job")
        with ledger._transaction(lock=True) as cur:
            ledger._exec(cur, "UPDATE dpdist_entries SET host = ? WHERE id = ?", ("elsewhere.invalid", r.id))
        return r, job_ledger

    def test_recover_counts_a_job_that_starts_running_after_the_read_as_spent(self, ledger, ledger_url, monkeypatch):
        """Recovery reads the open reservations, then resolves each. A job on another host that
        marks itself running in between has read data and may have drawn noise: it must end
        committed as spent, never refunded."""
        ledger.set_budget(DS, ApproxDP(1.0, 1e-6))
        r, job_ledger = self._stale_reservation(ledger, ledger_url)
        read = ledger.open_reservations

        def read_then_the_job_marks_running(dataset=None):
            found = read(dataset)
            assert [e.stage for e in found] == ["reserved"]  # what recovery saw
            r.running()  # the job, on its own connection, between the read and the update
            return found

        monkeypatch.setattr(ledger, "open_reservations", read_then_the_job_marks_running)
        try:
            [done] = ledger.recover(DS, older_than=0)
            assert (done.id, done.state, done.outcome) == (r.id, "committed", "recovered-as-spent")
            [entry] = [e for e in ledger.history(DS) if e.id == r.id]
            assert (entry.state, entry.stage) == ("committed", "running")
            assert Decimal(ledger.remaining(DS).remaining()["epsilon"]) == Decimal("0.9")
            with pytest.raises(ValidationError, match="committed, not reserved"):
                r.commit(output="o", checksum="c")  # the job's own commit finds it resolved
        finally:
            job_ledger.close()

    def test_recover_releases_a_stale_job_that_never_ran(self, ledger, ledger_url):
        ledger.set_budget(DS, ApproxDP(1.0, 1e-6))
        r, job_ledger = self._stale_reservation(ledger, ledger_url)
        try:
            [done] = ledger.recover(DS, older_than=0)
            assert (done.id, done.state, done.outcome) == (r.id, "refunded", "refunded-unspent")
            assert Decimal(ledger.remaining(DS).remaining()["epsilon"]) == Decimal("1.0")
        finally:
            job_ledger.close()

    def test_recover_skips_a_reservation_its_job_resolved_after_the_read(self, ledger, ledger_url, monkeypatch):
        ledger.set_budget(DS, ApproxDP(1.0, 1e-6))
        r, job_ledger = self._stale_reservation(ledger, ledger_url)
        read = ledger.open_reservations

        def read_then_the_job_commits(dataset=None):
            found = read(dataset)
            r.running()
            r.commit(output="o", checksum="c")
            return found

        monkeypatch.setattr(ledger, "open_reservations", read_then_the_job_commits)
        try:
            assert ledger.recover(DS, older_than=0) == []
            [entry] = [e for e in ledger.history(DS) if e.id == r.id]
            assert (entry.state, entry.outcome, entry.output) == ("committed", "released", "o")
        finally:
            job_ledger.close()
