#!/usr/bin/env bash
# Run a dpdist job file from cron and act on its exit code.
#   0 released           -> exit 0
#   3 budget refused     -> exit 3 (nothing read or spent; the schedule has ended: renew the budget)
#   5 infrastructure     -> retried up to DPDIST_RETRIES times, DPDIST_RETRY_DELAY seconds apart
#   2, 4, 1              -> exit with the code, no retry (4: the budget was spent; a retry spends again)
# Usage: run-job.sh JOB.toml
set -uo pipefail
job=${1:?usage: run-job.sh JOB.toml}
retries=${DPDIST_RETRIES:-3}
delay=${DPDIST_RETRY_DELAY:-900}
# shellcheck disable=SC1091
[ -r /etc/dpdist/environment ] && set -a && . /etc/dpdist/environment && set +a

attempt=0
while :; do
  attempt=$((attempt + 1))
  dpdist run "$job" --json
  rc=$?
  case $rc in
    0) exit 0 ;;
    5) if [ "$attempt" -le "$retries" ]; then
         echo "dpdist: infrastructure failure (attempt $attempt), retrying in ${delay}s" >&2
         sleep "$delay"
         continue
       fi
       exit 5 ;;
    3) echo "dpdist: privacy budget exhausted for $job; nothing was read" >&2; exit 3 ;;
    *) echo "dpdist: exit $rc for $job; not retried" >&2; exit "$rc" ;;
  esac
done
