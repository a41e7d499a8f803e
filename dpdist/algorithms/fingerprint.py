"""Fingerprints of what a measured result depends on, so that a result cannot silently go stale.

A measured number (a results file under ``benchmarks/results/``, the measured n* that
``plan()`` quotes) holds for the noise scales, thresholds, clip levels and selection shares of
the code that measured it. For each method, :func:`method_fingerprint` evaluates those public
quantities, as the estimators' own ``plan()`` (or calibration) gives them, at a few fixed
reference points (no data, no fit), rounds them to :data:`SIGNIFICANT` significant digits and
adds a short sha256 digest of the canonical JSON.

The fingerprint lives beside the estimators because it is a function of their code only, and
because ``plan()`` checks it: :mod:`dpdist.algorithms.measured` quotes a measured n* only while
its recorded fingerprint equals :func:`current_fingerprint`. Recording fingerprints in results
files and checking files is :mod:`dpdist.experiments.fingerprint`'s.

A fingerprint only covers what it lists: a change that moves no listed value at the reference
points (an estimator's error computation, a simulator's approximation) is not seen.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import warnings

from dpdist.exceptions import ValidationError

__all__ = ["ESTIMATORS", "FINGERPRINTED", "SECOND_MOMENT_METHODS", "SIGNIFICANT", "current_fingerprint", "diff",
           "method_fingerprint", "register"]


#: Values are rounded to this many significant digits (platform noise does not flip them).
SIGNIFICANT = 10

#: Reference points of the (epsilon, delta) methods: (n_samples, n_features, epsilon, delta).
POINTS = ((10**6, 200, 1.0, 1e-6), (10**9, 20_000, 1.0, 1e-6), (10**7, 1000, 0.5, 1e-8))
#: Reference points of the second-moment methods: (n_samples, n_features, rho, radius, lambda_min).
SECOND_MOMENT_POINTS = ((10**6, 8, 1.0, 1.0, 1e-3), (10**7, 4, 0.5, 100.0, 0.5))
#: The instance parameters of the sweeps: covariance k, PCA k and relative gap, sigma.
COV_K, PCA_K, GAP, SIGMA = 20, 3, 0.5, 1.0
_PRIVCOV_FIELDS = ("noise_scale", "release_sigma", "clip", "row_clip", "selection_share")
_WANG_XU_FIELDS = ("gaussian_sigma", "threshold", "clip")
_PRIVPCA_FIELDS = ("noise_scale", "norm_noise_scale", "n_batches", "tau", "pca_tests.count_test.scale",
                   "pca_tests.count_test.threshold", "pca_tests.weight_test.scale", "pca_tests.weight_test.threshold")
_EXPMECH_FIELDS = ("noise_scales.selection_gumbel_scale", "noise_scales.block_gaussian_sigma", "clip",
                   "mean_noise_scale")


#: dpdist's estimator classes by name, recorded as each class is defined
#: (``Estimator.__init_subclass__`` calls :func:`register`). The fingerprints evaluate the
#: estimators' plans through this table instead of importing the estimators' modules: those
#: import this module (their plans check the fingerprint of their measured n*), and the
#: estimator whose plan asks is always defined by then.
ESTIMATORS: dict[str, type] = {}


def register(cls: type) -> None:
    """Record an estimator class of :mod:`dpdist.algorithms` under its name (classes defined
    elsewhere, such as a user's subclass or a test's deliberately wrong variant, are not
    recorded: a fingerprint describes the estimators' code)."""
    if cls.__module__.startswith("dpdist.algorithms."):
        ESTIMATORS[cls.__name__] = cls


def _estimator(name: str) -> type:
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise ValidationError(f"the estimator {name} is not defined in this process: import dpdist before "
                              "computing its fingerprint") from None


def _privcov(selection):
    def plan(n, d, eps, delta):
        return _estimator("SparseCovariance")(COV_K, eps, delta, sigma=SIGMA, selection=selection,
                                              assume_centered=True).plan(n, d)

    return (f"SparseCovariance(k={COV_K}, selection={selection!r}, sigma={SIGMA:g}, assume_centered=True).plan",
            plan, _PRIVCOV_FIELDS)


def _spec_table() -> dict:
    """method -> (what is evaluated, plan(point) function, fields), or a string: why the method
    has nothing to fingerprint."""
    est = _estimator
    return {
        "thresholded": (f"ThresholdedCovariance(sigma={SIGMA:g}).plan (NOT PRIVATE: its threshold rule)",
                        lambda n, d, e, dl: est("ThresholdedCovariance")(sigma=SIGMA, assume_centered=True).plan(n, d),
                        ("threshold",)),
        "thresholded_pca": (f"ThresholdedPCA(sigma={SIGMA:g}).plan(k={PCA_K}) (NOT PRIVATE: its threshold rule)",
                            lambda n, d, e, dl: est("ThresholdedPCA")(sigma=SIGMA, assume_centered=True).plan(n, d, k=PCA_K),
                            ("threshold",)),
        "wang_xu": (f"GaussianCovariance(sigma={SIGMA:g}, assume_centered=True).plan",
                    lambda n, d, e, dl: est("GaussianCovariance")(e, dl, sigma=SIGMA, assume_centered=True).plan(n, d),
                    _WANG_XU_FIELDS),
        "wang_xu_pca": (f"GaussianPCA(sigma={SIGMA:g}, assume_centered=True).plan(k={PCA_K})",
                        lambda n, d, e, dl: est("GaussianPCA")(e, dl, sigma=SIGMA, assume_centered=True).plan(n, d, k=PCA_K),
                        _WANG_XU_FIELDS),
        "privcov": _privcov("paper"),
        "privcov_laplace": _privcov("laplace"),
        "privcov_gumbel": _privcov("gumbel"),
        "privcov_power": (f"SparseCovariancePCA(k={PCA_K}, sigma={SIGMA:g}, assume_centered=True).plan(eigengap={GAP})",
                          lambda n, d, e, dl: est("SparseCovariancePCA")(PCA_K, e, dl, sigma=SIGMA, assume_centered=True)
                          .plan(n, d, eigengap=GAP * SIGMA**2), _PRIVCOV_FIELDS),
        "privpca": (f"SparsePCA(k={PCA_K}, gap={GAP}, sigma={SIGMA:g}, assume_centered=True).plan",
                    lambda n, d, e, dl: est("SparsePCA")(PCA_K, e, dl, gap=GAP, sigma=SIGMA,
                                                              assume_centered=True).plan(n, d), _PRIVPCA_FIELDS),
        "expmech": (f"ExpMechSparsePCA(k={PCA_K}, sigma={SIGMA:g}).plan(eigengap={GAP})",
                    lambda n, d, e, dl: est("ExpMechSparsePCA")(PCA_K, e, dl, sigma=SIGMA)
                    .plan(n, d, eigengap=GAP * SIGMA**2), _EXPMECH_FIELDS),
        "analyze_gauss": ("AnalyzeGauss(row_norm=1, assume_centered=True).plan",
                          lambda n, d, e, dl: est("AnalyzeGauss")(e, dl, row_norm=1.0, assume_centered=True).plan(n, d),
                          ("noise_scale",)),
        "opendp": "an external library (OpenDP's PCA): its calibration is not dpdist's code; the file records "
                  "which version ran",
        "diffprivlib": "an external library (diffprivlib's PCA): its calibration is not dpdist's code; the file "
                       "records which version ran",
    }


def _second_moment(method: str, point) -> dict:
    n, d, rho, radius, lam = point
    if method == "recdpsme":
        p = _estimator("SecondMoment")(rho, m=2 * d, radius=radius, lambda_min=lam).plan(n, d)
        return {"n_levels": p.n_levels, "schedule.sigmas": _get(p, "schedule.sigmas"),
                "schedule.thresholds": _get(p, "schedule.thresholds")}
    if method == "one_shot":
        from dpdist.privacy.mechanisms.second_moment import one_shot_sigma

        return {"sigma": one_shot_sigma(n, rho, radius)}
    from dpdist.privacy.mechanisms.subsample_aggregate import equal_privacy_baseline_budget

    eps, delta = equal_privacy_baseline_budget(rho, 1e-6)
    p = _estimator("SubsampleAggregateSecondMoment")(eps, delta, m=10 * d).plan(n, d)
    return {"epsilon": eps, "delta": delta, **{f: getattr(p, f) for f in ("noise_scale", "threshold", "tlap_scale")}}


_SECOND_MOMENT = {
    "recdpsme": "SecondMoment(m=2d).plan",
    "one_shot": "privacy.second_moment_calibration.one_shot_sigma",
    "subsample_aggregate": "SubsampleAggregateSecondMoment(m=10d).plan at equal_privacy_baseline_budget(rho, 1e-6)",
}

#: Every method key a results file may use.
FINGERPRINTED = ("thresholded", "thresholded_pca", "wang_xu", "wang_xu_pca", "privcov", "privcov_laplace",
                 "privcov_gumbel", "privcov_power", "privpca", "expmech", "analyze_gauss", "opendp", "diffprivlib",
                 *_SECOND_MOMENT)


def _get(plan, path: str):
    value = plan.to_dict() if hasattr(plan, "to_dict") else plan
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _round(value):
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return [_round(v) for v in value]
    if isinstance(value, int):
        return value
    x = float(value)
    return float(f"{x:.{SIGNIFICANT}g}") if math.isfinite(x) else repr(x)


def _digest(record: dict) -> str:
    body = {k: v for k, v in record.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def method_fingerprint(method: str) -> dict:
    """The fingerprint of ``method`` (a key of :data:`FINGERPRINTED`): ``{"evaluates", "points",
    "values", "digest"}``, or ``{"nothing_to_fingerprint": why, "digest"}``. Reads no data."""
    if method in _SECOND_MOMENT:
        points = [dict(zip(("n_samples", "n_features", "rho", "radius", "lambda_min"), p))
                  for p in SECOND_MOMENT_POINTS]
        values = [_second_moment(method, p) for p in SECOND_MOMENT_POINTS]
        record = {"evaluates": _SECOND_MOMENT[method], "points": points}
    else:
        spec = _spec_table().get(method)
        if spec is None:
            raise ValidationError(f"no fingerprint for method {method!r}; known: {', '.join(FINGERPRINTED)}")
        if isinstance(spec, str):
            record = {"nothing_to_fingerprint": spec}
            record["digest"] = _digest(record)
            return record
        what, plan, fields = spec
        points = [dict(zip(("n_samples", "n_features", "epsilon", "delta"), p)) for p in POINTS]
        values = []
        busy = getattr(_BUSY, "on", False)
        _BUSY.on = True  # the plans evaluated here do not check (nor cache) measured n*
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for n, d, eps, delta in POINTS:
                    p = plan(n, d, eps, delta)
                    values.append({f: _get(p, f) for f in fields})
        finally:
            _BUSY.on = busy
        record = {"evaluates": what, "points": points}
    record["values"] = [{k: _round(v) for k, v in row.items()} for row in values]
    record["digest"] = _digest(record)
    return record


#: Today's fingerprints, computed once per process (:func:`current_fingerprint`).
_CACHE: dict = {}
_BUSY = threading.local()


def current_fingerprint(method: str) -> dict | None:
    """:func:`method_fingerprint` of ``method``, computed once per process. None when asked
    while a fingerprint is being computed: the plans evaluated then ask for their measured n*,
    which no fingerprint depends on."""
    if method in _CACHE:
        return _CACHE[method]
    if getattr(_BUSY, "on", False):
        return None
    _CACHE[method] = method_fingerprint(method)
    return _CACHE[method]


def diff(recorded: dict, current: dict) -> list[str]:
    """The fields in which two fingerprints of one method differ, as readable lines."""
    out = []
    for key in sorted((set(recorded) | set(current)) - {"digest", "values"}):
        if recorded.get(key) != current.get(key):
            out.append(f"{key}: {recorded.get(key)!r} -> {current.get(key)!r}")
    old, new = recorded.get("values", []), current.get("values", [])
    points = current.get("points") or recorded.get("points") or []
    for i in range(max(len(old), len(new))):
        a = old[i] if i < len(old) else {}
        b = new[i] if i < len(new) else {}
        where = ", ".join(f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}"
                          for k, v in (points[i] if i < len(points) else {}).items())
        for field in sorted(set(a) | set(b)):
            if a.get(field) != b.get(field):
                out.append(f"{field} at ({where}): {a.get(field)!r} -> {b.get(field)!r}")
    return out


#: The second-moment methods (their fingerprints evaluate other reference points).
SECOND_MOMENT_METHODS = tuple(_SECOND_MOMENT)
