"""Every file in deploy/ checked against what its tool requires, and the compose topology run
as real processes on 127.0.0.1.

The checks: YAML and TOML parse; job files validate as dpdist jobs; every `dpdist` command
parses with dpdist's own argparse parser and every `dask scheduler|worker` command with
distributed's own click commands; images, ports, service names, volumes and exit codes agree
across files; the SLURM configuration goes through dask-jobqueue's job-script generation.
Docker, Kubernetes, SLURM, systemd and Airflow themselves are not needed.
"""

from __future__ import annotations

import ast
import configparser
import importlib.metadata
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import types

import pytest

yaml = pytest.importorskip("yaml", reason="pyyaml not installed (the test extra)")

from dpdist.cli.main import build_parser  # noqa: E402
from dpdist.ops.job import job_from_dict, load_job  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
IMAGE_COMPOSE = "dpdist:latest"
IMAGE_K8S = "registry.example.com/dpdist:0.1.0"
DEPLOY_ENV = {"DPDIST_DATA": "/data", "DPDIST_RESULTS": "/data/releases", "DPDIST_SCHEDULER": "tcp://s:8786"}


def dpdist_args(argv: list[str]):
    """Parse a `dpdist ...` command line with dpdist's parser (fails the test if it does not)."""
    assert os.path.basename(argv[0]) == "dpdist", argv
    try:
        return build_parser().parse_args(argv[1:])
    except SystemExit as exc:  # argparse's way of refusing (code 0: --help or --version)
        if exc.code != 0:
            pytest.fail(f"not a valid dpdist command line: {argv} ({exc})")
        return None


def dask_context(argv: list[str]):
    """Parse a `dask scheduler|worker ...` command line with distributed's click command."""
    assert argv[0] == "dask", argv
    commands = {e.name: e for e in importlib.metadata.entry_points(group="dask_cli")}
    assert argv[1] in commands, f"`dask {argv[1]}` is not a dask command"
    return commands[argv[1]].load().make_context(f"dask {argv[1]}", list(argv[2:]))


def yaml_docs(path: pathlib.Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def test_every_yaml_and_toml_file_parses(monkeypatch):
    for k, v in DEPLOY_ENV.items():
        monkeypatch.setenv(k, v)
    files = sorted(DEPLOY.rglob("*.y*ml")) + sorted(DEPLOY.rglob("*.toml"))
    assert len(files) >= 6
    for path in files:
        if path.suffix == ".toml":
            doc = tomllib.loads(path.read_text())
            if "estimator" in doc:  # a job file
                job = load_job(path)
                assert job.dataset_url and job.output_url
        else:
            assert yaml_docs(path), path


def test_dockerfile():
    lines = [ln.strip() for ln in (DEPLOY / "Dockerfile").read_text().splitlines()]
    instr = [ln for ln in lines if ln and not ln.startswith("#")]
    joined = "\n".join(instr).replace("\\\n", " ")
    assert re.match(r"FROM python:3\.1[1-9]-slim$", instr[0])
    assert re.search(r'RUN pip install "\.\[[^"]*\bs3\b[^"]*\]"', joined)
    assert re.search(r'RUN pip install "\.\[[^"]*\bpostgres\b[^"]*\]"', joined)
    for src in re.findall(r"^COPY (.+) \S+$", joined, re.M):
        for part in src.split():
            assert (ROOT / part).exists(), f"COPY source {part} missing (build context = repository root)"
    user = [ln.split()[1] for ln in instr if ln.startswith("USER ")]
    assert user and user[-1] not in ("root", "0")
    cmd = [ln for ln in instr if ln.startswith("CMD ")][-1]
    dpdist_args(ast.literal_eval(cmd[4:]))
    run = [ln for ln in instr if ln.startswith("RUN pip install")][0]
    for part in run.split("&&")[1:]:  # the smoke checks after the install
        argv = shlex.split(part)
        (dpdist_args if argv[0] == "dpdist" else lambda a: dask_context(a) if len(a) > 2 else None)(argv)


def _compose():
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def test_compose_file():
    comp = _compose()
    services = comp["services"]
    assert set(services) == {"scheduler", "worker-1", "worker-2", "job"}
    assert (ROOT / services["scheduler"]["build"]["dockerfile"]).exists()
    sched = dask_context(services["scheduler"]["command"])
    port = sched.params["port"]
    for name in ("worker-1", "worker-2"):
        svc = services[name]
        assert svc["image"] == IMAGE_COMPOSE and "scheduler" in svc["depends_on"]
        assert dask_context(svc["command"]).params["scheduler"] == f"tcp://scheduler:{port}"
    job = services["job"]
    assert job["image"] == IMAGE_COMPOSE and job["restart"] == "no"
    assert set(job["depends_on"]) == {"scheduler", "worker-1", "worker-2"}
    assert job["environment"]["DPDIST_SCHEDULER"] == f"tcp://scheduler:{port}"
    args = dpdist_args(job["command"])
    assert args.command == "run"
    for svc in services.values():
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0]
            if src.startswith("."):
                assert (DEPLOY / src).is_dir(), vol
            else:
                assert src in comp["volumes"], vol
    # the job file the job service runs, seen through its bind mount
    host_job = _unmount(job["command"][2], job["volumes"])
    assert host_job.exists()
    env = job["environment"]
    doc = tomllib.loads(host_job.read_text())
    import os as _os

    old = {k: _os.environ.get(k) for k in env}
    try:
        _os.environ.update(env)
        parsed = job_from_dict(doc, str(host_job))
    finally:
        for k, v in old.items():
            _os.environ.pop(k) if v is None else _os.environ.__setitem__(k, v)
    assert parsed.scheduler == env["DPDIST_SCHEDULER"] and parsed.dataset_url.startswith(env["DPDIST_DATA"])


