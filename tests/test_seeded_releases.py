"""Seeded releases of every public estimator, baseline and functional form, pinned bit for bit.

Each entry of :mod:`tests.estimator_zoo` (``FITS``, ``FUNCTIONAL_FORMS``, ``VARIANTS``) is fitted
with ``random_state=SEED`` on the synchronous scheduler, and the cheapest one once more on the
default scheduler. Every released value (every array, scalar and sparse matrix in
``Release.values``, nested dicts and tuples included) is compared with ``seeded_releases.json``,
recorded once from an unchanged package: the sha256 of its little-endian float64 / int64 bytes,
its shape and dtype, and its values in full ``repr`` precision (so that a mismatch can be read).
The release's mechanism name, status and privacy spent are compared as well. A reorganisation
of the package that keeps every release bit for bit keeps this test green; one that changes a
single bit of a released value does not.

Platform: the released values go through BLAS and LAPACK kernels (Gram matrices, eigensolvers),
whose last bits depend on the library and on the CPU's instruction set. The record names the
platform it was made on (numpy and scipy versions, BLAS, CPU model and the vector-instruction
flags that choose kernels). On that platform every value must match bit for bit. On another
one (a fresh CI machine) bit equality would fail for reasons that are not a change of the
package, so floating-point values are compared with rtol 1e-9 and integer values (supports,
selected indices, sparsity patterns) exactly: a changed formula still moves values far more
than 1e-9, while kernel rounding moves them by about 1e-15.

Record again (only from a package whose releases are known to be right, never to make this test
pass): ``python -m tests.test_seeded_releases --record``.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy
import scipy.sparse as sp

from dpdist.exceptions import NoPrivateResult
from tests.estimator_zoo import FITS, FUNCTIONAL_FORMS, VARIANTS, release_of

RECORD = Path(__file__).with_name("seeded_releases.json")
SEED = 5
#: Every entry runs on the synchronous scheduler; these also run on the default one.
DEFAULT_SCHEDULER = ("one_shot_second_moment",)
ENTRIES = {**FITS, **FUNCTIONAL_FORMS, **VARIANTS}
#: Values stored in full per array (all of them when the array is this small, else the first few).
FULL_VALUES = 512
HEAD = 8
#: CPU flags that choose BLAS kernels (and so the last bits of a Gram matrix or eigenvector).
CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni",
             "avx512_bf16", "amx_tile", "asimd", "sve")
RTOL = 1e-9
ATOL = 1e-12


def cases() -> list[tuple[str, str, object]]:
    """(key, entry name, scheduler) of every recorded release."""
    out = [(name, name, "synchronous") for name in ENTRIES]
    out += [(f"{name}@default-scheduler", name, None) for name in DEFAULT_SCHEDULER]
    return out


def seeded_release(name: str, scheduler):
    fit, data = ENTRIES[name]
    X = data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # every seeded release warns that it is not private
        try:
            return release_of(fit(X, SEED, scheduler))
        except NoPrivateResult as exc:  # a test returned bottom: the rejected release is pinned
            return exc.release


def _leaves(obj, path: str):
    """(path, numpy array) of every released value, sparse matrices as their sorted CSR arrays."""
    if isinstance(obj, dict):
        for key in sorted(obj, key=str):
            yield from _leaves(obj[key], f"{path}.{key}" if path else str(key))
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            yield from _leaves(item, f"{path}[{i}]")
    elif sp.issparse(obj):
        csr = sp.csr_array(obj, copy=True)
        csr.sort_indices()
        yield f"{path}.shape", np.asarray(csr.shape, dtype=np.int64)
        yield f"{path}.indptr", csr.indptr.astype(np.int64)
        yield f"{path}.indices", csr.indices.astype(np.int64)
        yield f"{path}.data", csr.data
    else:
        arr = np.asarray(obj)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"{path}: released value of unexpected type {type(obj).__name__} ({arr.dtype})")
        yield path, arr


def _canonical(arr: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(arr, dtype="<f8" if arr.dtype.kind == "f" else "<i8")


def describe_array(arr: np.ndarray) -> dict:
    canon = _canonical(arr)
    flat = canon.ravel().tolist()
    return {
        "dtype": str(arr.dtype),
        "shape": list(arr.shape),
        "sha256": hashlib.sha256(canon.tobytes()).hexdigest(),
        "values" if canon.size <= FULL_VALUES else "head": flat if canon.size <= FULL_VALUES else flat[:HEAD],
    }


def describe_release(rel) -> dict:
    return {
        "mechanism": rel.mechanism,
        "status": rel.status,
        "privacy": rel.privacy.to_dict() if rel.privacy is not None else None,
        "values": describe_values(rel.values),
    }


def describe_values(values: dict) -> dict:
    return {path: describe_array(arr) for path, arr in _leaves(values, "")}


def platform_fingerprint() -> dict:
    """What decides the last bits of the BLAS and LAPACK kernels on this machine."""
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())  # the first processor's
    except OSError:
        pass
    model = info.get("model name") or info.get("Model") or platform.processor()
    flags = set((info.get("flags") or info.get("Features") or "").split())
    return {
        "machine": platform.machine(),
        "cpu_model": model,
        "cpu_flags": sorted(f for f in CPU_FLAGS if f in flags),
        "numpy": np.__version__,
        "numpy_blas": _blas_name(np),
        "scipy": scipy.__version__,
        "scipy_blas": _blas_name(scipy),
    }


def _blas_name(module) -> str | None:
    try:
        config = module.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return f"{blas.get('name')} {blas.get('version')}"
    except Exception:  # noqa: BLE001 - an old build without the dict form: unknown, so never "same platform"
        return None


def _recorded_commit() -> str:
    """The commit of the package the record is made from; refuses a package with uncommitted changes."""
    root = Path(__file__).resolve().parents[1]
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "dpdist"], cwd=root, capture_output=True,
                           text=True, check=True).stdout
    if dirty.strip():
        raise SystemExit(f"refusing to record: dpdist/ has uncommitted changes:\n{dirty}")
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                          check=True).stdout.strip()


def record() -> None:
    releases = {key: describe_release(seeded_release(name, scheduler)) for key, name, scheduler in cases()}
    doc = {
        "recorded_from_commit": _recorded_commit(),
        "seed": SEED,
        "platform": platform_fingerprint(),
        "releases": releases,
    }
    RECORD.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"recorded {len(releases)} releases to {RECORD}")


# ---------------------------------------------------------------------------------------
# the test
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def recorded() -> dict:
    return json.loads(RECORD.read_text())


def test_every_entry_is_recorded(recorded):
    assert sorted(recorded["releases"]) == sorted(key for key, _, _ in cases())


@pytest.mark.parametrize("key, name, scheduler", cases(), ids=[key for key, _, _ in cases()])
def test_seeded_release_is_bit_for_bit_the_recorded_one(key, name, scheduler, recorded):
    want = recorded["releases"][key]
    got = describe_release(seeded_release(name, scheduler))
    assert (got["mechanism"], got["status"], got["privacy"]) == (want["mechanism"], want["status"], want["privacy"])
    assert sorted(got["values"]) == sorted(want["values"]), "released fields differ"
    same_platform = platform_fingerprint() == recorded["platform"]
    for path, w in want["values"].items():
        g = got["values"][path]
        where = f"{key}: {path}"
        assert (g["dtype"], g["shape"]) == (w["dtype"], w["shape"]), where
        field = "values" if "values" in w else "head"
        if same_platform or not w["dtype"].startswith("float"):
            # the values first, so that a mismatch reads as numbers; the hash then catches what
            # equality does not (the sign of a zero, values past the stored head)
            np.testing.assert_array_equal(np.array(g[field]), np.array(w[field]), err_msg=where)
            assert g["sha256"] == w["sha256"], where
        else:
            np.testing.assert_allclose(np.array(g[field], dtype=float), np.array(w[field], dtype=float),
                                       rtol=RTOL, atol=ATOL, err_msg=where)


def test_a_flipped_bit_is_caught():
    """The description changes when one released value moves by one unit in the last place."""
    values = {"a": np.array([0.1, 0.2, 0.3]), "m": sp.csr_array(np.array([[1.0, 0.0], [0.0, 2.0]]))}
    before = describe_values(values)
    values["a"][1] = np.nextafter(values["a"][1], 1.0)
    assert describe_values(values)["a"]["sha256"] != before["a"]["sha256"]
    values["m"].data[0] = np.nextafter(1.0, 2.0)
    assert describe_values(values)["m.data"]["sha256"] != before["m.data"]["sha256"]


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        raise SystemExit("usage: python -m tests.test_seeded_releases --record")
    record()
