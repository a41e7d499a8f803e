#!/usr/bin/env bash
# One scheduled private release (see deploy/dpdist-covariance.service). Configure through the
# environment (systemd: EnvironmentFile=/etc/dpdist/covariance.env):
#   DPDIST_INPUT (Zarr path/URL), DPDIST_OUTPUT_DIR, DPDIST_K, DPDIST_EPSILON, DPDIST_DELTA,
#   DPDIST_SIGMA                                                           required
#   DPDIST_SCHEDULER  tcp://HOST:PORT or local-cluster       optional (default: dpdist's default)
#   DPDIST_BIN        absolute path of the dpdist executable                optional
#   DPDIST_VENV       virtual environment holding dpdist     optional (default: ../.venv beside
#                     this deploy/ folder, e.g. /opt/dpdist/.venv)
# systemd runs services with a minimal PATH (no virtual environment on it), so the executable
# is taken from DPDIST_BIN, else DPDIST_VENV/bin/dpdist, else PATH; if none has it the job
# exits 2 naming these variables. Exit codes are dpdist's (`dpdist --help`): on 4 (a private
# test rejected) covariance-STAMP.zarr.rejected.json records the budget the run spent.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=${DPDIST_VENV:-$here/../.venv}
if [[ -n "${DPDIST_BIN:-}" ]]; then
  dpdist=$DPDIST_BIN
elif [[ -x "$venv/bin/dpdist" ]]; then
  dpdist=$venv/bin/dpdist
elif ! dpdist=$(command -v dpdist); then
  echo "etl-job.sh: dpdist not found in $venv/bin or on PATH ($PATH): set DPDIST_BIN=/path/to/dpdist or DPDIST_VENV=/path/to/venv" >&2
  exit 2
fi
if [[ ! -x "$dpdist" ]]; then
  echo "etl-job.sh: DPDIST_BIN=$dpdist is not an executable file" >&2
  exit 2
fi
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out="${DPDIST_OUTPUT_DIR:?}/covariance-$stamp.zarr"
scheduler=()
if [[ -n "${DPDIST_SCHEDULER:-}" ]]; then
  scheduler=(--scheduler "$DPDIST_SCHEDULER")
fi
exec "$dpdist" covariance "${DPDIST_INPUT:?}" \
  --k "${DPDIST_K:?}" --epsilon "${DPDIST_EPSILON:?}" --delta "${DPDIST_DELTA:?}" \
  --sigma "${DPDIST_SIGMA:?}" "${scheduler[@]}" --no-progress \
  --output "$out" --json
