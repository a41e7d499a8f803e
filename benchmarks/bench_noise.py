"""Noise throughput on one core, every number measured in the same run.

- Generators: 64-bit words/s of ChaCha20 (dpdist's CSPRNG), and of the alternatives that keep a
  CSPRNG (randomgen ChaCha with 12 and 8 rounds, AES-128 counter mode with AES-NI), and of
  NumPy's PCG64 (not cryptographic; the reference of speed).
- Samplers (samples/s): today's inverse-CDF Laplace and Gaussian (``laplace_from_uniform``,
  ``gaussian_from_uniform`` on ChaCha20 uniforms), the float-safe lattice Laplace and Gaussian
  (:mod:`dpdist.privacy.lattice`, one ChaCha20 word per sample), and the lattice Laplace fed by
  each alternative generator's words.
- Releases of a d x d tile: today's ``values + NoiseField`` against the float-safe
  ``LatticeField`` release, and the Gram matrix that the tile's noise perturbs (20 d rows).
- The exponential mechanism: keys/s of today's Gumbel keys and of the exact Gumbel-max.

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


def main() -> int:
    from randomgen import AESCounter, ChaCha
    from threadpoolctl import threadpool_limits

    from dpdist.privacy.gumbel import GumbelMax
    from dpdist.privacy.lattice import LatticeField, LatticeNoise, sample_units
    from dpdist.privacy.noise import NoiseField, NoiseSeed, gaussian_from_uniform, laplace_from_uniform

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
        old = NoiseField(seed, "bench", "laplace", 0.1)
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
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "bench_noise.json"), "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
