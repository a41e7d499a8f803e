"""Throughput of the noise generator: ChaCha20 (the CSPRNG dpdist uses) against NumPy's
PCG64 on the same machine in the same run, and the cost of a full PrivCov selection-noise
draw of d^2 Laplace values relative to the Gram matrix it perturbs.

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


def main() -> int:
    from dpdist.privacy.noise import NoiseField, NoiseSeed

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--smoke", action="store_true", default=os.environ.get("DPDIST_BENCH_SMOKE") == "1")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    count = 200_000 if args.smoke else 20_000_000
    d = 200 if args.smoke else 2000
    repeats = 1 if args.smoke else 3
    seed = NoiseSeed(1, seeded=True)
    key = seed.key("bench")
    t_chacha = best_of(lambda: seed.uniforms(key, 0, 0, count), repeats)
    g = np.random.Generator(np.random.PCG64(1))
    t_pcg = best_of(lambda: g.random(count), repeats)
    field = NoiseField(seed, "bench", "laplace", 1.0)
    t_field = best_of(lambda: field(np.arange(d), np.arange(d)), repeats)
    y = np.random.default_rng(0).standard_normal((20 * d, d))
    t_gram = best_of(lambda: y.T @ y, repeats)
    res = {
        "chacha20_uniforms_per_s": count / t_chacha,
        "pcg64_uniforms_per_s": count / t_pcg,
        "chacha20_over_pcg64_time": t_chacha / t_pcg,
        "laplace_field_d": d,
        "laplace_field_s": t_field,
        "gram_20d_by_d_s": t_gram,
        "laplace_field_over_gram_time": t_field / t_gram,
    }
    print(f"ChaCha20 {res['chacha20_uniforms_per_s']:.3g} uniforms/s, PCG64 {res['pcg64_uniforms_per_s']:.3g}/s "
          f"(ChaCha20 takes {res['chacha20_over_pcg64_time']:.2f}x the time)")
    print(f"{d}x{d} Laplace selection noise: {t_field:.3f}s = {res['laplace_field_over_gram_time']:.2f}x "
          f"the Gram of {20 * d} rows")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "bench_noise.json"), "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
