#!/usr/bin/env bash
# Builds the project's Dockerfile with podman on the base image of build-base.sh (NODE_IMAGE), then
# records what it built in .run/image/: image size and layer sizes (layers.txt), and a CycloneDX
# SBOM of the runtime node_modules (sbom.cdx.json, `npm sbom` run inside the image).
# npm reaches its registry with the machine's own configuration, passed as build secrets: the
# global and user npmrc (registry, credentials) and the CA file npm names. A canary credential
# for a registry that does not exist is added to the secret, so the layer check
# (scripts/image/leaks.sh) has a known value to look for even where npm needs no credential.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$here/env.sh"
out="$root/.run/image"
mkdir -p "$out"

bash "$here/setup.sh"
bash "$here/build-base.sh"

secrets="$(mktemp -d /var/tmp/fcd-npm-secrets.XXXXXX)"
trap 'rm -rf "$secrets"' EXIT
chmod 700 "$secrets"
{
  for f in "$(npm config get globalconfig)" "$(npm config get userconfig)"; do
    [ -f "$f" ] && { cat "$f"; echo; }
  done
  # The canary: never used (no package has this scope), looked for in every layer.
  echo "@fcd-canary:registry=https://npm.fcd-canary.invalid/"
  echo "//npm.fcd-canary.invalid/:_authToken=${FCD_CANARY_TOKEN:=fcd-canary-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')}"
} >"$secrets/npmrc"
printf '%s\n' "$FCD_CANARY_TOKEN" >"$out/canary-token"
cafile="$(npm config get cafile)"
if [ -n "$cafile" ] && [ "$cafile" != null ] && [ -f "$cafile" ]; then cp "$cafile" "$secrets/npm_ca"; else : >"$secrets/npm_ca"; fi

start=$(date +%s)
podman build --network host --layers \
  --build-arg "NODE_IMAGE=$FCD_BASE_IMAGE" \
  --secret "id=npmrc,src=$secrets/npmrc" --secret "id=npm_ca,src=$secrets/npm_ca" \
  -t "$FCD_IMAGE" -f "$root/Dockerfile" "${FCD_BUILD_CONTEXT:-$root}" >"$out/build.log" 2>&1 || {
  tail -40 "$out/build.log" >&2; echo "image build FAILED (log: .run/image/build.log)" >&2; exit 1;
}
took=$(( $(date +%s) - start ))
echo "image $FCD_IMAGE built in $took s"

{
  echo "built in $took s ($(grep -c 'Using cache' "$out/build.log") steps from the layer cache)"
  podman image inspect "$FCD_IMAGE" --format 'image {{.RepoTags}} {{.Id}} size {{.Size}} bytes'
  echo "layers (newest first; size, instruction):"
  podman history --no-trunc --format '{{.Size}}\t{{.CreatedBy}}' "$FCD_IMAGE"
} >"$out/layers.txt"
# npm sbom refuses a tree whose manifests name packages that are absent (the devDependencies the
# runtime stage omits) and a root without a version: a throw-away container drops those fields
# from its copy of the manifests (the installed tree is untouched) and runs it.
version="$(awk '/^appVersion:/ {gsub(/"/, "", $2); print $2}' "$root/deploy/helm/facility-compliance/Chart.yaml")"
podman run --rm --network none --user 0:0 -e HOME=/tmp -e npm_config_cache=/tmp/npm -e npm_config_update_notifier=false \
  -e "FCD_VERSION=$version" "$FCD_IMAGE" sh -c '
    node -e "
      const fs = require(\"node:fs\"), path = require(\"node:path\");
      const dirs = [\".\", ...[\"libs\", \"services\"].flatMap((d) => fs.readdirSync(d).map((n) => path.join(d, n)))];
      for (const d of dirs) {
        const f = path.join(d, \"package.json\");
        if (!fs.existsSync(f)) continue;
        const m = JSON.parse(fs.readFileSync(f, \"utf8\"));
        delete m.devDependencies;
        if (d === \".\") m.version = process.env.FCD_VERSION;
        fs.writeFileSync(f, JSON.stringify(m));
      }" && npm sbom --sbom-format cyclonedx --omit dev' >"$out/sbom.cdx.json"
echo "recorded .run/image/layers.txt and .run/image/sbom.cdx.json ($(node -p "require('$out/sbom.cdx.json').components.length") components)"
head -2 "$out/layers.txt"
