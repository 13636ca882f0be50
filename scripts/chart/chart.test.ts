import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { CHART, CI_VALUES, helmLint, helmTemplate, type Manifest, render, validateManifests } from './manifests';

const SERVICES = ['gateway', 'usage', 'facility', 'webhook', 'dispatcher'];
const rendered = new Map<string, Manifest[]>();
const valuesName = (file: string) => file.split('/').pop()?.replace('-values.yaml', '') ?? file;

beforeAll(() => {
  for (const file of CI_VALUES) rendered.set(valuesName(file), render([file]));
});

const of = (values: string, kind: string) => (rendered.get(values) ?? []).filter((m) => m.kind === kind);
const component = (m: Manifest) => m.metadata.labels?.['app.kubernetes.io/component'];
const byComponent = (values: string, kind: string, name: string) => {
  const found = of(values, kind).find((m) => component(m) === name);
  if (!found) throw new Error(`${values}: no ${kind} for ${name}`);
  return found;
};

describe.each(CI_VALUES.map(valuesName))('chart rendered with ci/%s-values.yaml', (values) => {
  it('passes helm lint --strict', () => {
    expect(() => helmLint(CI_VALUES.filter((f) => valuesName(f) === values))).not.toThrow();
  });

  it('passes the Kubernetes schema of every kind it renders', async () => {
    const manifests = rendered.get(values) ?? [];
    expect(manifests.length).toBeGreaterThan(20);
    expect(await validateManifests(manifests)).toEqual([]);
  });

  it('runs every container as non-root with a read-only root filesystem, no privilege escalation and no capabilities', () => {
    const pods = [...of(values, 'Deployment'), ...of(values, 'Job')].map((m) => m.spec.template.spec);
    pods.push(...of(values, 'Pod').map((m) => m.spec));
    expect(pods.length).toBe(SERVICES.length + 2);
    for (const pod of pods) {
      expect(pod.securityContext.runAsNonRoot).toBe(true);
      expect(pod.automountServiceAccountToken).toBe(false);
      for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
        expect(c.securityContext, c.name).toMatchObject({
          runAsNonRoot: true,
          readOnlyRootFilesystem: true,
          allowPrivilegeEscalation: false,
          privileged: false,
          capabilities: { drop: ['ALL'] },
        });
        expect(c.securityContext.runAsUser).toBeGreaterThan(0);
      }
    }
  });

  it('gives every service a Deployment with /healthz liveness and startup probes, /readyz readiness (the gateway: /healthz), resources and a writable /tmp', () => {
    for (const name of SERVICES) {
      const d = byComponent(values, 'Deployment', name);
      const [c] = d.spec.template.spec.containers;
      expect(c.command).toEqual(['node', '--import', `./services/${name}/dist/telemetry.js`, `services/${name}/dist/main.js`]);
      expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
      // The gateway's readiness is local (see values.yaml); the others' follows their dependencies.
      expect(c.readinessProbe.httpGet).toEqual({ path: name === 'gateway' ? '/healthz' : '/readyz', port: 'http' });
      expect(c.startupProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
      expect(c.resources.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
      expect(c.resources.limits.memory).toEqual(expect.any(String));
      expect(c.volumeMounts).toContainEqual({ name: 'tmp', mountPath: '/tmp' });
      const http = c.ports.find((p: { name: string }) => p.name === 'http').containerPort;
      expect(c.env).toContainEqual({ name: 'PORT', value: String(http) });
      for (const kind of ['Service', 'ServiceAccount', 'PodDisruptionBudget', 'NetworkPolicy']) byComponent(values, kind, name);
    }
  });

  it('reads every credential from a Secret, never from a literal env value', () => {
    const secretVars = [
      'DATABASE_URL',
      'REDIS_URL',
      'NATS_URL',
      'INTERNAL_AUTH_SECRET',
      'WEBHOOK_SECRET_KEY',
      'INGEST_TOKEN',
      'ADMIN_TOKEN',
    ];
    for (const d of of(values, 'Deployment')) {
      for (const e of d.spec.template.spec.containers[0].env) {
        if (secretVars.includes(e.name)) expect(e.valueFrom?.secretKeyRef, `${component(d)} ${e.name}`).toBeDefined();
      }
    }
  });

  it('admits ingress-controller traffic to the gateway only, and domain services only from their callers', () => {
    const policies = of(values, 'NetworkPolicy');
    expect(policies.map(component).sort()).toEqual([...SERVICES, 'migrate'].sort());
    for (const p of policies) expect(p.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    const fromNamespaces = (p: Manifest) =>
      p.spec.ingress.flatMap((r: { from: { namespaceSelector?: unknown }[] }) => r.from.filter((f) => f.namespaceSelector));
    const sources = (p: Manifest) =>
      p.spec.ingress.flatMap((r: { from: { podSelector?: { matchLabels?: Record<string, string> } }[] }) =>
        r.from.map((f) => f.podSelector?.matchLabels?.['app.kubernetes.io/component']).filter(Boolean),
      );
    const gateway = byComponent(values, 'NetworkPolicy', 'gateway');
    expect(fromNamespaces(gateway).length).toBe(2); // ingress controller (http) + monitoring (metrics)
    for (const name of ['usage', 'facility', 'webhook', 'dispatcher']) {
      const p = byComponent(values, 'NetworkPolicy', name);
      // Only the monitoring namespace, on the metrics port, comes from outside the release.
      const external = p.spec.ingress.filter((r: { from: { namespaceSelector?: unknown }[] }) => r.from.some((f) => f.namespaceSelector));
      for (const rule of external) expect(rule.ports).toEqual([{ protocol: 'TCP', port: 'metrics' }]);
    }
    expect(sources(byComponent(values, 'NetworkPolicy', 'usage'))).toEqual(['gateway', 'dispatcher']);
    expect(sources(byComponent(values, 'NetworkPolicy', 'webhook'))).toEqual(['gateway', 'dispatcher']);
    expect(sources(byComponent(values, 'NetworkPolicy', 'dispatcher'))).toEqual([]);
    for (const s of sources(byComponent(values, 'NetworkPolicy', 'facility'))) expect(['gateway', 'webhook', 'dispatcher']).toContain(s);
    const dispatcherEgress = byComponent(values, 'NetworkPolicy', 'dispatcher').spec.egress;
    // The dispatcher asks the usage service for tiers (gRPC) before sending.
    expect(dispatcherEgress).toContainEqual({
      to: [{ podSelector: { matchLabels: expect.objectContaining({ 'app.kubernetes.io/component': 'usage' }) } }],
      ports: [{ protocol: 'TCP', port: 50051 }],
    });
    const dispatcherEnv = byComponent(values, 'Deployment', 'dispatcher').spec.template.spec.containers[0].env;
    expect(dispatcherEnv).toContainEqual({ name: 'USAGE_GRPC_ADDRESS', value: expect.stringMatching(/-usage:50051$/) });
    expect(dispatcherEgress).toContainEqual(expect.objectContaining({ ports: [{ protocol: 'TCP', port: 443 }] }));
  });

  it('runs the schema migrations as a pre-install/pre-upgrade hook Job, one step per schema', () => {
    const jobs = of(values, 'Job');
    expect(jobs).toHaveLength(1);
    const job = jobs[0] as Manifest;
    expect(job.metadata.annotations?.['helm.sh/hook']).toBe('pre-install,pre-upgrade');
    expect(job.metadata.annotations?.['helm.sh/hook-delete-policy']).toContain('before-hook-creation');
    const steps = [...job.spec.template.spec.initContainers, ...job.spec.template.spec.containers];
    expect(steps.map((c: { command: string[] }) => c.command.join(' '))).toEqual([
      'node services/usage/dist/cli.js migrate',
      'node services/facility/dist/cli.js migrate',
      'node services/webhook/dist/cli.js migrate',
    ]);
    const usage = byComponent(values, 'Deployment', 'usage').spec.template.spec.containers[0];
    expect(usage.env).toContainEqual({ name: 'MIGRATE_ON_START', value: 'false' });
    const [test] = of(values, 'Pod');
    expect(test?.metadata.annotations?.['helm.sh/hook']).toBe('test');
  });
});

describe('optional features', () => {
  it('routes every Ingress path to the gateway service only', () => {
    const ingresses = of('all-features', 'Ingress');
    expect(ingresses).toHaveLength(1);
    const gatewayService = byComponent('all-features', 'Service', 'gateway').metadata.name;
    const backends = ingresses[0]?.spec.rules.flatMap((r: { http: { paths: { backend: unknown }[] } }) =>
      r.http.paths.map((p) => p.backend),
    );
    expect(backends).toEqual([{ service: { name: gatewayService, port: { name: 'http' } } }]);
    expect(of('defaults', 'Ingress')).toEqual([]);
  });

  it('opens egress to the OpenTelemetry collector for every service only when networkPolicy.telemetry is enabled', () => {
    const collector = {
      ports: [
        { protocol: 'TCP', port: 4317 },
        { protocol: 'TCP', port: 4318 },
      ],
      to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'observability' } } }],
    };
    for (const name of SERVICES) {
      expect(byComponent('all-features', 'NetworkPolicy', name).spec.egress, name).toContainEqual(collector);
      const egress = byComponent('defaults', 'NetworkPolicy', name).spec.egress as { ports?: { port: number }[] }[];
      expect(
        egress.flatMap((r) => r.ports ?? []).some((p) => p.port === 4317 || p.port === 4318),
        name,
      ).toBe(false);
    }
  });

  it('renders the ServiceMonitor, the PrometheusRule with the seven alerts and the dashboard only when enabled', () => {
    const [rule] = of('all-features', 'PrometheusRule');
    const alerts = rule?.spec.groups.flatMap((g: { rules: { alert: string }[] }) => g.rules.map((r) => r.alert));
    expect(alerts).toEqual([
      'FcdHighErrorRate',
      'FcdHighLatencyP99',
      'FcdOutboxBacklog',
      'FcdWebhookDeliveryFailureRatio',
      'FcdDispatcherConsumerLag',
      'FcdWebhookDeactivations',
      'FcdWebhookSecretUnreadable',
    ]);
    expect(of('all-features', 'ServiceMonitor')[0]?.spec.endpoints).toEqual([
      expect.objectContaining({ port: 'metrics', path: '/metrics' }),
    ]);
    const dashboard = of('all-features', 'ConfigMap')[0]?.data['facility-compliance.json'];
    expect(JSON.parse(dashboard).panels.length).toBeGreaterThan(5);
    for (const kind of ['ServiceMonitor', 'PrometheusRule', 'ConfigMap', 'Secret']) expect(of('defaults', kind)).toEqual([]);
  });

  it('keeps the chart-managed Secret (URLs by value, generated secrets) as a hook ordered before the migration Job', () => {
    const [secret] = of('all-features', 'Secret');
    expect(secret?.metadata.annotations).toMatchObject({ 'helm.sh/hook': 'pre-install,pre-upgrade', 'helm.sh/hook-weight': '-10' });
    expect(Object.keys(secret?.data ?? {}).sort()).toEqual(
      ['admin-token', 'database-url', 'ingest-token', 'internal-auth-secret', 'nats-url', 'redis-url', 'webhook-secret-key'].sort(),
    );
    const key = Buffer.from(secret?.data['webhook-secret-key'], 'base64').toString();
    expect(Buffer.from(key, 'base64')).toHaveLength(32);
  });
});