def _unmount(path: str, volumes: list[str]) -> pathlib.Path:
    for vol in volumes:
        src, dst = vol.split(":")[:2]
        if src.startswith(".") and path.startswith(dst + "/"):
            return DEPLOY / src / path[len(dst) + 1:]
    raise AssertionError(f"{path} is not under a bind mount")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bin(name: str) -> str:
    cand = pathlib.Path(sys.executable).parent / name
    return str(cand) if cand.exists() else shutil.which(name)


def test_compose_topology_runs_as_processes(tmp_path):
    """compose.yaml's services as real processes on 127.0.0.1 (free ports): the scheduler, two
    workers, then the one-shot `dpdist run` job, with the file's own commands, environment and
    volumes (named volumes become directories here, bind mounts the repository's files)."""
    from tests.ops.conftest import write_dataset

    comp = _compose()
    services = comp["services"]
    port = _free_port()
    volumes = {name: tmp_path / name for name in comp["volumes"]}
    for d in volumes.values():
        d.mkdir()

    def translate(arg: str, svc: dict) -> str:
        arg = arg.replace("tcp://scheduler:8786", f"tcp://127.0.0.1:{port}").replace("0.0.0.0", "127.0.0.1")
        for vol in svc.get("volumes", []):
            src, dst = vol.split(":")[:2]
            if arg == dst or arg.startswith(dst + "/"):
                base = DEPLOY / src if src.startswith(".") else volumes[src]
                return str(base) + arg[len(dst):]
        return arg

    def command(name: str) -> list[str]:
        svc = services[name]
        argv = [translate(a, svc) for a in svc["command"]]
        if argv[0] == "dask" and argv[1] == "scheduler":
            argv[argv.index("--port") + 1] = str(port)
        if argv[0] == "dask" and argv[1] == "worker":
            argv += ["--local-directory", str(tmp_path / name), "--host", "127.0.0.1"]
        return [_bin(argv[0])] + argv[1:]

    job_env = {k: translate(str(v), services["job"]) for k, v in services["job"]["environment"].items()}
    write_dataset(str(volumes["data"] / "claims.zarr"), n=4000, d=8, seed=3)
    (volumes["data"] / "releases").mkdir()
    env = {**os.environ, **job_env}
    procs = []
    try:
        for name in ("scheduler", "worker-1", "worker-2"):
            procs.append(subprocess.Popen(command(name), cwd=tmp_path, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, env=env))
            if name == "scheduler":
                from tests.ops.ledger_contract import _wait_for
                import socket

                def up():
                    try:
                        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                        return True
                    except OSError:
                        return False

                _wait_for(up, timeout=60, what="the scheduler")
        from distributed import Client

        with Client(f"tcp://127.0.0.1:{port}", timeout=60, set_as_default=False) as client:
            client.wait_for_workers(2, timeout=120)
            # the owner sets the dataset's budget, then the one-shot job runs
            from dpdist.ops.ledger import open_ledger
            from dpdist.privacy.budget import ApproxDP

            with open_ledger(job_env["DPDIST_LEDGER"]) as led:
                led.set_budget(str(volumes["data"] / "claims.zarr"), ApproxDP(2.0, 1e-6))
            job = subprocess.run(command("job"), env=env, capture_output=True, text=True, timeout=300)
            assert job.returncode == 0, job.stderr[-3000:]
            prefixes = client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
            client.shutdown()  # scheduler and workers close at once (SIGTERM takes seconds each)
        import json

        report = json.loads(job.stdout)
        assert report["status"] == "released" and os.path.isdir(report["output"])
        assert report["output"].startswith(str(volumes["data"] / "releases"))
        assert os.path.exists(volumes["state"] / "ledger.sqlite")  # DPDIST_LEDGER from compose
        assert prefixes, "the job's graph did not run on the compose scheduler"
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def test_kubernetes_daskcluster():
    [dc] = yaml_docs(DEPLOY / "kubernetes" / "daskcluster.yaml")
    assert (dc["apiVersion"], dc["kind"]) == ("kubernetes.dask.org/v1", "DaskCluster")
    name = dc["metadata"]["name"]
    worker, sched = dc["spec"]["worker"], dc["spec"]["scheduler"]
    assert isinstance(worker["replicas"], int) and worker["replicas"] >= 1
    [wc] = worker["spec"]["containers"]
    [sc] = sched["spec"]["containers"]
    for c in (wc, sc):
        assert c["image"] == IMAGE_K8S and c["name"]
    wctx = dask_context(wc["args"])
    assert wctx.params["name"] == "$(DASK_WORKER_NAME)"  # the operator sets it per pod
    dask_context(sc["args"])
    ports = {p["name"]: p["containerPort"] for p in sc["ports"]}
    assert ports["tcp-comm"] == 8786
    for probe in ("readinessProbe", "livenessProbe"):
        assert sc[probe]["httpGet"]["port"] in ports
    svc = sched["service"]
    assert svc["selector"] == {"dask.org/cluster-name": name, "dask.org/component": "scheduler"}
    assert {(p["port"], p["targetPort"]) for p in svc["ports"]} >= {(8786, "tcp-comm")}
    assert all(p["targetPort"] in ports for p in svc["ports"])


