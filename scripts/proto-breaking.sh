#!/usr/bin/env bash
# buf breaking: the protobuf contracts stay compatible (wire and generated code) with those of the
# previous commit, so a rolling deployment mixes old and new gateways, usage and dispatcher safely.
# PROTO_BREAKING_AGAINST names another git ref to compare with (default HEAD~1).
set -euo pipefail
cd "$(dirname "$0")/.."
against=${PROTO_BREAKING_AGAINST:-HEAD~1}
has_ref() { git rev-parse --verify --quiet "$against^{commit}" >/dev/null; }
# A shallow CI clone may lack the previous commit: fetch it.
has_ref || git fetch --quiet --deepen=1 >/dev/null 2>&1 || true
if ! has_ref; then
  echo "proto:breaking: $against is not in this clone (a repository of one commit): nothing to compare with"
  exit 0
fi
if ! git cat-file -e "$against:proto/buf.yaml" 2>/dev/null; then
  echo "proto:breaking: $against has no proto/ module: nothing to compare with"
  exit 0
fi
npx buf breaking proto --against ".git#ref=$against,subdir=proto"
echo "proto:breaking: proto/ is compatible with $against"
