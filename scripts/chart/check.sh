#!/usr/bin/env bash
# Chart checks without a cluster (docs/operations.md, "Chart checks"):
#   1. helm lint --strict with each deploy/helm/facility-compliance/ci/*-values.yaml (and bare);
#   2. helm template with each of them;
#   3. every rendered manifest validated against the Kubernetes JSON schemas (validate.ts).
# Exits non-zero on any problem.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
bin="$(bash scripts/chart/tools.sh)" || exit 1
helm="$bin/helm"
chart=deploy/helm/facility-compliance
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
failed=0

echo "== helm lint (chart defaults)"
"$helm" lint "$chart" --strict --quiet || failed=1
for values in "$chart"/ci/*-values.yaml; do
  name="$(basename "$values" -values.yaml)"
  echo "== $name: helm lint"
  "$helm" lint "$chart" --strict --quiet -f "$values" || failed=1
  echo "== $name: helm template + schema validation"
  if "$helm" template fcd "$chart" --namespace fcd -f "$values" >"$out/$name.yaml"; then
    npx --no-install tsx scripts/chart/validate.ts "$out/$name.yaml" "$name" || failed=1
  else
    failed=1
  fi
done

if [ "$failed" -ne 0 ]; then
  echo "chart checks FAILED"
  exit 1
fi
echo "chart checks passed"