def test_kubernetes_cronjob_runs_dpdist_against_the_daskcluster():
    [dc] = yaml_docs(DEPLOY / "kubernetes" / "daskcluster.yaml")
    docs = {d["kind"]: d for d in yaml_docs(DEPLOY / "kubernetes" / "cronjob.yaml")}
    cm, cj = docs["ConfigMap"], docs["CronJob"]
    assert (cm["apiVersion"], cj["apiVersion"]) == ("v1", "batch/v1")
    fields = cj["spec"]["schedule"].split()
    assert len(fields) == 5 and cj["spec"]["concurrencyPolicy"] == "Forbid"
    jspec = cj["spec"]["jobTemplate"]["spec"]
    pod = jspec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"  # required by podFailurePolicy
    [c] = pod["containers"]
    assert c["image"] == IMAGE_K8S
    args = dpdist_args(c["command"])
    assert args.command == "run"
    # exit codes: 2, 3, 4 (and 1) fail the Job at once; 5 is retried up to backoffLimit
    [rule] = [r for r in jspec["podFailurePolicy"]["rules"] if "onExitCodes" in r]
    assert rule["action"] == "FailJob" and set(rule["onExitCodes"]["values"]) == {1, 2, 3, 4}
    assert rule["onExitCodes"]["containerName"] == c["name"] and jspec["backoffLimit"] >= 1
    env = {e["name"]: e for e in c["env"]}
    assert env["DPDIST_LEDGER"]["value"].startswith("postgresql://")
    assert ":" not in env["DPDIST_LEDGER"]["value"].split("//")[1].split("@")[0]  # no password in the URL
    assert "secretKeyRef" in env["PGPASSWORD"]["valueFrom"]
    # the job file comes from the ConfigMap, mounted where the command reads it
    [mount] = c["volumeMounts"]
    [vol] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert vol["configMap"]["name"] == cm["metadata"]["name"]
    key = os.path.relpath(args.job, mount["mountPath"])
    job = job_from_dict(tomllib.loads(cm["data"][key]), "configmap")
    assert job.dataset_url.startswith("s3://") and job.output_url.startswith("s3://")
    ns = dc["metadata"]["namespace"]
    assert job.scheduler == f"tcp://{dc['metadata']['name']}-scheduler.{ns}.svc.cluster.local:8786"
    assert cj["metadata"]["namespace"] == cm["metadata"]["namespace"] == ns


