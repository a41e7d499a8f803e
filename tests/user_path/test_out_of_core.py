"""SecondMoment's private lambda_min step on more rows than the client can hold one array of.

The client runs in a subprocess whose address space is limited (``RLIMIT_AS``) to what it
uses after a warm-up fit plus 24 MiB; the data are 4,000,000 lazily generated rows, so an
n-long int64 array (32 MiB: the group labels the step used to build on the client, with an
argsort of as many uniforms) does not fit, which the script checks first. The workers (the
real cluster) compute the labels of their own rows.
"""

from __future__ import annotations

import pytest

from tests.clusters import last_json, run_python, user_env

pytestmark = pytest.mark.slow

N_ROWS = 4_000_000
MARGIN_MIB = 24
SCRIPT = """\
import json, resource, sys
import dask.array as da, numpy as np
import dpdist
from distributed import Client

def vm_bytes():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))

addr, n, margin = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) * 2**20
client = Client(addr, set_as_default=False)

def fit(n, chunk):
    X = da.random.default_rng(0).standard_normal((n, 2), chunks=(chunk, 2))  # generated on the workers
    return dpdist.SecondMoment(1.0, m=50, radius=8.0, random_state=0, scheduler=client).fit(X)

fit(20_000, 5_000)  # warm-up: every thread and pool of the client exists before the limit
limit = vm_bytes() + margin
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    np.ones(n, dtype=np.int64)
    fits = True
except MemoryError:
    fits = False
est = fit(n, 1_000_000)
print(json.dumps({"n_long_array_fits": fits, "shape": list(est.second_moment_.shape), "rho": est.privacy_.rho,
                  "groups": est.release_.parameters["lambda_groups"]}))
"""


def test_private_lambda_step_runs_with_less_client_memory_than_n_labels(real_cluster, tmp_path):
    (tmp_path / "ooc.py").write_text(SCRIPT)
    env = user_env(MALLOC_ARENA_MAX="2")  # a few malloc arenas: address space is what is limited
    out = last_json(run_python(["ooc.py", real_cluster, str(N_ROWS), str(MARGIN_MIB)], cwd=tmp_path, env=env))
    assert out["n_long_array_fits"] is False  # the limit is enforced
    assert out["shape"] == [2, 2] and out["rho"] == 1.0 and out["groups"] == N_ROWS // 50
