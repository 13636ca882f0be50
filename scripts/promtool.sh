#!/usr/bin/env bash
# Installs promtool (Debian's prometheus package) for the test that runs `promtool check metrics`
# on every service's /metrics, when it is missing. Quiet and idempotent. The package's own
# Prometheus server is not needed (and not started where policy-rc.d forbids it).
set -uo pipefail
command -v promtool >/dev/null 2>&1 && exit 0
echo "installing promtool (Debian package prometheus)"
export DEBIAN_FRONTEND=noninteractive
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
$SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1
command -v promtool >/dev/null 2>&1 || { echo "promtool could not be installed" >&2; exit 1; }