def test_starting_a_slurm_cluster_keeps_the_ctrl_c_handler():
    """Importing dask_jobqueue installs a SIGINT handler that calls sys.exit; a job that starts a
    SLURMCluster must keep the command line's own (a fresh process: the import runs once)."""
    import importlib.util

    if importlib.util.find_spec("dask_jobqueue") is None:  # not importorskip: it would import it here
        pytest.skip("dask-jobqueue not installed (the test extra)")
    code = ("import signal, sys\n"
            "def mine(*a): pass\n"
            "signal.signal(signal.SIGINT, mine)\n"
            "from dpdist.ops.cluster import _import_slurm_cluster\n"
            "_import_slurm_cluster()\n"
            "import dask_jobqueue.runner\n"
            "sys.exit(0 if signal.getsignal(signal.SIGINT) is mine else 3)\n")
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0


def test_slurm_configuration_through_dask_jobqueue(monkeypatch):
    import signal

    handler = signal.getsignal(signal.SIGINT)
    pytest.importorskip("dask_jobqueue", reason="dask-jobqueue not installed (the test extra)")
    signal.signal(signal.SIGINT, handler)  # dask_jobqueue.runner replaces it at import
    import dataclasses
    from types import MappingProxyType

    from dpdist.ops.cluster import make_cluster

    monkeypatch.setenv("SCRATCH", "/scratch/u1")
    job = load_job(DEPLOY / "slurm" / "job.toml")
    assert job.cluster is not None and job.cluster.kind == "slurm" and job.cluster.jobs == 4
    # the real scheduler binds the node's address; in a test it stays on 127.0.0.1
    spec = dataclasses.replace(job.cluster, options=MappingProxyType(
        {**job.cluster.options, "scheduler_options": {"host": "127.0.0.1", "dashboard_address": None}}))
    with make_cluster(spec) as cluster:
        script = cluster.job_script()
        address = cluster.scheduler_address
    lines = script.splitlines()
    assert lines[0].startswith("#!")
    directives = [ln.split(None, 1)[1] for ln in lines if ln.startswith("#SBATCH")]
    for expected in ("-p compute", "-A dp-releases", "-t 02:00:00", "--exclusive", "--signal=USR1@60",
                     "-J dpdist-worker", "--cpus-per-task=8", "--mem=32G"):
        assert any(d == expected or d.startswith(expected) for d in directives), (expected, directives)
    assert "source /opt/dpdist/venv/bin/activate" in script
    [worker] = [ln for ln in lines if "distributed.cli.dask_worker" in ln]
    argv = shlex.split(worker)
    assert argv[argv.index("-m") + 1] == "distributed.cli.dask_worker" and address in argv
    assert argv[argv.index("--nworkers") + 1] == "2" and "--lifetime" in argv
    check = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert check.returncode == 0, check.stderr


SBATCH_OPTIONS = {"job-name", "partition", "account", "time", "ntasks", "cpus-per-task", "mem", "output",
                  "error", "nodes", "exclusive", "signal", "requeue", "qos"}


