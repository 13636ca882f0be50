import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { CHART, CI_VALUES, helmLint, helmTemplate, type Manifest, ROOT, render, validateManifest, validateManifests } from './manifests';

const SERVICES = ['gateway', 'usage', 'facility', 'webhook', 'dispatcher'];
const rendered = new Map<string, Manifest[]>();
const valuesName = (file: string) => file.split('/').pop()?.replace('-values.yaml', '') ?? file;
/** The chart-managed Secret of release `fcd` (URLs by value, generated secrets). */
const CHART_SECRET = 'fcd-facility-compliance';

// ---- the values a CI file renders with: values.yaml under the file, as helm merges them ----
type Values = Record<string, any>;
const isMap = (v: unknown): v is Values => v !== null && typeof v === 'object' && !Array.isArray(v);
const deepMerge = (base: Values, over: Values): Values => {
  const out: Values = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = isMap(v) && isMap(out[k]) ? deepMerge(out[k], v) : v;
  return out;
};
const readYaml = (file: string): Values => (parse(readFileSync(file, 'utf8')) as Values | null) ?? {};
const merged = new Map<string, Values>();
const valuesOf = (values: string): Values => {
  let v = merged.get(values);
  if (!v) {
    v = deepMerge(readYaml(join(CHART, 'values.yaml')), readYaml(join(CHART, 'ci', `${values}-values.yaml`)));
    merged.set(values, v);
  }
  return v;
};
/** One service's values: serviceDefaults with the service's own map over it (fcd.serviceValues). */
const serviceValues = (values: string, name: string): Values => deepMerge(valuesOf(values).serviceDefaults, valuesOf(values)[name] ?? {});

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
      // The gateway runs with gc() exposed (a young collection after each export page) and its
      // WebAssembly with Liftoff only (values.yaml, nodeOptions); the others with node's defaults.
      const flags = name === 'gateway' ? ['--liftoff-only', '--expose-gc'] : [];
      expect(c.command).toEqual(['node', ...flags, '--import', `./services/${name}/dist/telemetry.js`, `services/${name}/dist/main.js`]);
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
      // Rollouts: out of rotation before SIGTERM (preStop sleep), and time for the 25 s shutdown bound after it.
      // (The dispatcher has no Service: it pulls from JetStream, so it needs no time out of rotation.)
      if (name === 'dispatcher') expect(c.lifecycle).toBeUndefined();
      else expect(c.lifecycle).toEqual({ preStop: { exec: { command: ['sleep', '5'] } } });
      expect(d.spec.template.spec.terminationGracePeriodSeconds).toBe(35);
    }
  });

  it('gives every Postgres client the pool timeouts, connection lifetime and idle timeout of externalDatabase.pool', () => {
    const pool = valuesOf(values).externalDatabase.pool;
    const expected = {
      PG_CONNECT_TIMEOUT_MS: String(pool.connectTimeoutMs),
      PG_QUERY_TIMEOUT_MS: String(pool.queryTimeoutMs),
      PG_IDLE_TIMEOUT_MS: String(pool.idleTimeoutMs),
      PG_MAX_LIFETIME_S: String(pool.maxLifetimeSeconds),
    };
    expect(expected).toEqual({
      PG_CONNECT_TIMEOUT_MS: '2000',
      PG_QUERY_TIMEOUT_MS: '10000',
      PG_IDLE_TIMEOUT_MS: '30000',
      PG_MAX_LIFETIME_S: '1800',
    });
    for (const name of ['usage', 'facility', 'webhook', 'dispatcher']) {
      const env = byComponent(values, 'Deployment', name).spec.template.spec.containers[0].env as { name: string; value?: string }[];
      const pg = Object.fromEntries(env.filter((e) => e.name.startsWith('PG_') && e.name !== 'PG_POOL_MAX').map((e) => [e.name, e.value]));
      expect(pg, name).toEqual(expected);
    }
  });

  it('gives the webhook service and the dispatcher the same event retention, eventLog.retentionDays', () => {
    type Env = { name: string; value?: string }[];
    const retention = (manifests: Manifest[], name: string) => {
      const deployment = manifests.find((m) => m.kind === 'Deployment' && component(m) === name) as Manifest;
      return (deployment.spec.template.spec.containers[0].env as Env).filter((e) => e.name === 'EVENT_RETENTION_DAYS');
    };
    for (const name of ['webhook', 'dispatcher']) {
      expect(retention(rendered.get(values) ?? [], name), name).toEqual([
        { name: 'EVENT_RETENTION_DAYS', value: String(valuesOf(values).eventLog.retentionDays) },
      ]);
    }
    const set = render(
      CI_VALUES.filter((f) => valuesName(f) === values),
      ['--set', 'eventLog.retentionDays=7'],
    );
    for (const name of ['webhook', 'dispatcher'])
      expect(retention(set, name), name).toEqual([{ name: 'EVENT_RETENTION_DAYS', value: '7' }]);
  });

  it('leaves the preStop hook out when preStopSleepSeconds is 0', () => {
    const deployments = render(
      CI_VALUES.filter((f) => valuesName(f) === values),
      ['--set', 'serviceDefaults.preStopSleepSeconds=0'],
    ).filter((m) => m.kind === 'Deployment');
    expect(deployments.length).toBeGreaterThan(0);
    for (const d of deployments) expect(d.spec.template.spec.containers[0].lifecycle).toBeUndefined();
  });

  it('gives every service exactly the credentials its config.ts reads, each from the Secret and key the values name', () => {
    const v = valuesOf(values);
    type Ref = { name: string; key: string };
    const urlRef = (cfg: Values, key: string): Ref =>
      cfg.url ? { name: CHART_SECRET, key } : { name: cfg.existingSecret, key: cfg.existingSecretKey };
    const secretRef = (cfg: Values, key: string): Ref | undefined => {
      if (cfg.existingSecret) return { name: cfg.existingSecret, key: cfg.existingSecretKey };
      return v.secrets.generate ? { name: CHART_SECRET, key } : undefined;
    };
    const refs: Record<string, Ref | undefined> = {
      DATABASE_URL: urlRef(v.externalDatabase, 'database-url'),
      REDIS_URL: urlRef(v.externalRedis, 'redis-url'),
      NATS_URL: urlRef(v.externalNats, 'nats-url'),
      INTERNAL_AUTH_SECRET: secretRef(v.secrets.internalAuth, 'internal-auth-secret'),
      USAGE_GRPC_SECRET: secretRef(v.secrets.usageGrpc, 'usage-grpc-secret'),
      WEBHOOK_SECRET_KEY: secretRef(v.secrets.webhookEncryptionKey, 'webhook-secret-key'),
      WEBHOOK_SECRET_KEY_PREVIOUS:
        v.secrets.webhookEncryptionKey.existingSecret && v.secrets.webhookEncryptionKey.previousKeysKey
          ? { name: v.secrets.webhookEncryptionKey.existingSecret, key: v.secrets.webhookEncryptionKey.previousKeysKey }
          : undefined,
      INGEST_TOKEN: secretRef(v.secrets.ingestToken, 'ingest-token'),
      ADMIN_TOKEN: secretRef(v.secrets.adminToken, 'admin-token'), // optional: the admin API is off without it
    };
    const credentials = Object.keys(refs);
    // What each service's src/config.ts reads (required ones first, then the optional ones).
    const needs: Record<string, string[]> = {
      gateway: ['REDIS_URL', 'INTERNAL_AUTH_SECRET', 'USAGE_GRPC_SECRET'],
      usage: ['DATABASE_URL', 'REDIS_URL', 'USAGE_GRPC_SECRET', 'ADMIN_TOKEN'],
      facility: ['DATABASE_URL', 'NATS_URL', 'INTERNAL_AUTH_SECRET', 'INGEST_TOKEN'],
      webhook: ['DATABASE_URL', 'INTERNAL_AUTH_SECRET', 'WEBHOOK_SECRET_KEY', 'WEBHOOK_SECRET_KEY_PREVIOUS'],
      dispatcher: ['DATABASE_URL', 'NATS_URL', 'USAGE_GRPC_SECRET', 'WEBHOOK_SECRET_KEY', 'WEBHOOK_SECRET_KEY_PREVIOUS'],
    };
    const required = [
      'DATABASE_URL',
      'REDIS_URL',
      'NATS_URL',
      'INTERNAL_AUTH_SECRET',
      'USAGE_GRPC_SECRET',
      'WEBHOOK_SECRET_KEY',
      'INGEST_TOKEN',
    ];
    type Env = { name: string; value?: string; valueFrom?: { secretKeyRef?: Ref } };
    const fromSecrets = (env: Env[]) => {
      for (const e of env) if (credentials.includes(e.name)) expect(e.value, `${e.name} is never a literal`).toBeUndefined();
      return Object.fromEntries(env.filter((e) => credentials.includes(e.name)).map((e) => [e.name, e.valueFrom?.secretKeyRef]));
    };
    for (const name of SERVICES) {
      const config = readFileSync(join(ROOT, 'services', name, 'src/config.ts'), 'utf8');
      const needed = needs[name] ?? [];
      expect(needed.length, name).toBeGreaterThan(0);
      expect(
        credentials.filter((c) => new RegExp(`\\b${c}\\s*:`).test(config)),
        `${name}: credentials named in src/config.ts`,
      ).toEqual([...needed].sort((a, b) => credentials.indexOf(a) - credentials.indexOf(b)));
      const expected = Object.fromEntries(needed.filter((c) => refs[c]).map((c) => [c, refs[c]]));
      for (const c of needed) if (required.includes(c)) expect(expected[c], `${name} ${c} has a source`).toBeDefined();
      const env = byComponent(values, 'Deployment', name).spec.template.spec.containers[0].env as Env[];
      expect(fromSecrets(env), name).toEqual(expected);
    }
    const [job] = of(values, 'Job');
    const steps = job ? [...job.spec.template.spec.initContainers, ...job.spec.template.spec.containers] : [];
    expect(steps).toHaveLength(3);
    for (const c of steps) {
      expect(fromSecrets(c.env), `migration ${c.name}`).toEqual({ DATABASE_URL: refs.DATABASE_URL });
    }
  });

  it('reads every credential from the Secrets named by the values file', () => {
    const refs = of(values, 'Deployment')
      .flatMap(
        (d) => d.spec.template.spec.containers[0].env as { name: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[],
      )
      .flatMap((e) => (e.valueFrom?.secretKeyRef ? [`${e.name} ${e.valueFrom.secretKeyRef.name}/${e.valueFrom.secretKeyRef.key}`] : []));
    const expected: Record<string, string[]> = {
      defaults: [
        'DATABASE_URL facility-compliance-secrets/database-url',
        'REDIS_URL facility-compliance-secrets/redis-url',
        'NATS_URL facility-compliance-secrets/nats-url',
        'INTERNAL_AUTH_SECRET facility-compliance-secrets/internal-auth-secret',
        'USAGE_GRPC_SECRET facility-compliance-secrets/usage-grpc-secret',
        'WEBHOOK_SECRET_KEY facility-compliance-secrets/webhook-secret-key',
        'INGEST_TOKEN facility-compliance-secrets/ingest-token',
      ],
      'all-features': [
        `DATABASE_URL ${CHART_SECRET}/database-url`,
        `REDIS_URL ${CHART_SECRET}/redis-url`,
        `NATS_URL ${CHART_SECRET}/nats-url`,
        `INTERNAL_AUTH_SECRET ${CHART_SECRET}/internal-auth-secret`,
        `USAGE_GRPC_SECRET ${CHART_SECRET}/usage-grpc-secret`,
        `WEBHOOK_SECRET_KEY ${CHART_SECRET}/webhook-secret-key`,
        `INGEST_TOKEN ${CHART_SECRET}/ingest-token`,
        `ADMIN_TOKEN ${CHART_SECRET}/admin-token`,
      ],
      // ci/external-secrets-values.yaml: one Secret per concern, custom keys, a previous key for rotation.
      'external-secrets': [
        'DATABASE_URL fcd-postgres/uri',
        'REDIS_URL fcd-redis/uri',
        'NATS_URL fcd-nats/uri',
        'INTERNAL_AUTH_SECRET fcd-app/internal-auth',
        'USAGE_GRPC_SECRET fcd-app/usage-grpc',
        'WEBHOOK_SECRET_KEY fcd-webhook-key/current',
        'WEBHOOK_SECRET_KEY_PREVIOUS fcd-webhook-key/previous',
        'INGEST_TOKEN fcd-app/ingest',
        'ADMIN_TOKEN fcd-app/admin',
      ],
      // ci/backend-tls-values.yaml: the defaults plus the backends' passwords (CA files are mounted, not env).
      'backend-tls': [
        'DATABASE_URL facility-compliance-secrets/database-url',
        'DATABASE_PASSWORD pg-auth/pg-password',
        'REDIS_URL facility-compliance-secrets/redis-url',
        'REDIS_PASSWORD redis-auth/redis-password',
        'NATS_URL facility-compliance-secrets/nats-url',
        'NATS_PASSWORD nats-auth/facility-password',
        'INTERNAL_AUTH_SECRET facility-compliance-secrets/internal-auth-secret',
        'USAGE_GRPC_SECRET facility-compliance-secrets/usage-grpc-secret',
        'WEBHOOK_SECRET_KEY facility-compliance-secrets/webhook-secret-key',
        'INGEST_TOKEN facility-compliance-secrets/ingest-token',
      ],
    };
    expect([...new Set(refs)].sort()).toEqual([...(expected[values] ?? ['no expectation'])].sort());
  });

  it('admits ingress-controller traffic to the gateway only, and each domain service exactly from its callers', () => {
    const v = valuesOf(values);
    const policies = of(values, 'NetworkPolicy');
    const jobs = ['migrate', 'billing-close', ...(v.echoSync.enabled ? ['echo-sync'] : [])];
    expect(policies.map(component).sort()).toEqual([...SERVICES, ...jobs].sort());
    for (const p of policies) expect(p.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    const peer = (name: string) => ({
      podSelector: {
        matchLabels: {
          'app.kubernetes.io/name': 'facility-compliance',
          'app.kubernetes.io/instance': 'fcd',
          'app.kubernetes.io/component': name,
        },
      },
    });
    const tcp = (port: string) => [{ protocol: 'TCP', port }];
    const monitoring = { from: [{ namespaceSelector: v.networkPolicy.metrics.namespaceSelector, podSelector: {} }], ports: tcp('metrics') };
    // usage: tier checks (gateway, dispatcher); facility: the webhook service checks the facility ids of
    // a subscription (a deliberate opening, docs/operations.md "Security"); webhook: the gateway only.
    const callers: Record<string, string[]> = {
      usage: ['gateway', 'dispatcher'],
      facility: ['gateway', 'webhook'],
      webhook: ['gateway'],
      dispatcher: [],
    };
    for (const [name, from] of Object.entries(callers)) {
      const api = from.length > 0 ? [{ from: from.map(peer), ports: tcp(name === 'usage' ? 'grpc' : 'http') }] : [];
      expect(byComponent(values, 'NetworkPolicy', name).spec.ingress, name).toEqual([
        ...api,
        monitoring,
        ...(serviceValues(values, name).networkPolicyExtraIngress ?? []),
      ]);
    }
    expect(byComponent(values, 'NetworkPolicy', 'gateway').spec.ingress).toEqual([
      {
        from: [{ namespaceSelector: v.networkPolicy.ingressController.namespaceSelector, podSelector: {} }, peer('test')],
        ports: tcp('http'),
      },
      monitoring,
    ]);
    expect(byComponent(values, 'NetworkPolicy', 'migrate').spec.ingress).toEqual([]);
    // The other half of each opening: the caller's egress to the callee's port, and nothing more.
    const egressTo = (caller: string) =>
      (
        byComponent(values, 'NetworkPolicy', caller).spec.egress as {
          to?: { podSelector?: { matchLabels: Record<string, string> } }[];
          ports: unknown;
        }[]
      )
        .filter((r) => r.to?.some((t) => t.podSelector))
        .map((r) => ({ callee: r.to?.[0]?.podSelector?.matchLabels['app.kubernetes.io/component'], ports: r.ports }));
    const port = (name: string) => serviceValues(values, name).containerPorts[name === 'usage' ? 'grpc' : 'http'];
    for (const caller of SERVICES) {
      const callees = Object.entries(callers).flatMap(([callee, from]) => (from.includes(caller) ? [callee] : []));
      expect(egressTo(caller), caller).toEqual(
        SERVICES.filter((s) => callees.includes(s)).map((callee) => ({ callee, ports: [{ protocol: 'TCP', port: port(callee) }] })),
      );
    }
    const dispatcherEgress = byComponent(values, 'NetworkPolicy', 'dispatcher').spec.egress;
    const dispatcherEnv = byComponent(values, 'Deployment', 'dispatcher').spec.template.spec.containers[0].env;
    expect(dispatcherEnv).toContainEqual({ name: 'USAGE_GRPC_ADDRESS', value: expect.stringMatching(/-usage:50051$/) });
    expect(dispatcherEgress).toContainEqual(expect.objectContaining({ ports: [{ protocol: 'TCP', port: 443 }] }));
  });

  it('spreads every Deployment over nodes (preferred anti-affinity) and zones (topology spread), selecting its own pods by instance, and requests ephemeral storage', () => {
    for (const name of SERVICES) {
      const d = byComponent(values, 'Deployment', name);
      const pod = d.spec.template.spec;
      const own = d.spec.selector.matchLabels;
      expect(own['app.kubernetes.io/instance']).toBe('fcd');
      const sv = serviceValues(values, name);
      if (Object.keys(sv.affinity ?? {}).length > 0) expect(pod.affinity, name).toEqual(sv.affinity);
      else
        expect(pod.affinity, name).toEqual({
          podAntiAffinity: {
            preferredDuringSchedulingIgnoredDuringExecution: [
              { weight: 100, podAffinityTerm: { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: own } } },
            ],
          },
        });
      if ((sv.topologySpreadConstraints ?? []).length > 0)
        expect(pod.topologySpreadConstraints, name).toEqual(sv.topologySpreadConstraints);
      else
        expect(pod.topologySpreadConstraints, name).toEqual([
          {
            maxSkew: 1,
            topologyKey: 'topology.kubernetes.io/zone',
            whenUnsatisfiable: 'ScheduleAnyway',
            labelSelector: { matchLabels: own },
            matchLabelKeys: ['pod-template-hash'],
          },
        ]);
      for (const c of pod.topologySpreadConstraints) expect(c.labelSelector.matchLabels['app.kubernetes.io/instance'], name).toBe('fcd');
      expect(pod.containers[0].resources.requests['ephemeral-storage'], name).toBe('128Mi');
    }
    for (const job of of(values, 'Job')) {
      for (const c of job.spec.template.spec.containers) expect(c.resources.requests['ephemeral-storage']).toBeDefined();
    }
  });

  it('opens the dispatcher egress to receivers on the allowed ports over IPv4 and IPv6, private and carrier-grade NAT ranges excepted, and gives the API the same ports', () => {
    const rule = (
      byComponent(values, 'NetworkPolicy', 'dispatcher').spec.egress as Array<{ to?: Array<{ ipBlock?: { cidr: string } }> }>
    ).find((r) => r.to?.some((t) => t.ipBlock?.cidr === '0.0.0.0/0'));
    expect(rule).toEqual({
      to: [
        {
          ipBlock: {
            cidr: '0.0.0.0/0',
            except: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '100.64.0.0/10'],
          },
        },
        { ipBlock: { cidr: '::/0', except: ['fc00::/7', 'fe80::/10', '::ffff:0:0/96'] } },
      ],
      ports: [{ protocol: 'TCP', port: 443 }],
    });
    for (const name of ['webhook', 'dispatcher']) {
      const env = byComponent(values, 'Deployment', name).spec.template.spec.containers[0].env;
      expect(env, name).toContainEqual({ name: 'WEBHOOK_ALLOWED_PORTS', value: '443' });
    }
  });

  it('points the gateway at every usage replica: a headless Service, a dns: target', () => {
    const headless = of(values, 'Service').find((s) => s.metadata.name === 'fcd-facility-compliance-usage-headless');
    expect(headless?.spec).toMatchObject({
      clusterIP: 'None',
      publishNotReadyAddresses: false,
      selector: byComponent(values, 'Deployment', 'usage').spec.selector.matchLabels,
      ports: [{ name: 'grpc', port: 50051, targetPort: 'grpc', protocol: 'TCP', appProtocol: 'grpc' }],
    });
    const env = byComponent(values, 'Deployment', 'gateway').spec.template.spec.containers[0].env;
    expect(env).toContainEqual({ name: 'USAGE_GRPC_ADDRESS', value: 'dns:///fcd-facility-compliance-usage-headless.fcd.svc:50051' });
  });

  it('scales every service with autoscaling on through an HPA on its Deployment, which then leaves `replicas` to the HPA', () => {
    const hpas = of(values, 'HorizontalPodAutoscaler');
    const autoscaled = SERVICES.filter((name) => serviceValues(values, name).autoscaling.enabled);
    expect(hpas.map(component)).toEqual(autoscaled);
    for (const name of SERVICES) {
      const sv = serviceValues(values, name);
      const deployment = byComponent(values, 'Deployment', name);
      if (!sv.autoscaling.enabled) {
        expect(deployment.spec.replicas, name).toBe(sv.replicaCount);
        continue;
      }
      expect(Object.keys(deployment.spec), name).not.toContain('replicas');
      const hpa = byComponent(values, 'HorizontalPodAutoscaler', name);
      expect(hpa.apiVersion).toBe('autoscaling/v2');
      const target = (resource: string, utilization: number | null) =>
        utilization == null
          ? []
          : [{ type: 'Resource', resource: { name: resource, target: { type: 'Utilization', averageUtilization: utilization } } }];
      expect(hpa.spec, name).toEqual({
        scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: deployment.metadata.name },
        minReplicas: sv.autoscaling.minReplicas,
        maxReplicas: sv.autoscaling.maxReplicas,
        metrics: [
          ...target('cpu', sv.autoscaling.targetCPUUtilizationPercentage),
          ...target('memory', sv.autoscaling.targetMemoryUtilizationPercentage),
        ],
        behavior: { scaleDown: { stabilizationWindowSeconds: 300 } },
      });
      expect(hpa.spec.metrics.length, name).toBeGreaterThan(0);
    }
    // The values files cover both branches: what they set, in literal numbers.
    const expected: Record<string, Record<string, [number, number] | { replicas: number }>> = {
      defaults: { gateway: [2, 10], usage: [2, 10], facility: [2, 10], webhook: [2, 10], dispatcher: [2, 10] },
      'all-features': { gateway: [3, 20], usage: [2, 10], facility: [2, 10], webhook: [2, 10], dispatcher: { replicas: 2 } },
      'external-secrets': { gateway: [2, 10], usage: [2, 10], facility: [2, 10], webhook: [2, 10], dispatcher: [2, 10] },
      'backend-tls': { gateway: [2, 10], usage: [2, 10], facility: [2, 10], webhook: [2, 10], dispatcher: [2, 10] },
    };
    const actual = Object.fromEntries(
      SERVICES.map((name) => {
        const hpa = hpas.find((h) => component(h) === name);
        const replicas = byComponent(values, 'Deployment', name).spec.replicas;
        return [name, hpa ? [hpa.spec.minReplicas, hpa.spec.maxReplicas] : { replicas }];
      }),
    );
    expect(actual).toEqual(expected[values]);
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
  it('runs the ECHO sync as a CronJob only when echoSync.enabled: one at a time, the facility image, its NetworkPolicy and alert', () => {
    // The billing close is a CronJob of every release (scripts/chart/billing-close.test.ts).
    expect(of('defaults', 'CronJob').map(component)).toEqual(['billing-close']);
    const [cron, ...more] = of('all-features', 'CronJob').filter((m) => component(m) !== 'billing-close');
    expect(more).toEqual([]);
    expect(cron?.metadata.name).toBe('fcd-facility-compliance-echo-sync');
    expect(cron?.spec.schedule).toBe('0 5 * * 1');
    expect(cron?.spec.concurrencyPolicy).toBe('Forbid');
    const pod = cron?.spec.jobTemplate.spec.template.spec;
    expect(pod.restartPolicy).toBe('Never');
    const [container] = pod.containers;
    expect(container.image).toBe(byComponent('all-features', 'Deployment', 'facility').spec.template.spec.containers[0].image);
    const source = valuesOf('all-features').echoSync.source as string;
    expect(source.split(',')).toHaveLength(5);
    expect(container.command).toEqual([
      'node',
      'services/facility/dist/cli.js',
      'sync-echo',
      '--from',
      source,
      '--rejected-rows-ok',
      '--retry-for',
      '10m',
    ]);
    expect(container.resources).toEqual(valuesOf('all-features').echoSync.resources);
    expect(container.env.map((e: { name: string }) => e.name)).toContain('DATABASE_URL');
    expect(pod.volumes).toContainEqual({ name: 'tmp', emptyDir: { sizeLimit: '8Gi' } });
    const policy = byComponent('all-features', 'NetworkPolicy', 'echo-sync');
    expect(policy.spec.ingress).toEqual([]);
    expect(policy.spec.egress).toContainEqual({ ports: [{ protocol: 'TCP', port: 443 }], to: [{ ipBlock: { cidr: '0.0.0.0/0' } }] });
    const [rule] = of('all-features', 'PrometheusRule');
    const stale = rule?.spec.groups
      .flatMap((g: { rules: { alert: string; expr: string }[] }) => g.rules)
      .find((r: { alert: string }) => r.alert === 'FcdEchoSyncStale');
    expect(stale.expr.trim()).toBe('time() - max(fcd_facility_echo_sync_last_success_timestamp_seconds{namespace="fcd"}) > 691200');
    const defaults = [join(CHART, 'ci/defaults-values.yaml')];
    expect(() => helmTemplate(defaults, ['--set', 'echoSync.enabled=true', '--set', 'echoSync.source='])).toThrow(/echoSync.source/);
    expect(() => helmTemplate(defaults, ['--set', 'echoSync.retryFor=forever'])).toThrow(/retryFor/);
    expect(() => helmTemplate(defaults, ['--set', 'echoSync.scheduel=x'])).toThrow(/scheduel/);
  });

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

  it('renders the ServiceMonitor, the PrometheusRule with the ten alerts and the dashboard only when enabled', () => {
    const [rule] = of('all-features', 'PrometheusRule');
    const alerts = rule?.spec.groups.flatMap((g: { rules: { alert: string }[] }) => g.rules.map((r) => r.alert));
    expect(alerts).toEqual([
      'FcdHighErrorRate',
      'FcdHighLatencyP99',
      'FcdOutboxBacklog',
      'FcdWebhookDeliveryFailureRatio',
      'FcdDispatcherConsumerLag',
      'FcdWebhookDeactivations',
      'FcdPostgresErrors',
      'FcdWebhookSecretUnreadable',
      'FcdBillingPeriodNotClosed',
      'FcdEchoSyncStale',
    ]);
    expect(of('all-features', 'ServiceMonitor')[0]?.spec.endpoints).toEqual([
      expect.objectContaining({ port: 'metrics', path: '/metrics' }),
    ]);
    const dashboard = of('all-features', 'ConfigMap')[0]?.data['facility-compliance.json'];
    expect(JSON.parse(dashboard).panels.length).toBeGreaterThan(5);
    for (const kind of ['ServiceMonitor', 'PrometheusRule', 'ConfigMap', 'Secret']) expect(of('defaults', kind)).toEqual([]);
  });

  it('links every alert to its runbook: a `### <AlertName>` section of docs/operations.md, and a runbook_url to its anchor', () => {
    const docs = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
    const start = docs.indexOf('\n## Runbooks\n');
    expect(start).toBeGreaterThan(0);
    const end = docs.indexOf('\n## ', start + 1);
    const runbooks = docs.slice(start, end < 0 ? undefined : end);
    const sections = new Map<string, string>();
    for (const part of runbooks.split(/^### /m).slice(1)) {
      const newline = part.indexOf('\n');
      sections.set(part.slice(0, newline).trim(), part.slice(newline + 1));
    }
    const base = valuesOf('all-features').metrics.prometheusRule.runbookBaseUrl;
    expect(base).toBe('https://docs.example.com/facility-compliance/operations.md');
    expect(valuesOf('defaults').metrics.prometheusRule.runbookBaseUrl).toBe('');
    const alertRules = (values: string, args: string[] = []) =>
      render(
        CI_VALUES.filter((f) => valuesName(f) === values),
        args,
      )
        .filter((m) => m.kind === 'PrometheusRule')
        .flatMap((m) => m.spec.groups.flatMap((g: { rules: unknown[] }) => g.rules)) as {
        alert: string;
        annotations: Record<string, string>;
      }[];
    const rules = alertRules('all-features');
    expect(rules).toHaveLength(10);
    for (const { alert, annotations } of rules) {
      // The heading is the alert name alone, so its GitHub anchor is the name in lower case.
      expect([...sections.keys()], 'docs/operations.md runbook headings').toContain(alert);
      expect(sections.get(alert) ?? '', `the steps under "### ${alert}"`).toMatch(/^\s*\S[\s\S]*\n1\. \S/);
      expect(annotations.runbook_url).toBe(`${base}#${alert.toLowerCase()}`);
      expect(Object.keys(annotations).sort()).toEqual(['description', 'runbook_url', 'summary']);
    }
    const unlinked = alertRules('all-features', ['--set', 'metrics.prometheusRule.runbookBaseUrl=']);
    expect(unlinked.map((r) => Object.keys(r.annotations).sort())).toEqual(rules.map(() => ['description', 'summary']));
    const defaults = [join(CHART, 'ci/defaults-values.yaml')];
    expect(() => helmTemplate(defaults, ['--set', 'metrics.prometheusRule.runbookBaseUrl=https://docs.example.com/ops#x'])).toThrow(
      /runbookBaseUrl/,
    );
  });

  it('queries only metrics the services export (alerts, dashboard, runbooks)', async () => {
    // Series each metric type exports under its name.
    const series: Record<string, string[]> = {
      counter: [''],
      gauge: [''],
      histogram: ['_bucket', '_sum', '_count'],
      summary: ['', '_sum', '_count'],
    };
    const exported = new Map<string, string>(); // series -> where declared
    const families = new Set<string>(); // metric names as declared (prose may name a histogram so)
    const sourceFiles = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? sourceFiles(join(dir, e.name)) : /\.ts$/.test(e.name) && !/\.test\.ts$/.test(e.name) ? [join(dir, e.name)] : [],
      );
    const roots = ['services', 'libs'].flatMap((top) => readdirSync(join(ROOT, top)).map((d) => join(ROOT, top, d, 'src')));
    for (const file of roots.flatMap((r) => {
      try {
        return sourceFiles(r);
      } catch {
        return [];
      }
    })) {
      const text = readFileSync(file, 'utf8');
      for (const [, type, name] of text.matchAll(/new (Counter|Gauge|Histogram|Summary)\(\{\s*name:\s*'([a-zA-Z_:][a-zA-Z0-9_:]*)'/g)) {
        families.add(name as string);
        for (const suffix of series[(type as string).toLowerCase()] ?? []) exported.set(`${name}${suffix}`, file.slice(ROOT.length + 1));
      }
    }
    // prom-client's default metrics (collectDefaultMetrics in libs/service-kit/src/metrics.ts).
    const defaults = new Registry();
    collectDefaultMetrics({ register: defaults });
    for (const m of await defaults.getMetricsAsJSON()) {
      for (const suffix of series[m.type] ?? []) exported.set(`${m.name}${suffix}`, 'prom-client default metrics');
    }
    expect(exported.get('fcd_request_duration_seconds_bucket')).toBe('libs/service-kit/src/metrics.ts');
    expect(exported.get('fcd_dispatcher_consumer_pending')).toBe('services/dispatcher/src/metrics.ts');
    expect(exported.has('fcd_requests_total_bucket')).toBe(false);

    const names = (text: string) => [...new Set(text.match(/\b(?:fcd|process|nodejs)_[a-zA-Z0-9_:]+/g) ?? [])];
    const [rule] = of('all-features', 'PrometheusRule');
    const ruleExprs = rule?.spec.groups.flatMap((g: { rules: { expr: string }[] }) => g.rules.map((r) => r.expr)).join('\n');
    const panels: string[] = [];
    const collect = (node: unknown): void => {
      if (Array.isArray(node)) for (const n of node) collect(n);
      else if (isMap(node)) {
        for (const [k, v] of Object.entries(node)) {
          if (k === 'expr' && typeof v === 'string') panels.push(v);
          else collect(v);
        }
      }
    };
    collect(JSON.parse(of('all-features', 'ConfigMap')[0]?.data['facility-compliance.json']));
    const docs = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
    const used: Record<string, string[]> = {
      PrometheusRule: names(ruleExprs),
      dashboard: names(panels.join('\n')),
      'docs/operations.md': names(docs),
    };
    const known = (where: string, n: string) => exported.has(n) || (where === 'docs/operations.md' && families.has(n));
    const missing = Object.entries(used).flatMap(([where, list]) => list.filter((n) => !known(where, n)).map((n) => `${where}: ${n}`));
    expect(missing).toEqual([]);
    expect(used.PrometheusRule?.sort()).toEqual([
      'fcd_billing_last_closed_period_end_timestamp_seconds',
      'fcd_dispatcher_attempts_total',
      'fcd_dispatcher_consumer_pending',
      'fcd_dispatcher_deactivations_total',
      'fcd_dispatcher_secret_unreadable_total',
      'fcd_facility_echo_sync_last_success_timestamp_seconds',
      'fcd_facility_outbox_oldest_age_seconds',
      'fcd_postgres_errors_total',
      'fcd_request_duration_seconds_bucket',
      'fcd_requests_total',
    ]);
    expect(used.dashboard?.sort()).toEqual([
      'fcd_dispatcher_attempts_total',
      'fcd_dispatcher_consumer_pending',
      'fcd_dispatcher_deactivations_total',
      'fcd_facility_events_published_total',
      'fcd_facility_outbox_oldest_age_seconds',
      'fcd_rate_limit_decisions_total',
      'fcd_request_duration_seconds_bucket',
      'fcd_requests_total',
    ]);
  });

  it('keeps the chart-managed Secret (URLs by value, generated secrets) as a hook ordered before the migration Job', () => {
    const [secret] = of('all-features', 'Secret');
    expect(secret?.metadata.annotations).toMatchObject({ 'helm.sh/hook': 'pre-install,pre-upgrade', 'helm.sh/hook-weight': '-10' });
    expect(Object.keys(secret?.data ?? {}).sort()).toEqual(
      [
        'admin-token',
        'database-url',
        'ingest-token',
        'internal-auth-secret',
        'nats-url',
        'redis-url',
        'usage-grpc-secret',
        'webhook-secret-key',
      ].sort(),
    );
    const key = Buffer.from(secret?.data['webhook-secret-key'], 'base64').toString();
    expect(Buffer.from(key, 'base64')).toHaveLength(32);
  });
});

describe('backend credentials and TLS (ci/backend-tls-values.yaml)', () => {
  type Env = { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } };
  const BACKEND =
    /^(DATABASE_(PASSWORD|SSLMODE|SSL_CA_FILE)|REDIS_(USERNAME|PASSWORD|TLS_CA_FILE)|NATS_(USER|PASSWORD|CREDS_FILE|TLS_CA_FILE))$/;
  const wiring = (spec: {
    containers: Array<{ env: Env[]; volumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean }> }>;
    volumes: Array<{ name: string; secret?: unknown }>;
  }) => {
    const c = spec.containers[0] as (typeof spec.containers)[number];
    return {
      env: Object.fromEntries(c.env.filter((e) => BACKEND.test(e.name)).map((e) => [e.name, e.value ?? e.valueFrom?.secretKeyRef])),
      mounts: c.volumeMounts.filter((m) => m.name !== 'tmp'),
      volumes: spec.volumes.filter((v) => v.name !== 'tmp'),
    };
  };
  const pg = {
    DATABASE_PASSWORD: { name: 'pg-auth', key: 'pg-password' },
    DATABASE_SSLMODE: 'verify-full',
    DATABASE_SSL_CA_FILE: '/etc/fcd/backends/postgres/ca.crt',
  };
  const file = (volume: string, dir: string, secretName: string, key: string) => ({
    mount: { name: volume, mountPath: `/etc/fcd/backends/${dir}`, readOnly: true },
    volume: { name: volume, secret: { secretName, defaultMode: 0o440, items: [{ key, path: key }] } },
  });
  const pgCa = file('postgres-ca', 'postgres', 'pg-ca', 'ca.crt');
  const redisCa = file('redis-ca', 'redis', 'redis-ca', 'ca.pem');
  const natsCa = file('nats-ca', 'nats', 'nats-ca', 'ca.crt');
  const natsCreds = file('nats-creds', 'nats-creds', 'nats-dispatcher-creds', 'dispatcher.creds');
  const expected: Record<string, { env: Record<string, unknown>; files: Array<ReturnType<typeof file>> }> = {
    gateway: {
      env: {
        REDIS_USERNAME: 'usage',
        REDIS_PASSWORD: { name: 'redis-auth', key: 'redis-password' },
        REDIS_TLS_CA_FILE: '/etc/fcd/backends/redis/ca.pem',
      },
      files: [redisCa],
    },
    usage: {
      env: {
        ...pg,
        REDIS_USERNAME: 'usage',
        REDIS_PASSWORD: { name: 'redis-auth', key: 'redis-password' },
        REDIS_TLS_CA_FILE: '/etc/fcd/backends/redis/ca.pem',
      },
      files: [pgCa, redisCa],
    },
    facility: {
      env: {
        ...pg,
        NATS_USER: 'facility',
        NATS_PASSWORD: { name: 'nats-auth', key: 'facility-password' },
        NATS_TLS_CA_FILE: '/etc/fcd/backends/nats/ca.crt',
      },
      files: [pgCa, natsCa],
    },
    webhook: { env: pg, files: [pgCa] },
    dispatcher: {
      env: { ...pg, NATS_CREDS_FILE: '/etc/fcd/backends/nats-creds/dispatcher.creds', NATS_TLS_CA_FILE: '/etc/fcd/backends/nats/ca.crt' },
      files: [pgCa, natsCa, natsCreds],
    },
  };

  it.each(SERVICES)('%s gets exactly its backend env and read-only files from the named Secrets', (name) => {
    const want = expected[name] as (typeof expected)[string];
    expect(wiring(byComponent('backend-tls', 'Deployment', name).spec.template.spec)).toEqual({
      env: want.env,
      mounts: want.files.map((f) => f.mount),
      volumes: want.files.map((f) => f.volume),
    });
    // Nothing of it without the values: the defaults render no backend credentials or files.
    expect(wiring(byComponent('defaults', 'Deployment', name).spec.template.spec)).toEqual({ env: {}, mounts: [], volumes: [] });
  });

  it('gives the migration job the Postgres password, TLS mode and CA file', () => {
    const [job] = of('backend-tls', 'Job');
    const spec = job?.spec.template.spec;
    for (const c of [...spec.initContainers, ...spec.containers]) {
      expect(wiring({ ...spec, containers: [c] })).toEqual({ env: pg, mounts: [pgCa.mount], volumes: [pgCa.volume] });
    }
  });

  it('refuses an unknown TLS mode', () => {
    expect(() => helmTemplate([join(CHART, 'ci/defaults-values.yaml')], ['--set', 'externalDatabase.sslMode=prefer'])).toThrow(/sslMode/);
  });

  it('sets DATABASE_POOL_MODE for PgBouncer transaction pooling on every Postgres client, only when asked (ADR 0013)', () => {
    const defaults = [join(CHART, 'ci/defaults-values.yaml')];
    const poolMode = (m: Manifest[]) =>
      m
        .filter((x) => ['Deployment', 'Job', 'CronJob'].includes(x.kind))
        .flatMap((x) => {
          const spec = x.kind === 'CronJob' ? x.spec.jobTemplate.spec.template.spec : x.spec.template.spec;
          return [...(spec.initContainers ?? []), ...spec.containers].map(
            (c: { name: string; env?: Array<{ name: string; value?: string }> }) => [
              `${x.kind}/${component(x)}/${c.name}`,
              c.env?.find((e) => e.name === 'DATABASE_POOL_MODE')?.value,
            ],
          );
        });
    const on = poolMode(render(defaults, ['--set', 'externalDatabase.poolMode=transaction', '--set', 'echoSync.enabled=true']));
    const withDatabase = on.filter(([name]) => !String(name).startsWith('Deployment/gateway/'));
    expect(withDatabase.length).toBeGreaterThanOrEqual(6);
    for (const [name, value] of withDatabase) expect(value, String(name)).toBe('transaction');
    expect(on.filter(([name]) => String(name).startsWith('Deployment/gateway/')).every(([, value]) => value === undefined)).toBe(true);
    expect(poolMode(render(defaults)).every(([, value]) => value === undefined)).toBe(true);
    expect(() => helmTemplate(defaults, ['--set', 'externalDatabase.poolMode=statement'])).toThrow(/poolMode/);
  });

  it("gives the facility relay's LISTEN a direct connection from a Secret, only when asked", () => {
    const defaults = [join(CHART, 'ci/defaults-values.yaml')];
    const listenEnv = (m: Manifest[]) =>
      m
        .filter((x) => x.kind === 'Deployment')
        .map((x) => [
          component(x),
          x.spec.template.spec.containers[0].env.find((e: { name: string }) => e.name === 'OUTBOX_LISTEN_DATABASE_URL'),
        ]);
    const on = listenEnv(
      render(defaults, ['--set', 'externalDatabase.poolMode=transaction', '--set', 'externalDatabase.listen.existingSecret=pg-direct']),
    );
    expect(on.filter(([, env]) => env !== undefined)).toEqual([
      ['facility', { name: 'OUTBOX_LISTEN_DATABASE_URL', valueFrom: { secretKeyRef: { name: 'pg-direct', key: 'listen-database-url' } } }],
    ]);
    expect(listenEnv(render(defaults)).every(([, env]) => env === undefined)).toBe(true);
  });
});

