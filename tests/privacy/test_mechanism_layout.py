"""privacy/ reads as noise/ (primitives), mechanisms/ (one module per mechanism) and the
accounting modules.

Each mechanism lives in one place, ``dpdist/privacy/mechanisms/<key>.py`` (or a small package
``mechanisms/<key>/`` where one module would pass the size limit): its calibration from public
parameters, the noise callables its object hands to the engine, and the event it states. The
table below builds every mechanism class of every such unit through the unit's own
calibration and checks what it states and draws; a unit without an entry, a class no entry
builds, or a calibration that lives elsewhere fails. Random numbers are drawn only in
``privacy/noise/``: the scan below finds no draw anywhere else in privacy/.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import numpy as np
import pytest

import dpdist.privacy
from dpdist.privacy.events import Event, event_from_dict
from dpdist.privacy.mechanisms import expmech, gaussian, mean, second_moment, subsample_aggregate
from dpdist.privacy.mechanisms.base import Mechanism
from dpdist.privacy.mechanisms.privcov import calibration as privcov_cal
from dpdist.privacy.mechanisms.privcov import mechanism as privcov_mech
from dpdist.privacy.mechanisms.privcov import zcdp_calibration as privcov_zcdp
from dpdist.privacy.mechanisms.privpca import calibration as privpca_cal
from dpdist.privacy.mechanisms.privpca import mechanism as privpca_mech
from dpdist.privacy.noise.streams import NoiseSeed

PRIVACY = Path(dpdist.privacy.__file__).resolve().parent
MECHANISMS = PRIVACY / "mechanisms"
#: What the mechanism modules share; not a mechanism.
SHARED = {"__init__", "base"}


def _units() -> dict[str, list[str]]:
    """key -> the modules of that mechanism (a module, or every module of a package)."""
    units = {}
    for path in sorted(MECHANISMS.iterdir()):
        if path.suffix == ".py" and path.stem not in SHARED:
            units[path.stem] = [f"dpdist.privacy.mechanisms.{path.stem}"]
        elif path.is_dir() and (path / "__init__.py").exists():
            pkg = importlib.import_module(f"dpdist.privacy.mechanisms.{path.name}")
            units[path.name] = [pkg.__name__] + [m.name for m in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + ".")]
    return units


def _mechanism_classes(modules: list[str]) -> set[type]:
    found = set()
    for name in modules:
        module = importlib.import_module(name)
        found |= {obj for _, obj in inspect.getmembers(module, inspect.isclass)
                  if issubclass(obj, Mechanism) and obj is not Mechanism and obj.__module__ == name}
    return found


# key -> [(the unit's calibration, its public arguments, how the mechanism is built from what it returns)]
BUILDS = {
    "privcov": [
        (privcov_cal.privcov_calibration, (1.0, 1e-5, 1000, 10, 2, 1.0),
         privcov_mech.PrivCovMechanism.from_calibration),
        (privcov_zcdp.privcov_zcdp_calibration, (1.0, 1e-5, 1000, 10, 2, 1.0),
         privcov_mech.PrivCovZCDPMechanism.from_calibration),
        (privcov_zcdp.privcov_gumbel_calibration, (1.0, 1e-5, 1000, 10, 2, 1.0),
         privcov_mech.PrivCovGumbelMechanism.from_calibration),
    ],
    "privpca": [
        (privpca_cal.friendly_test_calibration, (1.0, 1e-6, 100),
         lambda cal: privpca_mech.FriendlyTestMechanism.from_calibration(cal, "norm")),
        (privpca_cal.privnorm_calibration, (1.0, 1e-6, 3, 0.1), privpca_mech.PrivNormMechanism.from_calibration),
        (privpca_cal.privpca_calibration, (1.0, 1e-6, 2, 0.05, 0.25, 3.0),
         lambda cal: privpca_mech.PrivPCAMechanism.from_calibration(cal, 8)),
    ],
    "expmech": [
        (expmech.expmech_calibration, (1.0, 1e-6, 1000, 8, 2, 1.0), expmech.ExpMechMechanism.from_calibration),
    ],
    "gaussian": [
        (gaussian.wang_xu_calibration, (1.0, 1e-6, 1000, 6, 1.0), lambda cal: gaussian.wang_xu_mechanism(cal, 6)),
        (gaussian.analyze_gauss_calibration, (1.0, 1e-6, 1000, 2.0),
         lambda cal: gaussian.analyze_gauss_mechanism(cal, 6)),
    ],
    "second_moment": [
        (lambda: second_moment.level_schedule(10_000, 4, 1.0, m=8, radius=3.0), (),
         lambda schedule: second_moment.level_mechanisms(schedule)[0]),
        (second_moment.histogram_sigma, (0.1,), lambda _: second_moment.histogram_mechanism("radius", 0.1)),
    ],
    "subsample_aggregate": [
        (subsample_aggregate.tlap_support, (subsample_aggregate.agreement_sensitivity(10), 1.0, 1e-6),
         lambda support: subsample_aggregate.subsample_aggregate_mechanism(1.0, 1e-6, 10, support, eta_b=0.5)),
    ],
    "mean": [
        (mean.ClippedMeanMechanism.calibrate, (1.0, 1e-6, 1000, 5, 2.0), lambda mech: mech),
    ],
}
#: Calibrations written as lambdas (keyword arguments): the function they call.
CALLS = {"second_moment": [second_moment.level_schedule, second_moment.histogram_sigma]}


def _built(key):
    for calibrate, args, build in BUILDS[key]:
        yield calibrate, build(calibrate(*args))


def test_every_mechanism_module_has_an_entry_and_every_entry_a_module():
    units = _units()
    assert {"privcov", "privpca", "expmech", "gaussian", "second_moment", "subsample_aggregate", "mean"} <= set(units)
    assert set(units) == set(BUILDS)


@pytest.mark.parametrize("key", sorted(BUILDS))
def test_each_unit_calibrates_every_mechanism_class_it_defines(key):
    """The calibration that builds a unit's mechanisms is defined in the unit, and every
    mechanism class of the unit is built by one of them."""
    modules = _units()[key]
    classes = _mechanism_classes(modules)
    assert classes, f"mechanisms/{key} defines no mechanism"
    calibrations = CALLS.get(key) or [c for c, _, _ in BUILDS[key]]
    for fn in calibrations:
        assert fn.__module__ in modules, f"{fn.__qualname__} of {key} lives in {fn.__module__}"
    built = {type(mech) for _, mech in _built(key)}
    assert classes <= built, f"no entry builds {sorted(c.__name__ for c in classes - built)}"


@pytest.mark.parametrize("key", sorted(BUILDS))
def test_each_mechanism_states_its_event_and_hands_out_its_noise(key):
    for _, mech in _built(key):
        event = mech.event()
        assert isinstance(event, Event)
        assert event_from_dict(event.to_dict()).to_dict() == event.to_dict()
        assert mech.describe()["event"] == event.to_dict()
        laws = mech.laws()
        assert laws and set(laws) <= set(mech.purposes()), type(mech).__name__
        for role in laws:
            first = mech.field(role, NoiseSeed(7, True)).units(np.arange(4), np.arange(4))
            again = mech.field(role, NoiseSeed(7, True)).units(np.arange(4), np.arange(4))
            other = mech.field(role, NoiseSeed(8, True)).units(np.arange(4), np.arange(4))
            assert first.shape == (4, 4) and np.array_equal(first, np.rint(first))
            assert np.array_equal(first, again), "the noise is a function of (seed, purpose, address)"
            assert not np.array_equal(first, other), "another seed draws other noise"


# ------------------------------------------------------------------------- draws only in noise/
#: Modules that produce randomness; importing them is drawing.
RANDOM_MODULES = {"random", "secrets", "randomgen", "numpy.random", "scipy.stats"}
#: The keyed streams' raw draws and the float samplers: callable only from noise/.
STREAM_DRAWS = {"raw", "uniforms", "uniforms_at", "chacha20_words", "_chacha", "laplace_from_uniform",
                "gaussian_from_uniform", "bounded_laplace_from_uniform"}


def draws(source: str) -> list[str]:
    """Where ``source`` draws random numbers itself: imports of a random module, ``np.random``,
    ``.rvs``, or a call of a stream's raw draw."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno} import {a.name}" for a in node.names
                      if a.name in RANDOM_MODULES or a.name.split(".")[0] in {"random", "secrets", "randomgen"}]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module in RANDOM_MODULES or node.module.split(".")[0] in {"random", "secrets", "randomgen"}:
                found.append(f"{node.lineno} from {node.module}")
            found += [f"{node.lineno} import {a.name}" for a in node.names
                      if a.name in STREAM_DRAWS or f"{node.module}.{a.name}" in RANDOM_MODULES]
        elif isinstance(node, ast.Attribute) and node.attr in {"random", "rvs"}:
            found.append(f"{node.lineno} .{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if name in STREAM_DRAWS:
                found.append(f"{node.lineno} {name}()")
    return found


def test_nothing_in_privacy_outside_noise_draws_random_numbers():
    bad = []
    for path in sorted(PRIVACY.rglob("*.py")):
        rel = path.relative_to(PRIVACY)
        if rel.parts[0] != "noise":
            bad += [f"{rel.as_posix()}:{hit}" for hit in draws(path.read_text())]
    assert not bad, "random numbers drawn outside privacy/noise/: " + ", ".join(bad)


def test_the_draw_scan_finds_the_draws_of_noise_and_of_a_module_that_draws():
    """The rule is not vacuous: the scan sees the draws noise/ does make, and each form of a
    direct draw."""
    noise = PRIVACY / "noise"
    assert draws((noise / "streams.py").read_text())  # secrets, randomgen
    assert draws((noise / "lattice.py").read_text())  # seed.raw, chacha20_words
    for snippet in ("import numpy as np\nx = np.random.default_rng(0).normal()\n",
                    "from numpy.random import default_rng\n",
                    "import secrets\n",
                    "from scipy import stats\ny = stats.norm.rvs()\n",
                    "from dpdist.privacy.noise.streams import chacha20_words\n",
                    "def f(seed):\n    return seed.uniforms('p', 0, 0, 3)\n"):
        assert draws(snippet), snippet
    assert not draws("import numpy as np\nfrom dpdist.privacy.noise.lattice import LatticeField\n")
