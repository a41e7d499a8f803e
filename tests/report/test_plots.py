"""PNG reports: a result's support and spectrum against the predicted band; the ledger over time."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from dpdist.cli.main import main
from dpdist.data.results import write_result
from dpdist.ops.composition import spent
from dpdist.ops.ledger import open_ledger
from dpdist.report.budget import spending_series
from dpdist.privacy.budget import ApproxDP
from dpdist.report.plots import eigen_band, plot_budget, plot_result, result_summary

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_size(path) -> tuple[int, int]:
    data = open(path, "rb").read(24)
    assert data[:8] == PNG_MAGIC
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _banded(d: int = 12) -> sp.csr_array:
    main_diag = np.full(d, 2.0)
    off = np.full(d - 1, 0.5)
    return sp.csr_array(sp.diags([off, main_diag, off], [-1, 0, 1]))


META = {"mechanism": "PrivCov (COLT 2026, Algorithm 1)", "private": True,
        "privacy": {"type": "approx-dp", "epsilon": 1.0, "delta": 1e-6},
        "parameters": {"n_samples": 10_000, "n_features": 12},
        "job": {"predicted_error": {"value": 0.25, "metric": "||M - Sigma||_op, w.p. >= 1 - beta (Theorem 1)",
                                     "plan_key": "error_bound"}}}


def test_eigen_bands():
    eigs = np.array([3.0, 2.0, -1.0])
    lo, hi, _ = eigen_band(eigs, {"value": 0.5, "plan_key": "error_bound"})  # Weyl: +- bound
    np.testing.assert_allclose(lo, [2.5, 1.5, -1.5])
    np.testing.assert_allclose(hi, [3.5, 2.5, -0.5])
    lo, hi, _ = eigen_band(np.array([1.2]), {"value": 0.2, "plan_key": "predicted_gamma"})
    np.testing.assert_allclose([lo[0], hi[0]], [1.0, 1.5])  # 1.2 / 1.2 and 1.2 / 0.8
    assert eigen_band(eigs, None) is None and eigen_band(eigs, {"value": 2.0, "plan_key": "predicted_gamma"}) is None
    # every plan's error is "error_bound" now; its metric says which band applies
    lo, hi, _ = eigen_band(np.array([1.2]), {"value": 0.2, "plan_key": "error_bound", "metric": "gamma: ..."})
    np.testing.assert_allclose([lo[0], hi[0]], [1.0, 1.5])
    assert eigen_band(eigs, {"value": 0.2, "plan_key": "error_bound", "metric": "sin^2(v_hat, v_1)"}) is None


def test_result_summary_and_png(tmp_path):
    M = _banded()
    summary = plot_result(META, {"covariance": M}, str(tmp_path / "r.png"))
    assert summary["nnz"] == 12 + 2 * 11 and summary["shape"] == [12, 12]
    # eigenvalues of tridiag(0.5, 2, 0.5): 2 + cos(pi j / 13), j = 1..12
    expected = sorted(2 + np.cos(np.pi * np.arange(1, 13) / 13), reverse=True)
    np.testing.assert_allclose(summary["top_eigenvalues"], expected[:5])
    w, h = _png_size(tmp_path / "r.png")
    assert w >= 1200 and h >= 500


def test_large_matrices_are_binned_and_use_the_top_of_the_spectrum(tmp_path):
    d = 2100
    M = sp.csr_array(sp.diags(np.linspace(1.0, 3.0, d)))
    summary = plot_result(META, {"covariance": M}, str(tmp_path / "big.png"))
    assert summary["nnz"] == d
    np.testing.assert_allclose(summary["top_eigenvalues"], np.linspace(1.0, 3.0, d)[::-1][:5])


def test_vector_results_plot_as_bars(tmp_path):
    summary = plot_result({"mechanism": "PrivPCA"}, {"components": np.array([[0.6, 0.8, 0.0]])},
                          str(tmp_path / "v.png"))
    assert "matrix" not in summary
    assert _png_size(tmp_path / "v.png")[0] > 0


def test_dpdist_report_writes_png_beside_the_result(tmp_path, capsys):
    out = write_result(tmp_path / "cov.zarr", META, {"covariance": _banded()})
    assert main(["report", out, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["png"] == str(tmp_path / "cov.png") and (tmp_path / "cov.png").exists()
    assert summary["predicted_error"]["value"] == 0.25
    assert main(["report", out]) == 0
    text = capsys.readouterr().out
    assert "34 non-zeros" in text and "picture" in text


def test_ledger_spending_series_and_png(tmp_path, capsys):
    path = str(tmp_path / "ledger.sqlite")
    with open_ledger(path) as led:
        led.set_budget("/d/a.zarr", ApproxDP(1.0, 1e-6), name="a")
        for _ in range(3):
            led.reserve("/d/a.zarr", ApproxDP(0.4, 1e-8)).commit(output="x") if _ < 2 else None
        with pytest.raises(Exception):
            led.reserve("/d/a.zarr", ApproxDP(0.4, 1e-8))
        series = spending_series(led, "/d/a.zarr", spent)
    states = [s for _, _, s in series["points"]]
    shares = [round(f, 12) for _, f, _ in series["points"]]
    assert states == ["budget-set", "committed", "committed", "refused"]
    assert shares == [0.0, 0.4, 0.8, 0.8]
    plot_budget([series], str(tmp_path / "l.png"))
    assert _png_size(tmp_path / "l.png")[0] > 0
    assert main(["report", "--ledger", path, "-o", str(tmp_path / "l2.png")]) == 0
    assert "80.0% spent by 2 committed job(s); 1 refused" in capsys.readouterr().out


def test_report_needs_a_result_or_a_ledger(capsys):
    assert main(["report"]) == 2
    assert result_summary({}, {}) ["predicted_error"] is None


@pytest.mark.parametrize("d", [6, 12, 40])
def test_every_label_lies_inside_the_picture(tmp_path, monkeypatch, d):
    import matplotlib.figure

    seen = []
    real = matplotlib.figure.Figure.savefig

    def savefig(fig, *args, **kwargs):
        real(fig, *args, **kwargs)
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            for label in (ax.xaxis.label, ax.yaxis.label, ax.title):
                if label.get_text():
                    box = label.get_window_extent(renderer)
                    seen.append((label.get_text(), box.x0, box.y0, box.x1, box.y1, fig.bbox.x1, fig.bbox.y1))

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    M = _banded(d) * 37.0  # colour-bar ticks in powers of ten, as a noisy release has
    plot_result({**META, "parameters": {"n_samples": 500, "n_features": d}}, {"covariance": M}, str(tmp_path / "r.png"))
    assert any(text == "feature i" for text, *_ in seen)
    for text, x0, y0, x1, y1, width, height in seen:
        assert 0 <= x0 and x1 <= width and 0 <= y0 and y1 <= height, (text, x0, x1)


@pytest.mark.parametrize("options", [{}, {"selection": "paper", "assume_centered": True}])
def test_the_predicted_band_is_the_bound_the_release_recorded(options):
    """Without a job, the band comes from the bound the release's own plan gave (recorded in its
    metadata), for every selection: the estimator's plan at the release's size says the same."""
    import dpdist

    X = np.random.default_rng(0).standard_normal((4000, 8))
    est = dpdist.SparseCovariance(2, 1.0, 1e-6, sigma=1.0, random_state=1, **options).fit(X)
    metadata = json.loads(json.dumps(est.release_.metadata(), default=str))
    predicted = result_summary(metadata, {})["predicted_error"]
    assert predicted["value"] == est.plan(4000, 8).error_bound
    assert predicted["metric"] == est.plan(4000, 8).error_metric and predicted["plan_key"] == "error_bound"
