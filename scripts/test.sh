#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls `npm test`).
# 1. starts Postgres/Redis/NATS if stopped, 2. installs dependencies if needed,
# 3. static checks (lint, types, generated protobuf code up to date, buf breaking against HEAD~1),
# 4. builds the services, 5. runs every vitest test against the real services,
# 6. prints one line: "N passed, N failed" (static checks count as tests).
set -uo pipefail
cd "$(dirname "$0")/.."
export NPM_CONFIG_UPDATE_NOTIFIER=false

if [ -n "${DATABASE_URL:-}" ] && [ -n "${REDIS_URL:-}" ] && [ -n "${NATS_URL:-}" ]; then
  : # the caller named the services
elif bash scripts/services.sh; then
  export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}"
  export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379}"
  export NATS_URL="${NATS_URL:-nats://127.0.0.1:4222}"
elif docker info >/dev/null 2>&1; then
  echo "local services unavailable: the vitest global setup starts them with testcontainers"
else
  echo "Postgres, Redis and NATS are neither installed here nor startable with Docker" >&2
  echo "0 passed, 1 failed"; exit 1
fi
bash scripts/browser.sh || echo "warning: chromium unavailable; the /docs and customer portal browser tests will fail" >&2
bash scripts/debian-tool.sh promtool prometheus || echo "warning: promtool unavailable; the metrics format test will fail" >&2
bash scripts/debian-tool.sh pgbouncer pgbouncer || echo "warning: pgbouncer unavailable; the PgBouncer (transaction pooling) test will fail" >&2
bash scripts/image/setup.sh || echo "warning: podman/buildah unavailable; the image build and chart play test (scripts/image/play.int.test.ts) will fail" >&2

# `npm install` with the committed lockfile (not `npm ci`): this project's registry serves only the
# Linux builds of platform packages, and `npm ci` refuses a lockfile without the others' entries.
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm install --no-audit --no-fund || { echo "0 passed, 1 failed"; exit 1; }
fi

mkdir -p .run
static_passed=0
static_failed=0
check() {
  local name=$1; shift
  echo "== $name"
  if "$@"; then static_passed=$((static_passed + 1)); else echo "FAILED: $name"; static_failed=$((static_failed + 1)); fi
}
check "lint (biome)" npx biome check .
check "unused code (knip)" npx knip
check "typecheck (tsc --noEmit)" npx tsc -p tsconfig.json --noEmit
check "generated protobuf code is up to date" bash scripts/proto-gen.sh --check
check "protobuf contracts compatible with the previous commit (buf breaking)" bash scripts/proto-breaking.sh
check "generated OpenAPI document and @fcd/client types are up to date" npx tsx --conditions=source scripts/openapi/generate.ts --check
check "build" npm run build --silent

echo "== tests (vitest)"
rm -f .run/vitest.json .run/vitest-load.json
npx vitest run --exclude '**/*.load.int.test.ts' --reporter=default --reporter=json --outputFile.json=.run/vitest.json "$@"
vitest_rc=$?
reports=(.run/vitest.json)
# Tests that assert a latency percentile under load, or a timing bound within a margin of about
# 100 ms (*.load.int.test.ts), run last, one file at a time, so no other test file's processes
# share the two cores with the load they measure.
if [ $# -eq 0 ]; then
  echo "== latency tests under load (vitest, one file at a time)"
  npx vitest run --maxWorkers=1 --reporter=default --reporter=json --outputFile.json=.run/vitest-load.json '.load.int.test.ts'
  load_rc=$?
  [ "$vitest_rc" -eq 0 ] && vitest_rc=$load_rc
  reports+=(.run/vitest-load.json)
  # The seeded fault soak (docs/soak.md): the whole system under load and every kind of fault for
  # 4 minutes, then the checker of its promises. Last, alone on the machine like the load tests.
  echo "== seeded fault soak (4 min, seed 20261128)"
  check "soak: 4 minutes, seed 20261128, 0 violations" npx tsx --conditions=source scripts/soak/run.ts --minutes 4 --seed 20261128
fi

node scripts/test-summary.mjs "$static_passed" "$static_failed" "$vitest_rc" "${reports[@]}"
