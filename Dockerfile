# syntax=docker/dockerfile:1
# One image for every service; the container command picks the service:
#   node --import ./services/<name>/dist/telemetry.js services/<name>/dist/main.js
#                                              (gateway, usage, facility, webhook, dispatcher; OTEL_* env)
#   node services/<name>/dist/cli.js migrate   (usage, facility, webhook: schema migrations)
# The Helm chart (deploy/helm/facility-compliance) sets the command per Deployment and for the
# migration Job. See docs/operations.md.
# Build secrets (optional): `npmrc`, the npm configuration to install with (registry, credentials),
# and `npm_ca`, the CA file it names. They are mounted only for the RUN that installs, so no
# registry URL or credential reaches a layer (scripts/image/build.sh passes the machine's own).
ARG NODE_IMAGE=node:20-bookworm-slim

# 0. manifests: every workspace's package.json alone. The install layers below depend only on
#    these and the lockfile, so a change to sources alone reuses them (and the downloads).
FROM ${NODE_IMAGE} AS manifests
WORKDIR /src
COPY libs/ libs/
COPY services/ services/
RUN for f in libs/*/package.json services/*/package.json; do \
      mkdir -p "/manifests/$(dirname "$f")" && cp "$f" "/manifests/$f"; \
    done

# 1. install: the lockfile, the manifests and scripts/image/npm-install.sh (npm install with the
#    build secrets), where both installs below start. npm's cache is a cache mount, not a layer.
FROM ${NODE_IMAGE} AS install
WORKDIR /app
COPY package.json package-lock.json ./
COPY --from=manifests /manifests/ ./
COPY scripts/image/npm-install.sh /usr/local/lib/fcd/npm-install.sh

# 2. build: all dependencies (esbuild, TypeScript sources of libs/), bundle each service to dist/
#    with its own build script (the gateway's also builds the customer portal into dist/portal/).
FROM install AS build
RUN --mount=type=secret,id=npmrc,required=false --mount=type=secret,id=npm_ca,required=false \
    --mount=type=cache,id=fcd-npm-cache,target=/root/.npm \
    sh /usr/local/lib/fcd/npm-install.sh
COPY libs/ libs/
COPY services/ services/
COPY proto/ proto/
COPY scripts/build-service.mjs scripts/build-service.mjs
COPY tsconfig.base.json tsconfig.json turbo.json ./
RUN for s in services/*/; do (cd "$s" && npm run build --silent); done \
 && for s in services/*/; do \
      mkdir -p "/out/$s" && cp -r "$s/dist" "/out/$s/dist" && cp "$s/package.json" "/out/$s/package.json"; \
    done

# 3. deps: production dependencies only. npm needs every workspace's package.json to resolve
#    the lockfile; the workspace sources themselves are not needed (libs are bundled into dist).
#    Only /app reaches the runtime stage (not the install script).
FROM install AS deps
ENV NODE_ENV=production
RUN --mount=type=secret,id=npmrc,required=false --mount=type=secret,id=npm_ca,required=false \
    --mount=type=cache,id=fcd-npm-cache,target=/root/.npm \
    sh /usr/local/lib/fcd/npm-install.sh --omit=dev --ignore-scripts

# 4. runtime: node_modules + bundles, non-root, no build tools, no sources.
FROM ${NODE_IMAGE} AS runtime
WORKDIR /app
COPY --from=deps --chown=root:root /app/ ./
# Only each service's dist/ and package.json (gathered in /out by the build stage): no source
# file reaches a layer of this stage, not even one removed later.
COPY --from=build --chown=root:root /out/services/ ./services/
# The application does not read NODE_ENV; it is not set here so nothing can branch on it.
USER 1000:1000
EXPOSE 8080 8081 8082 8083 8090 50051 9463 9464 9465 9466 9467
CMD ["node", "--liftoff-only", "--expose-gc", "--import", "./services/gateway/dist/telemetry.js", "services/gateway/dist/main.js"]
