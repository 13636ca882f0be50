#!/usr/bin/env bash
# Usage: scripts/debian-tool.sh <command> <debian package>
# Installs a tool some tests need from its Debian package when the command is missing: promtool
# (package prometheus: `promtool check metrics`, `promtool test rules`) and pgbouncer (the whole
# stack through transaction pooling). Quiet and idempotent. The packages' own services are not
# needed (tests start private ones; they are not started where policy-rc.d forbids it).
set -uo pipefail
cmd="${1:?usage: $0 <command> <debian package>}"
pkg="${2:?usage: $0 <command> <debian package>}"
PATH="$PATH:/usr/sbin"
command -v "$cmd" >/dev/null 2>&1 && exit 0
echo "installing $cmd (Debian package $pkg)"
export DEBIAN_FRONTEND=noninteractive
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
$SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null 2>&1
command -v "$cmd" >/dev/null 2>&1 || { echo "$cmd could not be installed" >&2; exit 1; }
