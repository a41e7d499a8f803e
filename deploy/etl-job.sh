#!/usr/bin/env bash
# One scheduled private release. Configure through the environment:
#   DPDIST_INPUT (Zarr path/URL), DPDIST_OUTPUT_DIR, DPDIST_SCHEDULER (tcp://...),
#   DPDIST_K, DPDIST_EPSILON, DPDIST_DELTA, DPDIST_SIGMA
set -euo pipefail
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out="${DPDIST_OUTPUT_DIR:?}/covariance-$stamp.zarr"
exec dpdist covariance "${DPDIST_INPUT:?}" \
  --k "${DPDIST_K:?}" --epsilon "${DPDIST_EPSILON:?}" --delta "${DPDIST_DELTA:?}" \
  --sigma "${DPDIST_SIGMA:?}" --scheduler "${DPDIST_SCHEDULER:?}" --no-progress \
  --output "$out" --json
