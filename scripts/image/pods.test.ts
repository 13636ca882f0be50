import { describe, expect, it } from 'vitest';
import { render } from '../chart/manifests';
import { VALUES } from './play';
import { playPlan, serviceHostnames } from './pods';

/**
 * The rules that make the chart's rendered manifests playable by podman 4.x (pods.ts), on the
 * chart rendered with ci/podman-values.yaml. play.int.test.ts runs the result.
 */
const renders = [
  render([VALUES]),
  render([VALUES], ['--set', 'gateway.containerPorts.http=28180', '--set', 'gateway.containerPorts.metrics=28563']),
];
const plan = playPlan({ renders, extraCa: { hostFile: '/var/tmp/ca/ca.crt', containers: ['dispatcher'] } });
const byName = (n: string) => [...plan.pods, ...plan.jobs].find((m) => m.metadata.name === `fcd-facility-compliance-${n}`);

describe('the chart made playable by podman', () => {
  it('gives one pod per Deployment replica, replica i from render i (its own ports)', () => {
    expect(plan.pods.map((m) => m.metadata.name)).toEqual(
      ['gateway-0', 'gateway-1', 'usage-0', 'facility-0', 'webhook-0', 'dispatcher-0'].map((n) => `fcd-facility-compliance-${n}`),
    );
    const port = (n: string) => byName(n)?.spec.containers[0].env.find((e: { name: string }) => e.name === 'PORT').value;
    expect([port('gateway-0'), port('gateway-1')]).toEqual(['28080', '28180']);
    expect(() => playPlan({ renders: renders.slice(0, 1) })).toThrow(
      'Deployment/fcd-facility-compliance-gateway: replica 1 needs a render of its own',
    );
  });

  it('turns the migration Job and the ECHO CronJob into pods that run once', () => {
    expect(plan.jobs.map((m) => [m.metadata.name, m.spec.restartPolicy])).toEqual([
      ['fcd-facility-compliance-echo-sync-once', 'Never'],
      ['fcd-facility-compliance-migrate', 'Never'],
    ]);
    expect(byName('migrate')?.spec.initContainers.map((c: { name: string }) => c.name)).toEqual(['migrate-usage', 'migrate-facility']);
  });

  it('puts every pod on the host network with no ports list, probe ports as numbers and Service names on loopback', () => {
    for (const m of [...plan.pods, ...plan.jobs]) {
      expect(m.spec.hostNetwork).toBe(true);
      expect(m.spec.serviceAccountName).toBeUndefined();
      expect(m.spec.hostAliases).toEqual([{ ip: '127.0.0.1', hostnames: serviceHostnames(renders[0] ?? []) }]);
      for (const c of m.spec.containers) expect(c.ports).toBeUndefined();
    }
    const usage = byName('usage-0')?.spec.containers[0];
    expect([usage.startupProbe.httpGet, usage.livenessProbe.httpGet, usage.readinessProbe.httpGet]).toEqual([
      { path: '/healthz', port: 28090 },
      { path: '/healthz', port: 28090 },
      { path: '/readyz', port: 28090 },
    ]);
    expect(serviceHostnames(renders[0] ?? [])).toContain('fcd-facility-compliance-usage-headless.fcd.svc');
  });

  it('keeps the security context and gives each pod its own /tmp volume (podman shares one of a name)', () => {
    const gw = byName('gateway-1');
    expect(gw?.spec.containers[0].securityContext).toMatchObject({
      runAsUser: 1000,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
    });
    expect(gw?.spec.volumes).toEqual([{ name: 'fcd-facility-compliance-gateway-1-tmp', emptyDir: { sizeLimit: '64Mi' } }]);
    expect(gw?.spec.containers[0].volumeMounts).toEqual([{ name: 'fcd-facility-compliance-gateway-1-tmp', mountPath: '/tmp' }]);
    // podman 4.x refuses annotation values longer than a label's 63 characters (checksum/config).
    expect(Object.keys(gw?.metadata.annotations ?? {})).not.toContain('checksum/config');
  });

  it('mounts an extra CA only into the containers named, with NODE_EXTRA_CA_CERTS', () => {
    const dispatcher = byName('dispatcher-0')?.spec;
    expect(dispatcher.containers[0].env).toContainEqual({ name: 'NODE_EXTRA_CA_CERTS', value: '/etc/fcd/extra-ca/ca.crt' });
    expect(dispatcher.volumes).toContainEqual({ name: 'extra-ca', hostPath: { path: '/var/tmp/ca', type: 'Directory' } });
    expect(byName('gateway-0')?.spec.containers[0].env.map((e: { name: string }) => e.name)).not.toContain('NODE_EXTRA_CA_CERTS');
  });

  it('turns the chart-managed Secret into a podman secret and lists what podman cannot run', () => {
    expect(plan.secrets.map((s) => [s.name, Object.keys(s.data).sort()])).toEqual([
      ['fcd-facility-compliance', ['database-url', 'nats-url', 'redis-url']],
    ]);
    expect(Buffer.from(plan.secrets[0]?.data['database-url'] ?? '', 'base64').toString()).toBe(
      'postgres://postgres@127.0.0.1:5432/fcd_kube',
    );
    expect(plan.skipped.every((s) => s.startsWith('Service/'))).toBe(true);
    expect(plan.skipped).toHaveLength(6);
  });
});
