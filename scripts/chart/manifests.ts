/**
 * Renders the Helm chart with the helm binary unpacked by tools.sh and validates every rendered
 * document against the Kubernetes OpenAPI schemas shipped by the npm packages `kubernetes-models`
 * (core API groups) and `@kubernetes-models/prometheus-operator` (ServiceMonitor, PrometheusRule),
 * unknown fields included. Used by check.sh (through validate.ts) and by chart.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const CHART = join(ROOT, 'deploy/helm/facility-compliance');
export const CI_VALUES = [
  'defaults-values.yaml',
  'all-features-values.yaml',
  'external-secrets-values.yaml',
  'backend-tls-values.yaml',
].map((f) => join(CHART, 'ci', f));

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  // biome-ignore lint/suspicious/noExplicitAny: rendered Kubernetes objects are checked by schema, not by type
  spec?: any;
  // biome-ignore lint/suspicious/noExplicitAny: idem
  [key: string]: any;
}

/** Path of the helm binary, unpacking it first when needed. */
export function helmBinary(): string {
  const helm = join(ROOT, '.tools/bin/helm');
  if (!existsSync(helm)) execFileSync('bash', [join(ROOT, 'scripts/chart/tools.sh')], { stdio: 'ignore' });
  return helm;
}

/** `helm template` output as YAML text; throws with helm's message on failure. */
export function helmTemplate(valuesFiles: string[], args: string[] = []): string {
  const flags = valuesFiles.flatMap((f) => ['-f', f]);
  try {
    return execFileSync(helmBinary(), ['template', 'fcd', CHART, '--namespace', 'fcd', ...flags, ...args], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(e.stderr?.trim() || e.message);
  }
}

/** `helm lint --strict` of the chart with the given values files; throws with helm's output on a finding. */
export function helmLint(valuesFiles: string[]): void {
  const flags = valuesFiles.flatMap((f) => ['-f', f]);
  try {
    execFileSync(helmBinary(), ['lint', CHART, '--strict', '--quiet', ...flags], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${e.stdout ?? ''}${e.stderr ?? ''}`.trim() || e.message);
  }
}

/** Every non-empty document of a YAML stream; YAML syntax errors throw. */
export function parseManifests(text: string): Manifest[] {
  const out: Manifest[] = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw new Error(`invalid YAML: ${doc.errors[0]?.message}`);
    const value = doc.toJS() as Manifest | null;
    if (value) out.push(value);
  }
  return out;
}

export function render(valuesFiles: string[], args: string[] = []): Manifest[] {
  return parseManifests(helmTemplate(valuesFiles, args));
}

/** Module of the kubernetes-models class of one apiVersion/kind. */
function modelModule(apiVersion: string, kind: string): string {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  if (group === 'monitoring.coreos.com') return `@kubernetes-models/prometheus-operator/${group}/${version}/${kind}`;
  return group === '' ? `kubernetes-models/${version}/${kind}` : `kubernetes-models/${group}/${version}/${kind}`;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Where the compiled validator of a schema looked in one object of a manifest. */
interface Visit {
  path: string;
  value: Record<string, unknown>;
  /** Property names the validator read or tested (known properties of the object's schema). */
  read: Set<string>;
  /** The validator listed the keys: a map (`additionalProperties`), any key is allowed. */
  listed: boolean;
}

/**
 * A copy of `value` whose objects record what a validator reads. The validators compiled into
 * kubernetes-models test each property their schema declares (`data.readOnlyRootFilesystem !==
 * undefined`, ...) and list the keys of maps, so a key of a typed object that was never read is a
 * field the schema does not know.
 */
function observed(value: unknown, path: string, visits: Visit[]): unknown {
  if (Array.isArray(value)) return value.map((v, i) => observed(v, `${path}[${i}]`, visits));
  if (value === null || typeof value !== 'object') return value;
  const visit: Visit = { path, value: value as Record<string, unknown>, read: new Set(), listed: false };
  visits.push(visit);
  const copy: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) copy[k] = observed(v, path ? `${path}.${k}` : k, visits);
  const note = (p: string | symbol) => {
    if (typeof p === 'string') visit.read.add(p);
  };
  return new Proxy(copy, {
    get(t, p, r) {
      note(p);
      return Reflect.get(t, p, r);
    },
    has(t, p) {
      note(p);
      return Reflect.has(t, p);
    },
    getOwnPropertyDescriptor(t, p) {
      note(p);
      return Reflect.getOwnPropertyDescriptor(t, p);
    },
    ownKeys(t) {
      visit.listed = true;
      return Reflect.ownKeys(t);
    },
  });
}

/**
 * Fields of a manifest its schema does not declare (e.g. a misspelled `readOnlyRootFilesytem`,
 * which the API server would drop or refuse). Objects the validator did not look into at all
 * (free-form schemas) and maps are not judged.
 */
function unknownFields(visits: Visit[]): string[] {
  const unknown: string[] = [];
  for (const v of visits) {
    if (v.listed || v.read.size === 0) continue;
    for (const key of Object.keys(v.value)) if (!v.read.has(key)) unknown.push(v.path ? `${v.path}.${key}` : key);
  }
  return unknown;
}

/**
 * Problems of one manifest: the OpenAPI schema of its kind (types, required fields, enums,
 * formats), fields the schema does not declare (the schemas alone accept them: see
 * `unknownFields`), plus the name rules the API server applies (DNS-1123; 63 characters for
 * Services and label values).
 */
export async function validateManifest(m: Manifest): Promise<string[]> {
  const where = `${m?.kind ?? '?'}/${m?.metadata?.name ?? '?'}`;
  if (!m || typeof m.apiVersion !== 'string' || typeof m.kind !== 'string') return [`${where}: apiVersion and kind are required`];
  const problems: string[] = [];
  const name = m.metadata?.name ?? '';
  const nameRule = m.kind === 'Service' ? DNS_LABEL : DNS_SUBDOMAIN;
  if (!nameRule.test(name) || name.length > (m.kind === 'Service' ? 63 : 253)) problems.push(`${where}: invalid name "${name}"`);
  for (const [k, v] of Object.entries(m.metadata?.labels ?? {})) {
    if (typeof v !== 'string' || v.length > 63 || !/^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/.test(v))
      problems.push(`${where}: invalid value of label ${k}`);
  }
  let Model: { prototype: { validate(this: unknown): void } };
  try {
    const mod = await import(modelModule(m.apiVersion, m.kind));
    Model = mod[m.kind];
    if (typeof Model?.prototype?.validate !== 'function') throw new Error('no model');
  } catch {
    return [...problems, `${where}: no schema for ${m.apiVersion} ${m.kind}`];
  }
  // The model's validate() runs its compiled schema on `this`: here, the recording copy.
  const visits: Visit[] = [];
  try {
    Model.prototype.validate.call(observed(m, '', visits));
  } catch (err) {
    problems.push(`${where}: ${(err as Error).message}`);
    return problems; // a validator that failed may have stopped early: its reads are incomplete
  }
  for (const field of unknownFields(visits)) problems.push(`${where}: unknown field ${field}`);
  return problems;
}

export async function validateManifests(manifests: Manifest[]): Promise<string[]> {
  const all = await Promise.all(manifests.map((m) => validateManifest(m)));
  return all.flat();
}
