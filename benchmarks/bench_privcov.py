"""PrivCov from a Zarr store against plain Gram matrices of the same data, in the same run.

Measures, each step in a fresh subprocess (so peak memory is per step):

(a) read the whole store into memory, then numpy ``X.T @ X``;
(b) ``dask.array.from_zarr(store)``, then ``(X.T @ X).compute()``;
(c) ``dpdist.SparseCovariance(...).fit(store)`` (clip, tiled Gram, noisy top-k, release);
(d) PrivCov at large d (default d = 30,000, small n): peak memory against the 8 d^2 bytes a
    dense d x d float64 matrix would take.

Reports time ratios (c)/(a) and (c)/(b) (target: (c)/(a) <= 1.25 at n = 200,000,
d = 1,000) and peak RSS. Sizes default to the full target; ``--smoke`` (or
DPDIST_BENCH_SMOKE=1) runs tiny sizes to check the script works; DPDIST_BENCH_SCALE scales n.

Usage: python benchmarks/bench_privcov.py [--smoke] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def step(name: str, store: str, k: int, tile: int) -> dict:
    import numpy as np
    import zarr

    t0 = time.perf_counter()
    if name == "numpy":
        x = zarr.open_array(store, mode="r")[...]
        g = x.T @ x
        assert g.shape[0] == x.shape[1]
    elif name == "dask":
        import dask.array as da

        X = da.from_zarr(store)
        g = (X.T @ X).compute(scheduler="threads")
        assert g.shape[0] == X.shape[1]
    elif name == "privcov":
        import dpdist

        est = dpdist.SparseCovariance(k, 1.0, 1e-6, clip=4.0, scheduler="threads", tile_size=tile,
                                      random_state=0, progress=False).fit(store)
        assert est.covariance_.shape[0] == zarr.open_array(store, mode="r").shape[1]
    else:
        raise ValueError(name)
    del np
    return {"step": name, "seconds": time.perf_counter() - t0, "peak_rss_mb": peak_rss_mb()}


def make_store(path: str, n: int, d: int, chunk_rows: int) -> str:
    import dask.array as da
    import zarr

    X = da.random.default_rng(0).standard_normal((n, d), chunks=(chunk_rows, d))
    arr = zarr.create_array(path, shape=(n, d), chunks=(chunk_rows, d), dtype="f8")
    da.store(X, arr, lock=False, scheduler="threads")
    return path


def run_step(name: str, store: str, k: int, tile: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--step", name, "--store", store, "--k", str(k), "--tile", str(tile)],
        capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", default=os.environ.get("DPDIST_BENCH_SMOKE") == "1")
    p.add_argument("--out", default=None, help="directory for results.json (default: print only)")
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--step", help=argparse.SUPPRESS)
    p.add_argument("--store", help=argparse.SUPPRESS)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--tile", type=int, default=2048)
    args = p.parse_args()
    if args.step:
        print(json.dumps(step(args.step, args.store, args.k, args.tile)))
        return 0

    scale = float(os.environ.get("DPDIST_BENCH_SCALE", "1"))
    if args.smoke:
        n, d, n_big, d_big, repeats = 4000, 50, 200, 600, 1
    else:
        n, d, n_big, d_big, repeats = int(200_000 * scale), 1000, 2000, 30_000, 3
    repeats = args.repeats or repeats
    results: dict = {"n": n, "d": d, "k": args.k}
    with tempfile.TemporaryDirectory(prefix="dpdist-bench-") as tmp:
        store = make_store(os.path.join(tmp, "x.zarr"), n, d, chunk_rows=max(1, min(n, 25_000)))
        for name in ("numpy", "dask", "privcov"):
            runs = [run_step(name, store, args.k, args.tile) for _ in range(repeats)]
            best = min(runs, key=lambda r: r["seconds"])
            results[name] = best
            print(f"{name:>8}: {best['seconds']:7.2f} s  peak RSS {best['peak_rss_mb']:8.0f} MB", flush=True)
        results["ratio_privcov_over_numpy"] = results["privcov"]["seconds"] / results["numpy"]["seconds"]
        results["ratio_privcov_over_dask"] = results["privcov"]["seconds"] / results["dask"]["seconds"]
        print(f"PrivCov / (read + numpy X.T @ X) = {results['ratio_privcov_over_numpy']:.2f}  (target <= 1.25)")
        print(f"PrivCov / dask (X.T @ X).compute() = {results['ratio_privcov_over_dask']:.2f}")

        big = make_store(os.path.join(tmp, "big.zarr"), n_big, d_big, chunk_rows=n_big)
        r = run_step("privcov", big, args.k, args.tile)
        dense_mb = 8 * d_big**2 / 2**20
        results["large_d"] = {"n": n_big, "d": d_big, **r, "dense_d_by_d_mb": dense_mb}
        print(f"PrivCov at d = {d_big}, n = {n_big}: {r['seconds']:.1f} s, peak RSS {r['peak_rss_mb']:.0f} MB "
              f"(one dense d x d float64 matrix: {dense_mb:.0f} MB)")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "bench_privcov.json"), "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
