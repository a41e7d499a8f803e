"""What the CLI tests need to know about the branch they run on."""

from __future__ import annotations

from dpdist.engine.runtime import check_scheduler
from dpdist.exceptions import ValidationError


def _runtime_merged() -> bool:
    try:
        check_scheduler("local-cluster")
    except ValidationError:
        return False
    return True


#: The issue-8-runtime contract is in: scheduler=None runs on dask's local threads (no
#: processes) and "local-cluster" starts a LocalCluster. Before it, None started a LocalCluster.
RUNTIME_MERGED = _runtime_merged()
#: --scheduler value that starts a LocalCluster (before the runtime branch: the default).
LOCAL_CLUSTER_ARGS = ["--scheduler", "local-cluster"] if RUNTIME_MERGED else []
