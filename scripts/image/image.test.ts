import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * What can be shown of the image without a Docker engine (none runs on this project's machines):
 * the Dockerfile's shape, and that its production-only dependency install covers every package
 * the service bundles import at run time (a devDependency imported by a bundle would crash the
 * container at start). Reads the services' bundles, which the vitest global setup builds.
 */
const root = resolve(import.meta.dirname, '../..');
const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
const instructions = dockerfile
  .replace(/\\\n/g, ' ')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'));
const SERVICES = readdirSync(join(root, 'services')).filter((s) => existsSync(join(root, 'services', s, 'package.json')));

type Manifest = { name: string; dependencies?: Record<string, string>; devDependencies?: Record<string, string> };
const manifest = (dir: string): Manifest => JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8'));
const workspaces = new Map<string, Manifest>(
  [...readdirSync(join(root, 'libs')).map((l) => `libs/${l}`), ...SERVICES.map((s) => `services/${s}`)]
    .filter((d) => existsSync(join(root, d, 'package.json')))
    .map((d) => [manifest(d).name, manifest(d)]),
);

/** A workspace's production dependencies, following its @fcd/* workspace dependencies. */
function productionClosure(name: string, seen = new Set<string>()): Set<string> {
  const out = new Set<string>();
  if (seen.has(name)) return out;
  seen.add(name);
  for (const dep of Object.keys(workspaces.get(name)?.dependencies ?? {})) {
    if (workspaces.has(dep)) for (const d of productionClosure(dep, seen)) out.add(d);
    else out.add(dep);
  }
  return out;
}

/**
 * Every bare module specifier a bundle imports or requires (esbuild keeps npm packages external),
 * `node:` ones left out, as TypeScript's scanner reads them: from import and export declarations,
 * `import()` and `require()`, never from a string that only looks like one.
 */
function bareSpecifiers(file: string): Set<string> {
  const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
  return new Set(importedFiles.map((f) => f.fileName).filter((spec) => !/^(\.|\/|node:)/.test(spec)));
}

/** Bare package names a bundle imports: each specifier's package (`@scope/name` or `name`). */
function bundleImports(file: string): Set<string> {
  return new Set(
    [...bareSpecifiers(file)].map((spec) =>
      spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : (spec.split('/')[0] as string),
    ),
  );
}

/** Where the install stage puts scripts/image/npm-install.sh: outside /app, so not in the runtime stage. */
const INSTALL_SCRIPT = '/usr/local/lib/fcd/npm-install.sh';
const isInstall = (l: string): boolean => l.startsWith('RUN ') && l.includes(`sh ${INSTALL_SCRIPT}`);

describe('Dockerfile', () => {
  it('builds in stages: manifests, install, build with all dependencies, production dependencies only, runtime', () => {
    const stages = instructions.filter((l) => l.startsWith('FROM ')).map((l) => l.split(/\s+AS\s+/i)[1]);
    expect(stages).toEqual(['manifests', 'install', 'build', 'deps', 'runtime']);
    // The installs see only the lockfile, the manifests and the install script, so a change to sources reuses their layers.
    const from = instructions.findIndex((l) => / AS install$/.test(l));
    expect(
      instructions.slice(
        from + 1,
        instructions.findIndex((l, i) => i > from && l.startsWith('FROM ')),
      ),
    ).toEqual([
      'WORKDIR /app',
      'COPY package.json package-lock.json ./',
      'COPY --from=manifests /manifests/ ./',
      `COPY scripts/image/npm-install.sh ${INSTALL_SCRIPT}`,
    ]);
    for (const stage of ['build', 'deps']) {
      const start = instructions.findIndex((l) => new RegExp(` AS ${stage}$`).test(l));
      expect(instructions[start]).toBe(`FROM install AS ${stage}`);
      const install = instructions.findIndex((l, i) => i > start && isInstall(l));
      expect(instructions.slice(start + 1, install)).toEqual(stage === 'deps' ? ['ENV NODE_ENV=production'] : []);
    }
    const deps = instructions.slice(instructions.findIndex((l) => / AS deps$/i.test(l)));
    expect(deps.find(isInstall)).toMatch(/--omit=dev/);
  });

  it('installs with npm install and the build secrets only when they are mounted', () => {
    const script = readFileSync(join(root, 'scripts/image/npm-install.sh'), 'utf8');
    expect(script).toContain('if [ -s /run/secrets/npmrc ]; then export NPM_CONFIG_USERCONFIG=/run/secrets/npmrc; fi');
    expect(script).toContain('if [ -s /run/secrets/npm_ca ]; then export NPM_CONFIG_CAFILE=/run/secrets/npm_ca; fi');
    expect(script).toContain('exec npm install --no-audit --no-fund "$@"');
    expect(script).not.toMatch(/registry=|_authToken/);
  });

  it('runs as a non-root numeric user and starts the gateway with its telemetry preloaded by default', () => {
    const runtime = instructions.slice(instructions.findIndex((l) => / AS runtime$/i.test(l)));
    expect(runtime.filter((l) => l.startsWith('USER '))).toEqual(['USER 1000:1000']);
    expect(runtime.at(-1)).toBe(
      'CMD ["node", "--liftoff-only", "--expose-gc", "--import", "./services/gateway/dist/telemetry.js", "services/gateway/dist/main.js"]',
    );
  });

  it('gives npm its configuration only as build secrets, and copies only bundles into the runtime stage', () => {
    const installs = instructions.filter(isInstall);
    expect(installs).toHaveLength(2);
    for (const run of installs) {
      expect(run).toContain('--mount=type=secret,id=npmrc,required=false --mount=type=secret,id=npm_ca,required=false');
      expect(run).not.toMatch(/npm cache clean|registry=|_authToken/);
    }
    const runtime = instructions.slice(instructions.findIndex((l) => / AS runtime$/i.test(l)));
    expect(runtime.filter((l) => l.startsWith('COPY '))).toEqual([
      'COPY --from=deps --chown=root:root /app/ ./',
      'COPY --from=build --chown=root:root /out/services/ ./services/',
    ]);
  });

  it("builds each service with its own build script, so the gateway's dist/ holds the customer portal (docs/portal.md)", () => {
    const builds = instructions.filter((l) => l.startsWith('RUN for s in services/*/; do (cd "$s" && npm run build --silent); done'));
    expect(builds).toHaveLength(1);
    const gateway = JSON.parse(readFileSync(join(root, 'services/gateway/package.json'), 'utf8')) as { scripts: { build: string } };
    expect(gateway.scripts.build).toBe('node ../../scripts/build-service.mjs && node portal/build.mjs');
  });

  it('keeps dependencies, build output and secrets out of the build context', () => {
    const ignored = readFileSync(join(root, '.dockerignore'), 'utf8').split('\n');
    for (const entry of ['**/node_modules', '**/dist', '.git', '.env', '.env.*', '**/test']) expect(ignored).toContain(entry);
  });
});

/**
 * Specifiers Node's ESM resolution cannot load from the bundle's folder: it maps each to a file
 * (package `exports` or the literal subpath) and a missing file fails the container at start
 * (`ERR_MODULE_NOT_FOUND`: an extensionless deep import such as `pkg/dist/file`, which bundlers
 * and vitest complete but Node does not). import.meta.resolve gives the URL; the file must exist.
 */
function unresolvable(dir: string, specs: Set<string>): string[] {
  const script = `const out = [];
    for (const s of JSON.parse(process.argv[1])) {
      try { const u = import.meta.resolve(s); if (u.startsWith('file:') && !(await import('node:fs')).existsSync(new URL(u))) out.push(s); }
      catch { out.push(s); }
    }
    console.log(JSON.stringify(out));`;
  return JSON.parse(
    execFileSync(process.execPath, ['--input-type=module', '-e', script, JSON.stringify([...specs])], { cwd: dir, encoding: 'utf8' }),
  );
}

describe.each(SERVICES)('the %s bundles', (service) => {
  it("load every bare import with Node's own ESM resolution (no extensionless deep import)", () => {
    const dist = join(root, 'services', service, 'dist');
    const specs = new Set<string>();
    for (const b of readdirSync(dist).filter((f) => f.endsWith('.js'))) for (const s of bareSpecifiers(join(dist, b))) specs.add(s);
    expect(specs.size).toBeGreaterThan(0);
    expect(unresolvable(dist, specs)).toEqual([]);
  });

  it('import only packages the production-only install provides', () => {
    const dist = join(root, 'services', service, 'dist');
    const bundles = readdirSync(dist).filter((f) => f.endsWith('.js'));
    expect(bundles).toContain('main.js');
    const provided = productionClosure(manifest(`services/${service}`).name);
    const missing = new Set<string>();
    for (const b of bundles) for (const name of bundleImports(join(dist, b))) if (!provided.has(name)) missing.add(name);
    expect([...missing], `imported by services/${service}/dist but not a production dependency`).toEqual([]);
  });
});