describe('scale-out values', () => {
  const defaults = [join(CHART, 'ci/defaults-values.yaml')];
  const envOf = (manifests: Manifest[], name: string) =>
    manifests.find((m) => m.kind === 'Deployment' && component(m) === name)?.spec.template.spec.containers[0].env as Array<{
      name: string;
      value?: string;
    }>;

  it('puts usage on an external Redis Cluster: REDIS_CLUSTER_NODES and REDIS_WAIT_REPLICAS instead of REDIS_URL, egress to each node port', () => {
    const m = render(defaults, [
      '--set',
      'externalRedis.clusterNodes={redis-0.redis:6379,redis-1.redis:7000}',
      '--set',
      'externalRedis.waitReplicas=2',
    ]);
    const env = envOf(m, 'usage');
    expect(env).toContainEqual({ name: 'REDIS_CLUSTER_NODES', value: 'redis-0.redis:6379,redis-1.redis:7000' });
    expect(env).toContainEqual({ name: 'REDIS_WAIT_REPLICAS', value: '2' });
    expect(env.map((e) => e.name)).not.toContain('REDIS_URL');
    const usagePolicy = m.find((x) => x.kind === 'NetworkPolicy' && component(x) === 'usage') as Manifest;
    const ports = (usagePolicy.spec.egress as Array<{ ports: Array<{ port: unknown }> }>).flatMap((r) => r.ports.map((p) => p.port));
    expect(ports).toContain(6379);
    expect(ports).toContain(7000);
  });

  it('takes the receiver ports from dispatcher.egress.allowedPorts, for the egress policy and both services', () => {
    const m = render(defaults, ['--set', 'dispatcher.egress.allowedPorts={443,8443}']);
    const policy = m.find((x) => x.kind === 'NetworkPolicy' && component(x) === 'dispatcher') as Manifest;
    const rule = (policy.spec.egress as Array<{ to?: Array<{ ipBlock?: { cidr: string } }>; ports: unknown }>).find((r) =>
      r.to?.some((t) => t.ipBlock?.cidr === '0.0.0.0/0'),
    );
    expect(rule?.ports).toEqual([
      { protocol: 'TCP', port: 443 },
      { protocol: 'TCP', port: 8443 },
    ]);
    for (const name of ['webhook', 'dispatcher'])
      expect(envOf(m, name)).toContainEqual({ name: 'WEBHOOK_ALLOWED_PORTS', value: '443,8443' });
  });

  it('gives the facility service and the dispatcher the stream replicas of externalNats.streamReplicas (default 1, 1–5)', () => {
    for (const name of ['facility', 'dispatcher']) {
      expect(envOf(render(defaults), name)).toContainEqual({ name: 'NATS_STREAM_REPLICAS', value: '1' });
      expect(envOf(render(defaults, ['--set', 'externalNats.streamReplicas=3']), name)).toContainEqual({
        name: 'NATS_STREAM_REPLICAS',
        value: '3',
      });
    }
    expect(() => helmTemplate(defaults, ['--set', 'externalNats.streamReplicas=0'])).toThrow(/streamReplicas/);
    expect(() => helmTemplate(defaults, ['--set', 'externalNats.streamReplicas=7'])).toThrow(/streamReplicas/);
  });

  it('renders no default spread with spread.enabled false, and refuses bad spread, node and port values', () => {
    const m = render(defaults, ['--set', 'serviceDefaults.spread.enabled=false']);
    for (const d of m.filter((x) => x.kind === 'Deployment')) {
      expect(d.spec.template.spec.affinity).toBeUndefined();
      expect(d.spec.template.spec.topologySpreadConstraints).toBeUndefined();
    }
    expect(() => helmTemplate(defaults, ['--set', 'serviceDefaults.spread.whenUnsatisfiable=Sometimes'])).toThrow(/whenUnsatisfiable/);
    expect(() => helmTemplate(defaults, ['--set', 'externalRedis.clusterNodes={redis-0}'])).toThrow(/clusterNodes/);
    expect(() => helmTemplate(defaults, ['--set', 'dispatcher.egress.allowedPorts={0}'])).toThrow(/allowedPorts/);
  });
});

