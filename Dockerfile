# syntax=docker/dockerfile:1
# One image for every service; the container command picks the service:
#   node --import ./services/<name>/dist/telemetry.js services/<name>/dist/main.js
#                                              (gateway, usage, facility, webhook, dispatcher; OTEL_* env)
#   node services/<name>/dist/cli.js migrate   (usage, facility, webhook: schema migrations)
# The Helm chart (deploy/helm/facility-compliance) sets the command per Deployment and for the
# migration Job. See docs/operations.md.
ARG NODE_IMAGE=node:20-bookworm-slim

# 1. build: all dependencies (esbuild, TypeScript sources of libs/), bundle each service to dist/.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY libs/ libs/
COPY services/ services/
COPY proto/ proto/
COPY scripts/build-service.mjs scripts/build-service.mjs
COPY tsconfig.base.json tsconfig.json turbo.json ./
# npm install with the committed lockfile: the lockfile holds only the Linux builds of platform
# packages (the project registry serves no others), which `npm ci`'s strict check refuses.
RUN npm install --no-audit --no-fund \
 && for s in services/*/; do (cd "$s" && node ../../scripts/build-service.mjs); done

# 2. deps: production dependencies only. npm needs every workspace's package.json to resolve
#    the lockfile; the workspace sources themselves are not needed (libs are bundled into dist).
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
COPY --from=build /app/libs/ /tmp/libs/
COPY --from=build /app/services/ /tmp/services/
RUN set -e; for d in /tmp/libs/* /tmp/services/*; do \
      rel="${d#/tmp/}"; mkdir -p "$rel"; cp "$d/package.json" "$rel/package.json"; \
    done; \
    npm install --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force \
 && rm -rf /tmp/libs /tmp/services

# 3. runtime: node_modules + bundles, non-root, no build tools, no sources.
FROM ${NODE_IMAGE} AS runtime
WORKDIR /app
COPY --from=deps --chown=root:root /app/ ./
COPY --from=build --chown=root:root /app/services/ /tmp/built/
RUN set -e; for d in /tmp/built/*/; do \
      name="$(basename "$d")"; mkdir -p "services/$name"; \
      cp -r "$d/dist" "services/$name/dist"; cp "$d/package.json" "services/$name/package.json"; \
    done; rm -rf /tmp/built
# The application does not read NODE_ENV; it is not set here so nothing can branch on it.
USER 1000:1000
EXPOSE 8080 8081 8082 8083 8090 50051 9463 9464 9465 9466 9467
CMD ["node", "--max-semi-space-size=4", "--import", "./services/gateway/dist/telemetry.js", "services/gateway/dist/main.js"]
