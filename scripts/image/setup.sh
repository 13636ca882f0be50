#!/usr/bin/env bash
# One-time set-up of the container tools the image build and the chart play need, from Debian
# packages (as scripts/debian-tool.sh does for promtool): podman, buildah, runc (not crun: it
# fails on a hybrid cgroup layout), catatonit (podman's pause process) and debootstrap (the base
# image). Quiet and idempotent: installs only what is missing. Exits non-zero, naming the
# package, when one cannot be installed (e.g. not root and no sudo).
set -uo pipefail
PATH="$PATH:/usr/sbin:/sbin"
wanted=(podman buildah runc catatonit debootstrap)
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
echo "installing ${missing[*]} (Debian packages)"
export DEBIAN_FRONTEND=noninteractive
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
$SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1
for p in "${missing[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || { echo "setup.sh: Debian package $p could not be installed" >&2; exit 1; }
done
