"""An Airflow DAG that runs a dpdist job file weekly and acts on dpdist's exit codes.

    plan  ->  run

``dpdist plan`` is the gate: it reads no data, and exit code 3 (the ledger would refuse the
job) skips the run instead of failing. ``dpdist run``'s codes then decide:

====  ===============================  =============================================
code  meaning                          Airflow
====  ===============================  =============================================
0     released                         success; the JSON report goes to XCom
3     the ledger refused (budget)      skipped (AirflowSkipException), no retry
2     invalid job                      failed, no retry (AirflowFailException)
4     no private result (budget spent) failed, no retry: a retry would spend again
1     a bug                            failed, no retry: a person must look
5     infrastructure failure           failed and retried (the task's ``retries``)
====  ===============================  =============================================

Put the ledger URL in the environment of the workers (DPDIST_LEDGER), its password in
PGPASSWORD or ~/.pgpass, and object-store credentials in the standard AWS variables.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess

from airflow import DAG
from airflow.exceptions import AirflowFailException, AirflowSkipException
from airflow.operators.python import PythonOperator

JOB_FILE = "/opt/dpdist/jobs/weekly.toml"
DPDIST = "dpdist"


def act_on(command: str, code: int, report: dict) -> dict:
    """Turn a dpdist exit code into Airflow's outcome (raise) or return the JSON report."""
    if code == 0:
        return report
    message = f"dpdist {command} exited {code}: {report.get('error', report)}"
    if code == 3:
        raise AirflowSkipException(message)
    if code == 5:
        raise RuntimeError(message)  # retried by Airflow
    raise AirflowFailException(message)


def dpdist(command: str, job_file: str = JOB_FILE) -> dict:
    proc = subprocess.run([DPDIST, command, job_file, "--json"], capture_output=True, text=True)
    try:
        report = json.loads(proc.stdout) if proc.stdout.strip() else {}
    except json.JSONDecodeError:
        report = {"error": proc.stdout[-2000:]}
    if proc.returncode not in (0,) and "error" not in report:
        report["error"] = proc.stderr[-2000:]
    return act_on(command, proc.returncode, report)


with DAG(
    dag_id="dpdist_weekly_covariance",
    schedule="0 3 * * 1",
    start_date=dt.datetime(2026, 1, 5),
    catchup=False,  # never backfill: every run spends privacy budget
    max_active_runs=1,
    tags=["dpdist", "privacy"],
) as dag:
    plan = PythonOperator(task_id="plan", python_callable=dpdist, op_args=["plan"], retries=2,
                          retry_delay=dt.timedelta(minutes=5))
    run = PythonOperator(task_id="run", python_callable=dpdist, op_args=["run"], retries=3,
                         retry_delay=dt.timedelta(minutes=15))
    plan >> run
