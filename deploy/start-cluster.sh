#!/usr/bin/env bash
# Start a dask scheduler and N workers on this host; Ctrl-C stops them all.
# Usage: deploy/start-cluster.sh [N_WORKERS=2] [HOST=127.0.0.1] [PORT=8786]
set -euo pipefail
N=${1:-2}; HOST=${2:-127.0.0.1}; PORT=${3:-8786}
export DASK_CONFIG=${DASK_CONFIG:-$(cd "$(dirname "$0")" && pwd)}
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM
dask scheduler --host "$HOST" --port "$PORT" --no-dashboard & pids+=($!)
sleep 2
for _ in $(seq "$N"); do
  dask worker "tcp://$HOST:$PORT" --nworkers 1 --nthreads 1 --no-dashboard & pids+=($!)
done
echo "cluster at tcp://$HOST:$PORT with $N workers"
wait
