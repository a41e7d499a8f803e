"""Noise throughput on one core, every number measured in the same run.

- Generators: 64-bit words/s of ChaCha20 (dpdist's CSPRNG), and of the alternatives that keep a
  CSPRNG (randomgen ChaCha with 12 and 8 rounds, AES-128 counter mode with AES-NI), and of
  NumPy's PCG64 (not cryptographic; the reference of speed).
- Samplers (samples/s): today's inverse-CDF Laplace and Gaussian (``laplace_from_uniform``,
  ``gaussian_from_uniform`` on ChaCha20 uniforms), the float-safe lattice Laplace and Gaussian
  (:mod:`dpdist.privacy.noise.lattice`, one ChaCha20 word per sample), and the lattice Laplace fed by
  each alternative generator's words.
- Releases of a d x d tile: a float inverse-CDF ``values + noise`` against the float-safe
  ``LatticeField`` release, and the Gram matrix that the tile's noise perturbs (20 d rows).
- The exponential mechanism: keys/s of today's Gumbel keys and of the exact Gumbel-max.
- Mechanism objects: PrivCov's release of d (k + 1) scattered entries by
  :class:`~dpdist.privacy.mechanisms.privcov.mechanism.PrivCovMechanism` against the float
  ``FloatLaplaceField.add_at``; and PrivCov end to end (``private_sparse_covariance``, synchronous
  scheduler) against the clipped second moment (the Gram) of the same data, in a subprocess
  per tree. With ``DPDIST_BENCH_REFERENCE=PATH`` (a tree holding an older ``dpdist``, e.g.
  ``git archive main | tar -x -C PATH``) the same end-to-end measurement runs on that tree
  too, interleaved, and the before/after ratio of (fit / Gram) is reported.

BLAS is limited to one thread so every number is one core's. Sizes: 20e6 samples and d = 2000
by default, DPDIST_BENCH_SCALE multiplies them; ``--smoke`` runs tiny sizes.

Usage: python benchmarks/bench_noise.py [--smoke] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np



class FloatLaplaceField:
    """The reference float release: Laplace noise by inverse CDF at entry (i, j) = position j
    of stream i (the stream layout of the lattice fields), not float-safe."""

    def __init__(self, seed, purpose: str, scale: float) -> None:
        self.seed, self.key, self.scale = seed, seed.key(purpose), float(scale)

    def __call__(self, rows, cols):
        from dpdist.privacy.noise.streams import laplace_from_uniform

        r0, c0, nc = int(rows[0]), int(cols[0]), len(cols)
        u = np.stack([self.seed.uniforms(self.key, r0 + a, c0, nc) for a in range(len(rows))])
        return laplace_from_uniform(u, self.scale)

    def add_at(self, rows, cols, values):
        from dpdist.privacy.noise.streams import chacha20_words, laplace_from_uniform

        words = chacha20_words(self.seed, self.key, np.asarray(rows, np.uint64), np.asarray(cols, np.uint64))
        u = ((words >> np.uint64(11)).astype(np.float64) + 0.5) * (2.0**-53)
        return np.asarray(values, dtype=np.float64) + laplace_from_uniform(u, self.scale)


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def race(fns: dict, repeats: int) -> dict:
    """Best time of each function, the functions interleaved round by round (on a shared
    machine, load bursts then hit every contender alike instead of one)."""
    best = {name: float("inf") for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


#: PrivCov end to end on one tree: best-of fit and Gram times (run in a subprocess whose
#: PYTHONPATH is the tree, so the "before" tree's dpdist is the one imported).
_E2E = r"""
import json, sys, time, warnings
import numpy as np
from threadpoolctl import threadpool_limits
import dask.array as da
import dpdist
from dpdist.algorithms.sparse_covariance import private_sparse_covariance
from dpdist.engine.gram import clipped_second_moment
n, d, k, repeats = (int(a) for a in sys.argv[1:5])
X = da.from_array(np.random.default_rng(0).standard_normal((n, d)), chunks=(max(1, n // 4), d))
best = {"fit_s": float("inf"), "gram_s": float("inf")}
with threadpool_limits(1), warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for _ in range(repeats):
        t0 = time.perf_counter()
        clipped_second_moment(X, 2.0).compute(scheduler="synchronous")
        best["gram_s"] = min(best["gram_s"], time.perf_counter() - t0)
        t0 = time.perf_counter()
        private_sparse_covariance(X, k, 1.0, 1e-5, clip=2.0, random_state=1, scheduler="synchronous")
        best["fit_s"] = min(best["fit_s"], time.perf_counter() - t0)
print(json.dumps({**best, "dpdist": dpdist.__file__}))
"""


def privcov_end_to_end(tree: str, n: int, d: int, k: int, repeats: int) -> dict:
    import subprocess

    env = {**os.environ, "PYTHONPATH": tree, "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run([sys.executable, "-c", _E2E, str(n), str(d), str(k), str(repeats)], env=env, check=True,
                         capture_output=True, text=True, timeout=1800)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    from randomgen import AESCounter, ChaCha
    from threadpoolctl import threadpool_limits

    from dpdist.privacy.noise.gumbel import GumbelMax
    from dpdist.privacy.noise.lattice import LatticeField, LatticeNoise, sample_units
    from dpdist.privacy.noise.streams import NoiseSeed, gaussian_from_uniform, laplace_from_uniform

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--smoke", action="store_true", default=os.environ.get("DPDIST_BENCH_SMOKE") == "1")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    scale_env = float(os.environ.get("DPDIST_BENCH_SCALE", "1"))
    count = 200_000 if args.smoke else int(20_000_000 * scale_env)
    d = 200 if args.smoke else int(2000 * scale_env**0.5)
    repeats = 1 if args.smoke else 3
    seed = NoiseSeed(1, seeded=True)
    key = seed.key("bench")
    res: dict = {"count": count, "d": d, "one_core": True}

    with threadpool_limits(1):
        # generators: words/s
        gens = {
            "chacha20": ChaCha(key=1, counter=0),
            "chacha12": ChaCha(key=1, counter=0, rounds=12),
            "chacha8": ChaCha(key=1, counter=0, rounds=8),
            "aes128_ctr": AESCounter(key=1, counter=0),
            "pcg64": np.random.PCG64(1),
        }
        for name, bg in gens.items():
            res[f"{name}_words_per_s"] = count / best_of(lambda bg=bg: bg.random_raw(count), repeats)

        # samplers: samples/s, raced against each other
        lap = LatticeNoise.for_scale("laplace", 1.0)
        gau = LatticeNoise.for_scale("gaussian", 1.0)
        for noise in (lap, gau):  # warm-up: imports mpmath for the rare exact resolutions
            LatticeField(seed, "warm-up", noise).vector_units(0, 1 << 20)
        no_fallback = lambda e: iter(())  # noqa: E731 (words from other generators: speed only)
        fns = {
            "inverse_cdf_laplace": lambda: laplace_from_uniform(seed.uniforms(key, 0, 0, count), 1.0),
            "inverse_cdf_gaussian": lambda: gaussian_from_uniform(seed.uniforms(key, 0, 0, count), 1.0),
            "lattice_laplace": lambda: LatticeField(seed, "bench", lap).vector_units(0, count),
            "lattice_gaussian": lambda: LatticeField(seed, "bench", gau).vector_units(0, count),
        }
        for name in ("chacha12", "chacha8", "aes128_ctr"):
            fns[f"lattice_laplace_on_{name}"] = lambda bg=gens[name]: sample_units(lap, bg.random_raw(count), no_fallback)
        for name, t in race(fns, repeats + 2).items():
            res[f"{name}_per_s"] = count / t

        # releases of a d x d tile, and the Gram it perturbs
        values = np.random.default_rng(0).normal(size=(d, d))
        old = FloatLaplaceField(seed, "bench", 0.1)
        new = LatticeField(seed, "bench", LatticeNoise.for_scale("laplace", 0.1))
        res["tile_inverse_cdf_s"] = best_of(lambda: values + old(np.arange(d), np.arange(d)), repeats)
        res["tile_lattice_s"] = best_of(lambda: new(values, (0, 0)), repeats)
        y = np.random.default_rng(1).standard_normal((20 * d, d))
        res["gram_20d_by_d_s"] = best_of(lambda: y.T @ y, repeats)

        # exponential mechanism keys
        scores = np.random.default_rng(2).normal(size=count // 4)
        gm = GumbelMax(seed, "bench-em", 1.0)
        res["gumbel_inverse_cdf_keys_per_s"] = scores.size / best_of(
            lambda: scores - np.log(-np.log(seed.uniforms(key, 0, 0, scores.size))), repeats)
        res["gumbel_exact_best_per_s"] = scores.size / best_of(lambda: gm.best(scores, 0), repeats)

        # mechanism objects: PrivCov's scattered release (d (k + 1) entries)
        from dpdist.privacy.mechanisms.privcov.mechanism import privcov_mechanism

        kk = 10
        mech = privcov_mechanism(1.0, 1e-5, 20 * d, d, kk, 2.0)
        rows = np.repeat(np.arange(d), kk + 1)
        cols = np.random.default_rng(3).integers(0, d, rows.size)
        raw = np.random.default_rng(4).uniform(-1, 1, rows.size)
        old_rel = FloatLaplaceField(seed, "bench", mech.calibration.laplace_scale)
        new_rel = mech.release(seed)
        t = race({"old": lambda: old_rel.add_at(rows, cols, raw), "new": lambda: new_rel(rows, cols, raw)}, repeats + 2)
        res["privcov_release_entries"] = int(rows.size)
        res["privcov_release_inverse_cdf_per_s"] = rows.size / t["old"]
        res["privcov_release_mechanism_per_s"] = rows.size / t["new"]

    # PrivCov end to end against the Gram of the same data, per tree (subprocesses)
    n_e2e, d_e2e = (2000, 40) if args.smoke else (int(20_000 * scale_env), int(400 * scale_env**0.5))
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"after": here}
    if os.environ.get("DPDIST_BENCH_REFERENCE"):
        trees["before"] = os.environ["DPDIST_BENCH_REFERENCE"]
    e2e = {name: {"fit_s": float("inf"), "gram_s": float("inf")} for name in trees}
    for _ in range(1 if args.smoke else 2):  # interleaved: load bursts hit both trees alike
        for name, tree in trees.items():
            got = privcov_end_to_end(tree, n_e2e, d_e2e, 3, 1 if args.smoke else 2)
            e2e[name] = {key: min(e2e[name][key], got[key]) for key in ("fit_s", "gram_s")}
    res["privcov_e2e"] = {"n": n_e2e, "d": d_e2e, "k": 3, **{name: {**v, "fit_over_gram": v["fit_s"] / v["gram_s"]}
                                                             for name, v in e2e.items()}}
    if "before" in e2e:
        res["privcov_e2e"]["after_over_before_fit_over_gram"] = (
            res["privcov_e2e"]["after"]["fit_over_gram"] / res["privcov_e2e"]["before"]["fit_over_gram"])

    res["lattice_laplace_over_inverse_cdf_time"] = res["inverse_cdf_laplace_per_s"] / res["lattice_laplace_per_s"]
    res["lattice_gaussian_over_inverse_cdf_time"] = res["inverse_cdf_gaussian_per_s"] / res["lattice_gaussian_per_s"]
    res["tile_lattice_over_gram_time"] = res["tile_lattice_s"] / res["gram_20d_by_d_s"]
    res["tile_inverse_cdf_over_gram_time"] = res["tile_inverse_cdf_s"] / res["gram_20d_by_d_s"]

    print(f"one core, {count:.3g} samples, tile {d}x{d} (machine may be shared: compare ratios)")
    for name in gens:
        print(f"  {name:>12}: {res[f'{name}_words_per_s'] / 1e6:7.1f} M words/s")
    print(f"  Laplace   inverse-CDF {res['inverse_cdf_laplace_per_s'] / 1e6:6.1f} M/s | lattice "
          f"{res['lattice_laplace_per_s'] / 1e6:6.1f} M/s (target 30)")
    print(f"  Gaussian  inverse-CDF {res['inverse_cdf_gaussian_per_s'] / 1e6:6.1f} M/s | lattice "
          f"{res['lattice_gaussian_per_s'] / 1e6:6.1f} M/s (target 10)")
    for name in ("chacha12", "chacha8", "aes128_ctr"):
        print(f"  lattice Laplace on {name}: {res[f'lattice_laplace_on_{name}_per_s'] / 1e6:6.1f} M/s")
    print(f"  {d}x{d} tile: inverse-CDF {res['tile_inverse_cdf_s']:.3f}s, lattice {res['tile_lattice_s']:.3f}s, "
          f"Gram of {20 * d} rows {res['gram_20d_by_d_s']:.3f}s (lattice = {res['tile_lattice_over_gram_time']:.2f}x Gram)")
    print(f"  Gumbel keys: inverse-CDF {res['gumbel_inverse_cdf_keys_per_s'] / 1e6:.1f} M/s, exact best "
          f"{res['gumbel_exact_best_per_s'] / 1e6:.1f} M/s")
    print(f"  PrivCov release of {res['privcov_release_entries']} scattered entries: inverse-CDF "
          f"{res['privcov_release_inverse_cdf_per_s'] / 1e6:.1f} M/s, mechanism (lattice) "
          f"{res['privcov_release_mechanism_per_s'] / 1e6:.1f} M/s")
    e = res["privcov_e2e"]
    for name in trees:
        print(f"  PrivCov end to end n={e['n']} d={e['d']} ({name}): fit {e[name]['fit_s']:.2f}s, Gram "
              f"{e[name]['gram_s']:.2f}s, fit/Gram {e[name]['fit_over_gram']:.2f}")
    if "after_over_before_fit_over_gram" in e:
        print(f"  PrivCov end to end, after/before (fit/Gram): {e['after_over_before_fit_over_gram']:.3f}")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "bench_noise.json"), "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
