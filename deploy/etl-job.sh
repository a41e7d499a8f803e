#!/usr/bin/env bash
# One scheduled private release (see deploy/dpdist-covariance.service), run as a job file by
# `dpdist run`: its cost is reserved in the privacy-budget ledger before any data is read and
# committed with the output, and a release the budget does not cover is refused (exit 3).
# Configure through the environment (systemd: EnvironmentFile=/etc/dpdist/covariance.env):
#   DPDIST_INPUT (Zarr path/URL), DPDIST_OUTPUT_DIR, DPDIST_K, DPDIST_EPSILON, DPDIST_DELTA,
#   DPDIST_SIGMA                                                           required
#   DPDIST_LEDGER     the ledger holding DPDIST_INPUT's budget   optional (default: dpdist's
#                     default ledger, ~/.local/share/dpdist/ledger.sqlite of the service's user)
#   DPDIST_SCHEDULER  tcp://HOST:PORT or local-cluster       optional (default: local threads)
#   DPDIST_BIN        absolute path of the dpdist executable                optional
#   DPDIST_VENV       virtual environment holding dpdist     optional (default: ../.venv beside
#                     this deploy/ folder, e.g. /opt/dpdist/.venv)
# The dataset's owner sets its budget once: dpdist budget set DPDIST_INPUT --epsilon E --delta D
# (with --ledger DPDIST_LEDGER). systemd runs services with a minimal PATH (no virtual
# environment on it), so the executable is taken from DPDIST_BIN, else DPDIST_VENV/bin/dpdist,
# else PATH; if none has it the job exits 2 naming these variables. Exit codes are dpdist run's
# (`dpdist run --help`): 0 released, 2 invalid, 3 refused by the ledger (nothing read or
# spent), 4 no private result (spent), 5 infrastructure failure.
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
number='^[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$'
for var in DPDIST_EPSILON DPDIST_DELTA DPDIST_SIGMA DPDIST_K; do
  if [[ ! "${!var:-}" =~ $number ]]; then
    echo "etl-job.sh: $var must be a number, got '${!var:-}'" >&2
    exit 2
  fi
done
: "${DPDIST_INPUT:?DPDIST_INPUT is required}" "${DPDIST_OUTPUT_DIR:?DPDIST_OUTPUT_DIR is required}"
export DPDIST_SCHEDULER=${DPDIST_SCHEDULER:-threads}
# The job file takes the paths and the scheduler from the environment (${VAR} in a job file)
# and names no ledger: DPDIST_LEDGER (else the default ledger) is charged.
job=$(mktemp "${TMPDIR:-/tmp}/dpdist-etl-XXXXXX")
trap 'rm -f "$job"' EXIT
cat > "$job" <<TOML
name = "etl-covariance"
[dataset]
url = "\${DPDIST_INPUT}"
[estimator]
name = "SparseCovariance"
params = {k = $DPDIST_K, epsilon = $DPDIST_EPSILON, delta = $DPDIST_DELTA, sigma = $DPDIST_SIGMA}
[output]
url = "\${DPDIST_OUTPUT_DIR}/covariance-{datetime}-{run}.zarr"
[scheduler]
address = "\${DPDIST_SCHEDULER}"
TOML
"$dpdist" run "$job" --json
