"""Measured sample complexities as planning data (labelled *empirical*, with their source).

:data:`TABLE` holds n*(d) measured by ``dpdist experiment sample-complexity`` (the JSON named
in each entry's ``source``, under ``benchmarks/results/``): per method, the instance family,
the target, the budget and the points (d, n*). :func:`measured_n_star` returns the measured
value for a method at a dimension, interpolated log-log between measured points and only
inside the measured range (None outside it: no extrapolation). :func:`theory_n_star` gives the
estimators' own theorem-based planning value (their ``plan()``/``min_samples()``) for the
same target, so the two can be shown side by side (:func:`planning_rows`).

The measured values hold for the instance family and target they were measured on; they are
not a guarantee for other data. Each entry carries the fingerprint its results file recorded
(:mod:`dpdist.experiments.fingerprint`): when it differs from the one today's code gives, the
measurement no longer describes the code and :func:`measured_n_star` returns None
(:func:`table_status` says which fields differ). An entry whose file records no fingerprint is
reported as not checked.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass

from dpdist.exceptions import ValidationError

__all__ = ["PLANNING_LABELS", "SOURCES", "TABLE", "EmpiricalNStar", "build_table", "measured_n_star", "planning_rows", "planning_table",
           "table_from_results", "table_status", "theory_n_star"]


@dataclass(frozen=True)
class EmpiricalNStar:
    """A measured n* (least n with error <= target in >= 1 - beta of the repetitions)."""

    method: str
    n_features: float
    n_star: float
    interpolated: bool
    instance_family: str
    target: str
    epsilon: float
    delta: float
    beta: float
    mode: str
    source: str
    date: str
    label: str = "empirical"
    fingerprint: str = "not recorded: not checked against this code"

    def to_dict(self) -> dict:
        return asdict(self)


#: The results files :data:`TABLE` is built from.
SOURCES = ("benchmarks/results/sample_complexity_simulated.json", "benchmarks/results/sample_complexity_real.json",
           "benchmarks/results/sample_complexity_privcov_gumbel_simulated.json",
           "benchmarks/results/sample_complexity_privcov_power_simulated.json")

#: :func:`build_table` of :data:`SOURCES` (after regenerating a source: ``pprint.pprint(build_table())``
#: from the repository root, pasted here; a test checks that the two agree).
TABLE: dict = {('expmech', 'real'): {'beta': 0.1,
                       'date': '2026-11-30',
                       'delta': 1e-06,
                       'epsilon': 1.0,
                       'fingerprint': None,
                       'instance_family': 'model2-sparse-spike (k=3, gap=0.5)',
                       'mode': 'real',
                       'points': [(30, 86600.0), (60, 86600.0), (120, 86600.0)],
                       'source': 'benchmarks/results/sample_complexity_real.json',
                       'target': 'sin^2 <= 0.1',
                       'theory_points': []},
 ('privcov', 'simulated'): {'beta': 0.1,
                            'date': '2026-12-01',
                            'delta': 1e-06,
                            'epsilon': 1.0,
                            'fingerprint': {'digest': 'ab3f5bb41ebc358a',
                                            'evaluates': "SparseCovariance(k=20, selection='paper', sigma=1, "
                                                         'assume_centered=True).plan',
                                            'points': [{'delta': 1e-06,
                                                        'epsilon': 1.0,
                                                        'n_features': 200,
                                                        'n_samples': 1000000},
                                                       {'delta': 1e-06,
                                                        'epsilon': 1.0,
                                                        'n_features': 20000,
                                                        'n_samples': 1000000000},
                                                       {'delta': 1e-08,
                                                        'epsilon': 0.5,
                                                        'n_features': 1000,
                                                        'n_samples': 10000000}],
                                            'values': [{'clip': 6.812954203,
                                                        'noise_scale': 1.72560583,
                                                        'release_sigma': None,
                                                        'row_clip': 'inf',
                                                        'selection_share': None},
                                                       {'clip': 8.33319842,
                                                        'noise_scale': 0.02584816618,
                                                        'release_sigma': None,
                                                        'row_clip': 'inf',
                                                        'selection_share': None},
                                                       {'clip': 7.3648076,
                                                        'noise_scale': 1.035402625,
                                                        'release_sigma': None,
                                                        'row_clip': 'inf',
                                                        'selection_share': None}]},
                            'instance_family': 'construction1 (k=20)',
                            'mode': 'simulated',
                            'points': [(60, 56234133.0),
                                       (200, 165481711.0),
                                       (600, 486967528.0),
                                       (2000, 1154781991.0),
                                       (6000, 2738419649.0),
                                       (20000, 6493816351.0),
                                       (100000, 22067340811.0)],
                            'source': 'benchmarks/results/sample_complexity_simulated.json',
                            'target': '||M - Sigma||_op <= 0.25 sigma^2',
                            'theory_points': [(60, 8447328256.0),
                                              (200, 19327352832.0),
                                              (600, 40735080448.0),
                                              (2000, 92945776640.0),
                                              (6000, 205487341568.0),
                                              (20000, 566398812160.0)]},
 ('privcov_gumbel', 'simulated'): {'beta': 0.1,
                                   'date': '2026-12-01',
                                   'delta': 1e-06,
                                   'epsilon': 1.0,
                                   'fingerprint': {'digest': '78cb8a6cf39c595b',
                                                   'evaluates': "SparseCovariance(k=20, selection='gumbel', "
                                                                'sigma=1, assume_centered=True).plan',
                                                   'points': [{'delta': 1e-06,
                                                               'epsilon': 1.0,
                                                               'n_features': 200,
                                                               'n_samples': 1000000},
                                                              {'delta': 1e-06,
                                                               'epsilon': 1.0,
                                                               'n_features': 20000,
                                                               'n_samples': 1000000000},
                                                              {'delta': 1e-08,
                                                               'epsilon': 0.5,
                                                               'n_features': 1000,
                                                               'n_samples': 10000000}],
                                                   'values': [{'clip': 6.91394528,
                                                               'noise_scale': 0.005390731389,
                                                               'release_sigma': 0.01619950703,
                                                               'row_clip': 18.85520751,
                                                               'selection_share': 0.9604499489},
                                                              {'clip': 8.415966389,
                                                               'noise_scale': 5.123467097e-05,
                                                               'release_sigma': 0.0002357379846,
                                                               'row_clip': 146.4878172,
                                                               'selection_share': 0.952746677},
                                                              {'clip': 7.45832993,
                                                               'noise_scale': 0.00260569957,
                                                               'release_sigma': 0.01143637867,
                                                               'row_clip': 36.39733238,
                                                               'selection_share': 0.9483096059}]},
                                   'instance_family': 'construction1 (k=20)',
                                   'mode': 'simulated',
                                   'points': [(60, 205353.0),
                                              (200, 486969.0),
                                              (600, 1000003.0),
                                              (2000, 2206741.0),
                                              (6000, 4869691.0),
                                              (20000, 10746113.0)],
                                   'source': 'benchmarks/results/sample_complexity_privcov_gumbel_simulated.json',
                                   'target': '||M - Sigma||_op <= 0.25 sigma^2',
                                   'theory_points': [(60, 56885248.0),
                                                     (200, 80019456.0),
                                                     (600, 115867648.0),
                                                     (2000, 184680448.0),
                                                     (6000, 295960576.0),
                                                     (20000, 518782976.0)]},
 ('privcov_power', 'simulated'): {'beta': 0.1,
                                  'date': '2026-12-01',
                                  'delta': 1e-06,
                                  'epsilon': 1.0,
                                  'fingerprint': {'digest': '347feb79c50fb8b4',
                                                  'evaluates': 'SparseCovariancePCA(k=3, sigma=1, '
                                                               'assume_centered=True).plan(eigengap=0.5)',
                                                  'points': [{'delta': 1e-06,
                                                              'epsilon': 1.0,
                                                              'n_features': 200,
                                                              'n_samples': 1000000},
                                                             {'delta': 1e-06,
                                                              'epsilon': 1.0,
                                                              'n_features': 20000,
                                                              'n_samples': 1000000000},
                                                             {'delta': 1e-08,
                                                              'epsilon': 0.5,
                                                              'n_features': 1000,
                                                              'n_samples': 10000000}],
                                                  'values': [{'clip': 6.91394528,
                                                              'noise_scale': 0.002181052768,
                                                              'release_sigma': 0.006823055033,
                                                              'row_clip': 18.85520751,
                                                              'selection_share': 0.880093664},
                                                             {'clip': 8.415966389,
                                                              'noise_scale': 2.046203564e-05,
                                                              'release_sigma': 6.934324742e-05,
                                                              'row_clip': 146.4878172,
                                                              'selection_share': 0.8959783277},
                                                             {'clip': 7.45832993,
                                                              'noise_scale': 0.001043568843,
                                                              'release_sigma': 0.003373453045,
                                                              'row_clip': 36.39733238,
                                                              'selection_share': 0.886843826}]},
                                  'instance_family': 'model2-sparse-spike (k=3, gap=0.5)',
                                  'mode': 'simulated',
                                  'points': [(50, 48697.0),
                                             (200, 100001.0),
                                             (1000, 220676.0),
                                             (5000, 649389.0),
                                             (10000, 865974.0),
                                             (20000, 1333536.0),
                                             (100000, 3398245.0)],
                                  'source': 'benchmarks/results/sample_complexity_privcov_power_simulated.json',
                                  'target': 'sin^2 <= 0.1',
                                  'theory_points': [(50, 18743296.0),
                                                    (200, 26804224.0),
                                                    (1000, 44662784.0),
                                                    (5000, 84148224.0),
                                                    (10000, 113442816.0),
                                                    (20000, 161611776.0),
                                                    (100000, 408420352.0)]},
 ('privpca', 'simulated'): {'beta': 0.1,
                            'date': '2026-12-01',
                            'delta': 1e-06,
                            'epsilon': 1.0,
                            'fingerprint': {'digest': '86ef1bd2da08b8b7',
                                            'evaluates': 'SparsePCA(k=3, gap=0.5, sigma=1, '
                                                         'assume_centered=True).plan',
                                            'points': [{'delta': 1e-06,
                                                        'epsilon': 1.0,
                                                        'n_features': 200,
                                                        'n_samples': 1000000},
                                                       {'delta': 1e-06,
                                                        'epsilon': 1.0,
                                                        'n_features': 20000,
                                                        'n_samples': 1000000000},
                                                       {'delta': 1e-08,
                                                        'epsilon': 0.5,
                                                        'n_features': 1000,
                                                        'n_samples': 10000000}],
                                            'values': [{'n_batches': 5792,
                                                        'noise_scale': 20787.11756,
                                                        'norm_noise_scale': 1309.085013,
                                                        'pca_tests.count_test.scale': 6.0,
                                                        'pca_tests.count_test.threshold': 4735.561386,
                                                        'pca_tests.weight_test.scale': 42.0,
                                                        'pca_tests.weight_test.threshold': 5347.329704,
                                                        'tau': 0.8783732131},
                                                       {'n_batches': 5792,
                                                        'noise_scale': 818.6860983,
                                                        'norm_noise_scale': 51.52831051,
                                                        'pca_tests.count_test.scale': 6.0,
                                                        'pca_tests.count_test.threshold': 4735.561386,
                                                        'pca_tests.weight_test.scale': 42.0,
                                                        'pca_tests.weight_test.threshold': 5347.329704,
                                                        'tau': 0.03457459999},
                                                       {'n_batches': 14162,
                                                        'noise_scale': 26510.98692,
                                                        'norm_noise_scale': 1669.348882,
                                                        'pca_tests.count_test.scale': 12.0,
                                                        'pca_tests.count_test.threshold': 11588.78481,
                                                        'pca_tests.weight_test.scale': 84.0,
                                                        'pca_tests.weight_test.threshold': 13143.8937,
                                                        'tau': 0.4737527248}]},
                            'instance_family': 'model2-sparse-spike (k=3, gap=0.5)',
                            'mode': 'simulated',
                            'points': [(50, 3.924189758484536e+16),
                                       (200, 8.659643233600654e+16),
                                       (1000, 1.5399265260594922e+17),
                                       (5000, 1.6548170999431814e+17),
                                       (20000, 2.20673406908459e+17),
                                       (100000, 2.738419634264362e+17)],
                            'source': 'benchmarks/results/sample_complexity_simulated.json',
                            'target': 'sin^2 <= 0.1',
                            'theory_points': [(50, 3.433825830883977e+19),
                                              (200, 4.811941390608184e+19),
                                              (1000, 6.704621355257142e+19),
                                              (5000, 8.905530493153103e+19),
                                              (20000, 1.1055492660264436e+20),
                                              (100000, 1.3827007870948239e+20)]},
 ('thresholded', 'real'): {'beta': 0.1,
                           'date': '2026-11-30',
                           'delta': 1e-06,
                           'epsilon': 1.0,
                           'fingerprint': None,
                           'instance_family': 'construction1 (k=20)',
                           'mode': 'real',
                           'points': [(60, 56230.0), (120, 64940.0)],
                           'source': 'benchmarks/results/sample_complexity_real.json',
                           'target': '||M - Sigma||_op <= 0.25 sigma^2',
                           'theory_points': []},
 ('thresholded', 'simulated'): {'beta': 0.1,
                                'date': '2026-12-01',
                                'delta': 1e-06,
                                'epsilon': 1.0,
                                'fingerprint': {'digest': '0571dff21abe5f7b',
                                                'evaluates': 'ThresholdedCovariance(sigma=1).plan (NOT '
                                                             'PRIVATE: its threshold rule)',
                                                'points': [{'delta': 1e-06,
                                                            'epsilon': 1.0,
                                                            'n_features': 200,
                                                            'n_samples': 1000000},
                                                           {'delta': 1e-06,
                                                            'epsilon': 1.0,
                                                            'n_features': 20000,
                                                            'n_samples': 1000000000},
                                                           {'delta': 1e-08,
                                                            'epsilon': 0.5,
                                                            'n_features': 1000,
                                                            'n_samples': 10000000}],
                                                'values': [{'threshold': 0.01229655066},
                                                           {'threshold': 0.0004733057286},
                                                           {'threshold': 0.004200036638}]},
                                'instance_family': 'construction1 (k=20)',
                                'mode': 'simulated',
                                'points': [(60, 52330.0),
                                           (200, 93057.0),
                                           (600, 115478.0),
                                           (2000, 124094.0),
                                           (6000, 143302.0),
                                           (20000, 177829.0),
                                           (100000, 254831.0)],
                                'source': 'benchmarks/results/sample_complexity_simulated.json',
                                'target': '||M - Sigma||_op <= 0.25 sigma^2',
                                'theory_points': [(60, 3364864.0),
                                                  (200, 3860480.0),
                                                  (600, 4313088.0),
                                                  (2000, 4808704.0),
                                                  (6000, 5259264.0),
                                                  (20000, 5754880.0),
                                                  (100000, 6414336.0)]},
 ('thresholded_pca', 'real'): {'beta': 0.1,
                               'date': '2026-11-30',
                               'delta': 1e-06,
                               'epsilon': 1.0,
                               'fingerprint': None,
                               'instance_family': 'model2-sparse-spike (k=3, gap=0.5)',
                               'mode': 'real',
                               'points': [(60, 6494.0), (240, 7499.0), (960, 8660.0)],
                               'source': 'benchmarks/results/sample_complexity_real.json',
                               'target': 'sin^2 <= 0.1',
                               'theory_points': []},
 ('thresholded_pca', 'simulated'): {'beta': 0.1,
                                    'date': '2026-12-01',
                                    'delta': 1e-06,
                                    'epsilon': 1.0,
                                    'fingerprint': {'digest': '0f4028972be1597e',
                                                    'evaluates': 'ThresholdedPCA(sigma=1).plan(k=3) (NOT '
                                                                 'PRIVATE: its threshold rule)',
                                                    'points': [{'delta': 1e-06,
                                                                'epsilon': 1.0,
                                                                'n_features': 200,
                                                                'n_samples': 1000000},
                                                               {'delta': 1e-06,
                                                                'epsilon': 1.0,
                                                                'n_features': 20000,
                                                                'n_samples': 1000000000},
                                                               {'delta': 1e-08,
                                                                'epsilon': 0.5,
                                                                'n_features': 1000,
                                                                'n_samples': 10000000}],
                                                    'values': [{'threshold': 0.01229655066},
                                                               {'threshold': 0.0004733057286},
                                                               {'threshold': 0.004200036638}]},
                                    'instance_family': 'model2-sparse-spike (k=3, gap=0.5)',
                                    'mode': 'simulated',
                                    'points': [(50, 5623.0),
                                               (200, 6978.0),
                                               (1000, 8058.0),
                                               (5000, 8659.0),
                                               (20000, 9305.0),
                                               (100000, 10745.0)],
                                    'source': 'benchmarks/results/sample_complexity_simulated.json',
                                    'target': 'sin^2 <= 0.1',
                                    'theory_points': [(50, 742912.0),
                                                      (200, 871424.0),
                                                      (1000, 1020928.0),
                                                      (5000, 1170432.0),
                                                      (20000, 1299456.0),
                                                      (100000, 1447936.0)]},
 ('wang_xu', 'simulated'): {'beta': 0.1,
                            'date': '2026-12-01',
                            'delta': 1e-06,
                            'epsilon': 1.0,
                            'fingerprint': {'digest': '7ac968310609b892',
                                            'evaluates': 'GaussianCovariance(sigma=1, '
                                                         'assume_centered=True).plan',
                                            'points': [{'delta': 1e-06,
                                                        'epsilon': 1.0,
                                                        'n_features': 200,
                                                        'n_samples': 1000000},
                                                       {'delta': 1e-06,
                                                        'epsilon': 1.0,
                                                        'n_features': 20000,
                                                        'n_samples': 1000000000},
                                                       {'delta': 1e-08,
                                                        'epsilon': 0.5,
                                                        'n_features': 1000,
                                                        'n_samples': 10000000}],
                                            'values': [{'clip': 6.812954203,
                                                        'gaussian_sigma': 0.07843773537,
                                                        'threshold': 0.4106987857},
                                                       {'clip': 8.33319842,
                                                        'gaussian_sigma': 0.01174614773,
                                                        'threshold': 0.07858220331},
                                                       {'clip': 7.3648076,
                                                        'gaussian_sigma': 0.1070014058,
                                                        'threshold': 0.6117211078}]},
                            'instance_family': 'construction1 (k=20)',
                            'mode': 'simulated',
                            'points': [(60, 2548297.0),
                                       (200, 11547821.0),
                                       (600, 42169655.0),
                                       (2000, 153992670.0),
                                       (6000, 604296458.0),
                                       (20000, 2206734317.0),
                                       (100000, 15399266991.0)],
                            'source': 'benchmarks/results/sample_complexity_simulated.json',
                            'target': '||M - Sigma||_op <= 0.25 sigma^2',
                            'theory_points': [(60, 28655616.0),
                                              (200, 95485952.0),
                                              (600, 304087040.0),
                                              (2000, 1115684864.0),
                                              (6000, 3699376128.0),
                                              (20000, 13899923456.0),
                                              (100000, 85832237056.0)]},
 ('wang_xu_pca', 'real'): {'beta': 0.1,
                           'date': '2026-11-30',
                           'delta': 1e-06,
                           'epsilon': 1.0,
                           'fingerprint': None,
                           'instance_family': 'model2-sparse-spike (k=3, gap=0.5)',
                           'mode': 'real',
                           'points': [(20, 237100.0), (40, 562300.0), (80, 1155000.0)],
                           'source': 'benchmarks/results/sample_complexity_real.json',
                           'target': 'sin^2 <= 0.1',
                           'theory_points': []},
 ('wang_xu_pca', 'simulated'): {'beta': 0.1,
                                'date': '2026-12-01',
                                'delta': 1e-06,
                                'epsilon': 1.0,
                                'fingerprint': {'digest': '8608af7205dcc234',
                                                'evaluates': 'GaussianPCA(sigma=1, '
                                                             'assume_centered=True).plan(k=3)',
                                                'points': [{'delta': 1e-06,
                                                            'epsilon': 1.0,
                                                            'n_features': 200,
                                                            'n_samples': 1000000},
                                                           {'delta': 1e-06,
                                                            'epsilon': 1.0,
                                                            'n_features': 20000,
                                                            'n_samples': 1000000000},
                                                           {'delta': 1e-08,
                                                            'epsilon': 0.5,
                                                            'n_features': 1000,
                                                            'n_samples': 10000000}],
                                                'values': [{'clip': 6.812954203,
                                                            'gaussian_sigma': 0.07843773537,
                                                            'threshold': 0.4106987857},
                                                           {'clip': 8.33319842,
                                                            'gaussian_sigma': 0.01174614773,
                                                            'threshold': 0.07858220331},
                                                           {'clip': 7.3648076,
                                                            'gaussian_sigma': 0.1070014058,
                                                            'threshold': 0.6117211078}]},
                                'instance_family': 'model2-sparse-spike (k=3, gap=0.5)',
                                'mode': 'simulated',
                                'points': [(50, 697831.0),
                                           (200, 3162280.0),
                                           (1000, 20535265.0),
                                           (5000, 115478281.0),
                                           (20000, 523299489.0),
                                           (100000, 3162279922.0)],
                                'source': 'benchmarks/results/sample_complexity_simulated.json',
                                'target': 'sin^2 <= 0.1',
                                'theory_points': [(50, 9617408.0),
                                                  (200, 41058304.0),
                                                  (1000, 236060672.0),
                                                  (5000, 1385168896.0),
                                                  (20000, 6371147776.0),
                                                  (100000, 38084280320.0)]}}


def build_table(paths=SOURCES) -> dict:
    """:data:`TABLE` as the results files ``paths`` give it (later files win on a shared key)."""
    out: dict = {}
    for path in paths:
        out.update(table_from_results(path))
    return out


def table_from_results(path: str) -> dict:
    """Table entries (the shape of :data:`TABLE`) from a ``sample_complexity_<mode>.json``."""
    with open(path) as fh:
        res = json.load(fh)
    out = {}
    for name, r in res["methods"].items():
        inst = r["instances"][0]
        family = inst.get("instance", "?")
        family += f" (k={r['k']}" + (f", gap={inst['gap']}" if "gap" in inst and family.startswith("model2") else "") + ")"
        target = ("||M - Sigma||_op <= %g sigma^2" if r["problem"] == "covariance" else "sin^2 <= %g") % r["target"]
        out[(name, res["mode"])] = {
            "instance_family": family, "target": target, "epsilon": res["epsilon"], "delta": res["delta"],
            "beta": res["beta"], "mode": res["mode"], "source": f"benchmarks/results/{os.path.basename(path)}",
            "date": res["date"], "points": [(row["d"], row["n_star"]) for row in r["rows"] if row["reached"]],
            "theory_points": [(row["d"], row["theory_n"]) for row in r["rows"] if row["reached"] and row.get("theory_n")],
            "fingerprint": res.get("fingerprints", {}).get(name),
        }
    return out


def table_status(method: str, mode: str = "simulated") -> dict | None:
    """Whether the table's entry for ``method`` still describes today's code: ``{"status":
    "fresh" | "stale" | "unfingerprinted", "differences": [...]}`` (None when there is no entry)."""
    from dpdist.experiments.fingerprint import current_fingerprint, diff

    entry = TABLE.get((method, mode))
    if entry is None:
        return None
    recorded = entry.get("fingerprint")
    if recorded is None:
        return {"status": "unfingerprinted", "differences": []}
    current = current_fingerprint(method)
    if current is None or current["digest"] == recorded.get("digest"):
        return {"status": "fresh", "differences": []}
    return {"status": "stale", "differences": diff(recorded, current) or ["digest differs"]}


def _loglog(points, d: float) -> tuple[float, bool] | None:
    """Value at d: exact at a point, log-log interpolated between two, None outside."""
    pts = sorted(points)
    if not pts or d < pts[0][0] or d > pts[-1][0]:
        return None
    for (d0, n0), (d1, n1) in zip(pts, pts[1:]):
        if d0 < d < d1:
            t = (math.log(d) - math.log(d0)) / (math.log(d1) - math.log(d0))
            return math.exp(math.log(n0) + t * (math.log(n1) - math.log(n0))), True
    return float(dict(pts)[d]) if d in dict(pts) else float(pts[-1][1]), False


def measured_n_star(method: str, n_features: float, *, mode: str = "simulated") -> EmpiricalNStar | None:
    """The measured n* of ``method`` at dimension ``n_features``: exact at a measured d,
    log-log interpolated between two measured d, None outside the measured range (or when
    the method was not measured in that mode). None, too, when the entry is stale: its results
    file's fingerprint differs from today's code (:func:`table_status` says where)."""
    entry = TABLE.get((method, mode))
    if entry is None:
        return None
    status = table_status(method, mode)
    if status["status"] == "stale":
        return None
    d = float(n_features)
    if not (math.isfinite(d) and d > 0):
        raise ValidationError(f"n_features must be a positive number, got {n_features!r}")
    found = _loglog(entry["points"], d)
    if found is None:
        return None
    value, interp = found
    keys = ("instance_family", "target", "epsilon", "delta", "beta", "mode", "source", "date")
    checked = {} if status["status"] == "unfingerprinted" else {"fingerprint": "matches this code"}
    return EmpiricalNStar(method, d, float(value), interp, **{k: entry[k] for k in keys}, **checked)


def theory_n_star(method: str, n_features: int, *, k: int, sigma: float, target: float, epsilon: float,
                  delta: float, gap: float | None = None) -> float | None:
    """The estimator's own planning value for the same target (theorem constants): the least n
    at which its ``plan()`` bound meets ``target`` (alpha for covariance, sin^2 for PCA).
    None when the estimator plans no such bound."""
    import dpdist
    from dpdist.experiments.methods import PRIVCOV_SELECTIONS
    from dpdist.privacy.calibration import search_min_samples

    d = int(n_features)
    s2 = sigma * sigma
    try:
        if method in PRIVCOV_SELECTIONS:
            selection = PRIVCOV_SELECTIONS[method]
            return float(dpdist.SparseCovariance(k, epsilon, delta, sigma=sigma, selection=selection,
                                                    assume_centered=True)
                         .min_samples(target * s2, d))
        if method in ("wang_xu", "thresholded"):
            est = (dpdist.baselines.GaussianPCA(epsilon, delta, sigma=sigma, assume_centered=True)
                   if method == "wang_xu"
                   else dpdist.baselines.ThresholdedPCA(sigma=sigma))
            return float(search_min_samples(lambda n: est.plan(n, d, k=k)["operator_error_bound"], target * s2,
                                            start=4, limit=1 << 62))
        if method in ("wang_xu_pca", "thresholded_pca"):
            est = (dpdist.baselines.GaussianPCA(epsilon, delta, sigma=sigma, assume_centered=True)
                   if method == "wang_xu_pca"
                   else dpdist.baselines.ThresholdedPCA(sigma=sigma))
            return float(search_min_samples(lambda n: est.plan(n, d, k=k, eigengap=gap * s2)["sin2_bound"], target,
                                            start=4, limit=1 << 62))
        if method == "privpca":
            return float(dpdist.SparsePCA(k, epsilon, delta, gap=gap, sigma=sigma, assume_centered=True)
                         .min_samples(target, d))
        if method == "expmech":
            return float(dpdist.ExpMechSparsePCA(k, epsilon, delta, sigma=sigma).min_samples(target, d,
                                                                                             eigengap=gap * s2))
        if method == "privcov_power":
            return float(dpdist.SparseCovariancePCA(k, epsilon, delta, sigma=sigma).min_samples(target, d,
                                                                                                eigengap=gap * s2))
    except ValidationError:
        return None
    return None


def planning_rows(dims=(1000, 10000, 100000), *, mode: str = "simulated") -> list[dict]:
    """Theory vs measured n* for every method in :data:`TABLE` at the given d (README rows):
    both interpolated log-log between the measured grid points, neither for a stale entry (the theory value is the
    estimator's own ``plan()``/``min_samples()`` bound for the same target, budget and instance
    parameters, recorded next to each measurement)."""
    rows = []
    for (method, m), entry in sorted(TABLE.items()):
        if m != mode:
            continue
        stale = table_status(method, mode)["status"] == "stale"
        for d in dims:
            meas = measured_n_star(method, d, mode=mode)
            th = None if stale else _loglog(entry.get("theory_points", []), float(d))
            theory = None if th is None else th[0]
            rows.append({"method": method, "d": d, "theory_n": theory,
                         "measured_n": None if meas is None else meas.n_star,
                         "ratio": None if (meas is None or theory is None) else theory / meas.n_star,
                         "instance_family": entry["instance_family"], "target": entry["target"],
                         "source": entry["source"], "date": entry["date"], "label": "empirical"})
    return rows


#: Row labels of :func:`planning_table`, in order (methods of :data:`TABLE`'s simulated entries).
PLANNING_LABELS = {
    "privcov": 'PrivCov, `selection="paper"` (Algorithm 1)',
    "privcov_gumbel": 'PrivCov, default (`selection="gumbel"`, row clip)',
    "wang_xu": "Wang-Xu (`GaussianCovariance`)",
    "thresholded": "thresholded, NOT PRIVATE",
    "privpca": "PrivPCA (`SparsePCA`)",
    "privcov_power": "`SparseCovariancePCA` (PrivCov default + power method)",
    "wang_xu_pca": "Wang-Xu PCA (`GaussianPCA`)",
    "thresholded_pca": "thresholded PCA, NOT PRIVATE",
}


def _short(x: float | None) -> str:
    """``4.3e10`` style (two significant digits), or ``-`` when there is no value."""
    if x is None:
        return "-"
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def planning_table(dims=(1000, 10000, 100000)) -> str:
    """The markdown table of theorem / measured n* at ``dims`` (docs/planning.md prints it; a
    test checks that the two agree): :func:`planning_rows` of the simulated entries, ``-`` where
    the results files have no value (d outside the measured grid)."""
    rows = {(r["method"], r["d"]): r for r in planning_rows(dims)}
    head = "| method | " + " | ".join(f"d = {d:,}: theorem / measured" for d in dims) + " |"
    lines = [head, "|---|" + "---|" * len(dims)]
    for method, label in PLANNING_LABELS.items():
        if (method, dims[0]) not in rows:
            continue
        cells = [f"{_short(rows[method, d]['theory_n'])} / {_short(rows[method, d]['measured_n'])}" for d in dims]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
