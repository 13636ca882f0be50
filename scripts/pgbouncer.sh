#!/usr/bin/env bash
# Installs PgBouncer (Debian's pgbouncer package) for the test that runs the whole stack through it
# in transaction pooling mode (services/gateway/test/pgbouncer.int.test.ts), when it is missing.
# Quiet and idempotent. The package's own pgbouncer service is not needed (the test starts a
# private one; it is not started where policy-rc.d forbids it).
set -uo pipefail
PATH="$PATH:/usr/sbin"
command -v pgbouncer >/dev/null 2>&1 && exit 0
echo "installing pgbouncer (Debian package pgbouncer)"
export DEBIAN_FRONTEND=noninteractive
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
$SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq --no-install-recommends pgbouncer >/dev/null 2>&1
command -v pgbouncer >/dev/null 2>&1 || { echo "pgbouncer could not be installed" >&2; exit 1; }