def test_sbatch_example():
    path = DEPLOY / "slurm" / "dpdist-job.sbatch"
    text = path.read_text()
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
    for opt in re.findall(r"^#SBATCH --([a-z-]+)", text, re.M):
        assert opt in SBATCH_OPTIONS, opt
    [cmd] = [ln for ln in text.splitlines() if ln.startswith("dpdist ")]
    args = dpdist_args(shlex.split(cmd))
    assert args.command == "run" and os.path.relpath(args.job, "/opt/dpdist") == "deploy/slurm/job.toml"
    assert "scontrol requeue" in text.split("5)")[1].split(";;")[0]  # only exit 5 is requeued


def _import_dag(monkeypatch):
    """Import the DAG file with minimal stand-ins for the airflow modules it uses."""
    class Skip(Exception):
        pass

    class Fail(Exception):
        pass

    tasks = []

    class DAG:
        def __init__(self, **kw):
            self.kw = kw

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    class PythonOperator:
        def __init__(self, **kw):
            self.kw = kw
            tasks.append(self)

        def __rshift__(self, other):
            other.upstream = self
            return other

    mods = {"airflow": types.SimpleNamespace(DAG=DAG), "airflow.exceptions":
            types.SimpleNamespace(AirflowSkipException=Skip, AirflowFailException=Fail),
            "airflow.operators": types.SimpleNamespace(),
            "airflow.operators.python": types.SimpleNamespace(PythonOperator=PythonOperator)}
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    ns: dict = {"__name__": "dpdist_weekly"}
    exec(compile((DEPLOY / "airflow" / "dpdist_weekly.py").read_text(), "dpdist_weekly.py", "exec"), ns)
    return ns, tasks, Skip, Fail


def test_airflow_dag_acts_on_exit_codes(monkeypatch):
    ns, tasks, Skip, Fail = _import_dag(monkeypatch)
    assert [t.kw["task_id"] for t in tasks] == ["plan", "run"] and tasks[1].upstream is tasks[0]
    for t in tasks:
        dpdist_args([ns["DPDIST"], t.kw["op_args"][0], ns["JOB_FILE"], "--json"])
    act = ns["act_on"]
    assert act("run", 0, {"status": "released"}) == {"status": "released"}
    with pytest.raises(Skip):
        act("run", 3, {"error": "budget"})
    for code in (1, 2, 4):
        with pytest.raises(Fail):
            act("run", code, {})
    with pytest.raises(RuntimeError):  # retried by Airflow
        act("run", 5, {})
    assert ns["dag"].kw["catchup"] is False


def test_systemd_units_act_on_exit_codes():
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read(DEPLOY / "systemd" / "dpdist-job@.service")
    svc = unit["Service"]
    assert svc["Type"] == "oneshot" and svc["Restart"] == "on-failure"
    assert set(svc["RestartPreventExitStatus"].split()) == {"1", "2", "3", "4"}  # only 5 restarts
    argv = shlex.split(svc["ExecStart"].replace("%i", "weekly"))
    assert argv[0].startswith("/") and dpdist_args(argv).command == "run"
    timer = configparser.ConfigParser(strict=False, interpolation=None)
    timer.optionxform = str
    timer.read(DEPLOY / "systemd" / "dpdist-job@.timer")
    assert timer["Timer"]["OnCalendar"] and timer["Timer"]["Persistent"] == "true"
    assert timer["Install"]["WantedBy"] == "timers.target"


def test_cron_wrapper_retries_only_infrastructure_failures(tmp_path):
    line = [ln for ln in (DEPLOY / "cron" / "dpdist.cron").read_text().splitlines()
            if ln and not ln.startswith("#") and "=" not in ln.split()[0]][0]
    fields = line.split()
    assert len(fields[:5]) == 5 and fields[5] == "dpdist"
    assert os.path.relpath(fields[6], "/opt/dpdist") == "deploy/cron/run-job.sh"
    script = DEPLOY / "cron" / "run-job.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    # a stand-in dpdist that exits with the next code of a list (the wrapper's logic only)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "dpdist").write_text("#!/bin/bash\ncodes=($(cat \"$CODES\"))\necho \"${codes[@]:1}\" > \"$CODES\"\n"
                                 "echo \"$@\" >> \"$CALLS\"\nexit ${codes[0]}\n")
    (fake / "dpdist").chmod(0o755)

    def run(codes: str) -> tuple[int, int]:
        (tmp_path / "codes").write_text(codes)
        (tmp_path / "calls").write_text("")
        env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "CODES": str(tmp_path / "codes"),
               "CALLS": str(tmp_path / "calls"), "DPDIST_RETRIES": "2", "DPDIST_RETRY_DELAY": "0"}
        p = subprocess.run(["bash", str(script), "/jobs/w.toml"], env=env, capture_output=True)
        return p.returncode, len((tmp_path / "calls").read_text().splitlines())

    assert run("0") == (0, 1)
    assert run("5 5 0") == (0, 3)
    assert run("5 5 5 0") == (5, 3)
    assert run("3 0") == (3, 1)
    assert run("4 0") == (4, 1)
    calls = (tmp_path / "calls").read_text().split()
    assert dpdist_args(["dpdist"] + calls).command == "run"




