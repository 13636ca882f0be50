#!/usr/bin/env bash
# Installs Debian's Chromium for the browser tests (/docs, the customer portal) when it is missing
# (the browser is never downloaded by a test tool; playwright-core drives this one). Idempotent.
set -uo pipefail
[ -x /usr/bin/chromium ] && exit 0
echo "installing chromium from the OS packages"
export DEBIAN_FRONTEND=noninteractive
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
$SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq chromium >/dev/null
[ -x /usr/bin/chromium ] || { echo "chromium could not be installed" >&2; exit 1; }