describe('values.schema.json and required values', () => {
  const defaults = [join(CHART, 'ci/defaults-values.yaml')];
  it('rejects a wrongly typed value', () => {
    expect(() => helmTemplate(defaults, ['--set', 'gateway.replicaCount=two'])).toThrow(/replicaCount.*want integer/);
  });
  it('rejects an unknown key of a service', () => {
    expect(() => helmTemplate(defaults, ['--set', 'usage.replicas=3'])).toThrow(/additional properties 'replicas'/);
  });
  it('refuses to render without a source for a required secret unless generation is allowed', () => {
    expect(() => helmTemplate(defaults, ['--set', 'secrets.internalAuth.existingSecret='])).toThrow(/secrets\.internalAuth/);
    expect(() => helmTemplate(defaults, ['--set', 'externalDatabase.existingSecret='])).toThrow(/externalDatabase/);
    expect(() => helmTemplate(defaults, ['--set', 'secrets.internalAuth.existingSecret=', '--set', 'secrets.generate=true'])).not.toThrow();
  });

  it('refuses collector egress without a destination (it would open the OTLP ports to any address)', () => {
    expect(() => helmTemplate(defaults, ['--set', 'networkPolicy.telemetry.enabled=true'])).toThrow(/networkPolicy\.telemetry\.to/);
  });
});