describe('values.schema.json and required values', () => {
  const defaults = [join(CHART, 'ci/defaults-values.yaml')];
  it('rejects a wrongly typed value', () => {
    expect(() => helmTemplate(defaults, ['--set', 'gateway.replicaCount=two'])).toThrow(/replicaCount.*want integer/);
  });
  it('takes node flags per service and refuses anything but a --flag (nothing else reaches the command line)', () => {
    const usage = render(defaults, ['--set', 'usage.nodeOptions={--max-old-space-size=256}']).find(
      (m) => m.kind === 'Deployment' && component(m) === 'usage',
    );
    expect(usage?.spec.template.spec.containers[0].command).toEqual([
      'node',
      '--max-old-space-size=256',
      '--import',
      './services/usage/dist/telemetry.js',
      'services/usage/dist/main.js',
    ]);
    expect(() => helmTemplate(defaults, ['--set', 'usage.nodeOptions={-e process.exit()}'])).toThrow(/nodeOptions/);
  });
  it('rejects an unknown key of a service', () => {
    expect(() => helmTemplate(defaults, ['--set', 'usage.replicas=3'])).toThrow(/additional properties 'replicas'/);
  });
  it('refuses to render without a source for a required secret unless generation is allowed', () => {
    expect(() => helmTemplate(defaults, ['--set', 'secrets.internalAuth.existingSecret='])).toThrow(/secrets\.internalAuth/);
    expect(() => helmTemplate(defaults, ['--set', 'secrets.usageGrpc.existingSecret='])).toThrow(/secrets\.usageGrpc/);
    expect(() => helmTemplate(defaults, ['--set', 'externalDatabase.existingSecret='])).toThrow(/externalDatabase/);
    expect(() => helmTemplate(defaults, ['--set', 'secrets.internalAuth.existingSecret=', '--set', 'secrets.generate=true'])).not.toThrow();
  });

  it('refuses collector egress without a destination (it would open the OTLP ports to any address)', () => {
    expect(() => helmTemplate(defaults, ['--set', 'networkPolicy.telemetry.enabled=true'])).toThrow(/networkPolicy\.telemetry\.to/);
  });
});