#: `dpdist` sub-commands that release a statistic of the data they are given.
RELEASING = {"covariance", "pca", "norm", "second-moment", "demo"}
_CALL = re.compile(r"""(?:\$\{?dpdist\}?|\bdpdist)["']?[\s,]*["']?([a-z][a-z_-]*)""")


def test_every_deploy_file_that_releases_goes_through_dpdist_run():
    """A scheduled release must be charged to the ledger: the files here call `dpdist run` with
    a job file (or `plan`, `budget`, `report`), never a releasing command directly."""
    calls = {}
    for path in sorted(DEPLOY.rglob("*")):
        if not path.is_file() or path.suffix in (".md", ".png") or "docs" in path.parts:
            continue
        for line in path.read_text().splitlines():
            if line.lstrip().startswith("#"):
                continue
            for sub in _CALL.findall(line):
                calls.setdefault(sub, []).append(str(path.relative_to(DEPLOY)))
    assert "etl-job.sh" in calls.get("run", [])
    assert not RELEASING & set(calls), {k: v for k, v in calls.items() if k in RELEASING}


def test_the_first_example_of_deploy_readme_runs_as_written(tmp_path):
    """deploy/README.md's first block, from its `export` to `budget history`, in an empty
    folder with a small claims.zarr: the weekly job is planned, run on its default scheduler
    (threads) and charged; `budget show` and `history` list it."""
    block = re.search(r"^```bash\n(.*?)^```", (DEPLOY / "README.md").read_text(), re.M | re.S).group(1)
    lines = [ln.split("  #")[0].strip() for ln in block.splitlines() if ln.strip()]
    lines = lines[: next(i for i, ln in enumerate(lines) if ln.startswith("dpdist budget history")) + 1]
    assert lines[0].startswith("export DPDIST_DATA=") and any(ln.startswith("dpdist run") for ln in lines)
    data, results = tmp_path / "warehouse", tmp_path / "releases"
    data.mkdir(), results.mkdir()
    script = "\n".join(["set -e", f"cd {shlex.quote(str(ROOT))}",
                        *[ln.replace("/srv/warehouse", str(data)).replace("/srv/releases", str(results))
                          for ln in lines]])
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPDIST_")}
    env.update(PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
               DPDIST_LEDGER=str(tmp_path / "ledger.sqlite"))
    gen = subprocess.run(["dpdist", "generate", str(data / "claims.zarr"), "--n-samples", "4000",
                          "--n-features", "6", "--k", "3", "--no-progress"], env=env, capture_output=True, text=True)
    assert gen.returncode == 0, gen.stderr
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    [release] = list(results.iterdir())
    assert release.name.startswith("covariance-")
    from dpdist.ops.ledger import open_ledger

    with open_ledger(str(tmp_path / "ledger.sqlite")) as led:
        assert [e.state for e in led.history(str(data / "claims.zarr"))] == ["budget-set", "committed"]


def test_the_weekly_job_runs_on_threads_unless_told_otherwise(monkeypatch):
    monkeypatch.setenv("DPDIST_DATA", "/data")
    monkeypatch.setenv("DPDIST_RESULTS", "/data/releases")
    monkeypatch.delenv("DPDIST_SCHEDULER", raising=False)
    assert load_job(str(DEPLOY / "jobs" / "weekly.toml")).scheduler == "threads"
