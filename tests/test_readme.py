"""README.md as a user runs it.

- Every ```python block, as a plain script without a ``__main__`` guard (``python use.py``)
  and piped to ``python -``, each in an empty directory.
- Every ```bash block, line by line and verbatim (``bash -c LINE``), in order, in one empty
  directory, with this environment's ``dpdist`` and ``python`` first on PATH. A line ending in
  ``# exits N`` must exit N; every other line must exit 0. The two set-up commands of the Quick
  start (pip installs, which CI runs itself) are checked to be there word for word, not run.

Then the results are checked: files, shapes, the budgets recorded. The README's examples are
small (200,000 rows) so that all of this runs in CI.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dpdist

README = Path(__file__).resolve().parents[1] / "README.md"
SETUP = ('python -m pip install -e . && dpdist demo', 'python -m pip install -e ".[test]" && python -m pytest')

def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README.read_text(), re.M | re.S)


def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def _check_use_block(cwd: Path, proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stderr
    assert "ApproxDP(epsilon=1.0, delta=1e-06)" in proc.stdout and "(16, 16)" in proc.stdout
    assert "gumbel_select" in proc.stdout  # the noise scales of the release
    from dpdist.data.validation import as_dask_array

    assert as_dask_array(str(cwd / "data.zarr")).shape == (200_000, 16)


@pytest.mark.parametrize("how", ["script", "stdin"])
def test_python_blocks_run_unguarded(tmp_path, how):
    blocks = _blocks("python")
    assert blocks, "README.md has no python block"
    for i, code in enumerate(blocks):
        cwd = tmp_path / f"block{i}"
        cwd.mkdir()
        if how == "script":
            (cwd / "use.py").write_text(code)
            proc = subprocess.run([sys.executable, "use.py"], cwd=cwd, capture_output=True, text=True, timeout=600)
        else:
            proc = subprocess.run([sys.executable, "-"], input=code, cwd=cwd, capture_output=True, text=True,
                                  timeout=600)
        if i == 0:
            _check_use_block(cwd, proc)
        else:  # pragma: no cover - a block added later: it must at least run
            assert proc.returncode == 0, proc.stderr


def test_cli_examples_run_verbatim(tmp_path):
    lines = [ln for block in _blocks("bash") for ln in block.splitlines() if ln.strip()]
    for command in SETUP:
        assert command in lines, f"set-up command missing from README.md: {command}"
    outputs = {}
    for line in lines:
        if line in SETUP:
            continue
        expected = re.search(r"#\s*exits (\d+)\s*$", line)
        proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == (int(expected.group(1)) if expected else 0), f"{line}\n{proc.stderr}"
        outputs[line.split("#")[0].strip()] = proc.stdout

    from dpdist.data.validation import as_dask_array

    assert as_dask_array(str(tmp_path / "data.zarr")).shape == (200_000, 16)
    plan = next(out for cmd, out in outputs.items() if cmd.startswith("dpdist covariance") and "--plan" in cmd)
    assert re.search(r"noise_scale : [0-9.]+", plan) and "n_samples : 200000" in plan
    cov = dpdist.load_result(tmp_path / "cov.zarr")
    assert cov.covariance.shape == (16, 16) and cov.metadata["mechanism"].startswith("PrivCov")
    assert cov.metadata["privacy"] == {"type": "approx-dp", "epsilon": 1.0, "delta": 1e-6}
    wx = json.loads((tmp_path / "wx.json").read_text())
    assert wx["output"] == str(tmp_path / "wx.zarr") and wx["privacy"]["epsilon"] == 1.0
    pc = dpdist.load_result(tmp_path / "pc.zarr").components
    assert pc.shape == (1, 16) and np.linalg.norm(pc) == pytest.approx(1.0) and np.count_nonzero(pc) <= 3
    m2 = dpdist.load_result(tmp_path / "m2.zarr")
    assert m2.second_moment.shape == (16, 16) and m2.metadata["privacy"]["rho"] == pytest.approx(0.5)
    assert m2.metadata["parameters"]["radius_source"].startswith("private")  # no data-derived public bound
    record = json.loads((tmp_path / "norm.zarr.rejected.json").read_text())
    assert record["exit_code"] == 4 and record["privacy_spent"]["type"] == "approx-dp"
    assert not (tmp_path / "norm.zarr").exists()
    audit = json.loads((tmp_path / "audit.json").read_text())
    assert [r["mechanism"] for r in audit["rows"]] == ["primitives/laplace"] and audit["rows"][0]["passed"]
    assert outputs['python -c "import dpdist; print(dpdist.load_result(\'cov.zarr\').covariance.shape)"'].strip() \
        == "(16, 16)"
    # "Your own data": a CSV whose values sit around 5, three named columns, centred at a private mean
    compare = next(out for cmd, out in outputs.items() if cmd.startswith("dpdist plan --compare"))
    assert re.search(r"^\* wang-xu ", compare, re.M)  # the method the example then runs is the one marked best
    survey = dpdist.load_result(tmp_path / "survey-cov.zarr")
    assert survey.metadata["parameters"]["centering"]["mode"] == "private-mean"
    x = np.loadtxt(tmp_path / "survey.csv", delimiter=",", skiprows=1)[:, :3]
    truth = np.cov(x, rowvar=False)
    estimate = np.asarray(survey.covariance.todense())
    # Wang-Xu's plan bounds the operator-norm error by 0.39 here (w.p. 0.9, its beta); the
    # uncentred second moment would be about 25 on the diagonal
    assert np.linalg.norm(estimate - truth, 2) < 0.39
    import zarr

    converted = zarr.open_array(str(tmp_path / "survey.zarr"), mode="r")
    assert converted.shape == (100_000, 3) and converted.dtype == np.float32
    assert converted.attrs["columns"] == ["age", "income", "score"]
    from dpdist.ops.ledger import open_ledger

    with open_ledger(str(tmp_path / "ledger.sqlite")) as led:  # the job and the direct commands share the budget
        charged = [(e.state, e.job) for e in led.history(str(tmp_path / "data.zarr")) if e.state != "budget-set"]
    assert charged == [("committed", "job"), ("committed", "job"), ("refused", "job"),
                       ("committed", "dpdist covariance"), ("refused", "dpdist covariance")]
    assert dpdist.load_result(tmp_path / "cov-last.zarr").metadata["ledger"]["recorded"] is True
    assert cov.metadata["ledger"]["recorded"] is False  # the examples above name no ledger


def test_links_to_docs_resolve():
    """Every relative link of README.md and of docs/*.md names a file of the repository."""
    root = README.parent
    for page in [README, *sorted((root / "docs").rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.relative_to(root)} links to a missing {target}"
