#!/bin/sh
# `npm install` in the image build (Dockerfile, stages build and deps), with the committed lockfile
# and the build secrets when they are mounted: `npmrc` as npm's user configuration (registry,
# credentials) and `npm_ca` as the CA file it names. They are read from /run/secrets for this one
# command, so no registry URL or credential reaches a layer. Arguments go to npm install.
# npm install, not npm ci: the lockfile holds only the Linux builds of platform packages (the
# project registry serves no others), which `npm ci`'s strict check refuses.
set -eu
if [ -s /run/secrets/npmrc ]; then export NPM_CONFIG_USERCONFIG=/run/secrets/npmrc; fi
if [ -s /run/secrets/npm_ca ]; then export NPM_CONFIG_CAFILE=/run/secrets/npm_ca; fi
exec npm install --no-audit --no-fund "$@"
