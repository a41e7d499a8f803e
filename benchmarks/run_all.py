"""Run every benchmark script in this folder (``bench_*.py``) one after the other.

``--smoke`` passes ``--smoke`` to each (tiny sizes: CI uses this to check the scripts run);
without it each runs at its default (full) size. Results go to ``--out`` (default
``bench-out/``). Exits non-zero if any benchmark fails.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--out", default="bench-out")
    args = p.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    failed = []
    for script in sorted(glob.glob(os.path.join(here, "bench_*.py"))):
        cmd = [sys.executable, script, "--out", args.out] + (["--smoke"] if args.smoke else [])
        print(f"== {os.path.basename(script)}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd)
        print(f"== {os.path.basename(script)}: exit {rc} in {time.perf_counter() - t0:.1f}s", flush=True)
        if rc:
            failed.append(script)
    if failed:
        print("failed: " + ", ".join(map(os.path.basename, failed)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