describe('manifest validation (scripts/chart/validate.ts)', () => {
  const deployment = () => structuredClone(byComponent('defaults', 'Deployment', 'gateway'));
  const where = 'Deployment/fcd-facility-compliance-gateway';

  it('accepts the rendered manifests, maps with any keys included', async () => {
    const d = deployment();
    d.metadata.annotations = { 'example.com/any-key': 'x' };
    d.spec.template.spec.containers[0].resources.limits['example.com/gpu'] = '1';
    expect(await validateManifest(d)).toEqual([]);
  });

  it('rejects a misspelled securityContext field (the schemas alone accept unknown fields)', async () => {
    const d = deployment();
    const sc = d.spec.template.spec.containers[0].securityContext;
    sc.readOnlyRootFilesytem = sc.readOnlyRootFilesystem;
    delete sc.readOnlyRootFilesystem;
    d.spec.template.spec.securityContext.runAsNonRooot = true;
    expect(await validateManifest(d)).toEqual([
      `${where}: unknown field spec.template.spec.securityContext.runAsNonRooot`,
      `${where}: unknown field spec.template.spec.containers[0].securityContext.readOnlyRootFilesytem`,
    ]);
  });

  it('rejects unknown fields at the top, in metadata and in a custom resource', async () => {
    const d = deployment();
    d.spce = {};
    Object.assign(d.metadata, { label: {} });
    expect((await validateManifest(d)).sort()).toEqual([`${where}: unknown field metadata.label`, `${where}: unknown field spce`]);
    const rule = structuredClone(of('all-features', 'PrometheusRule')[0] as Manifest);
    rule.spec.groups[0].rules[0].fore = '5m';
    expect(await validateManifest(rule)).toEqual([`PrometheusRule/fcd-facility-compliance: unknown field spec.groups[0].rules[0].fore`]);
  });

  it('still reports schema errors (wrong types) as before', async () => {
    const d = deployment();
    d.spec.template.spec.containers[0].securityContext.readOnlyRootFilesystem = 'yes';
    const problems = await validateManifest(d);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^Deployment\/fcd-facility-compliance-gateway: .*readOnlyRootFilesystem must be boolean/);
  });
});
