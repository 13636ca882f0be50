#!/usr/bin/env bash
# Regenerates libs/proto/src/gen from proto/ with the local protoc-gen-es plugin.
# --check: fail when the committed generated code differs from a fresh generation.
set -euo pipefail
cd "$(dirname "$0")/.."
npx buf lint proto
if [ "${1:-}" = "--check" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cp -r libs/proto/src/gen "$tmp/before"
  npx buf generate --clean
  if ! diff -ru "$tmp/before" libs/proto/src/gen; then
    echo "proto:check: generated code is out of date; run npm run proto:gen and commit" >&2
    exit 1
  fi
  echo "proto:check: generated code is up to date"
else
  npx buf generate --clean
fi
