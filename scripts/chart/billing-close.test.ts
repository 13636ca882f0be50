import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { CHART, helmTemplate, type Manifest, ROOT, render } from './manifests';

/**
 * The monthly billing close (docs/metering.md, "Billing close"; docs/operations.md,
 * "FcdBillingPeriodNotClosed"): the CronJob as the chart renders it, and the alert under
 * `promtool test rules` (installed by scripts/debian-tool.sh when missing).
 */
const defaults = join(CHART, 'ci/defaults-values.yaml');
const allFeatures = join(CHART, 'ci/all-features-values.yaml');
const component = (m: Manifest) => m.metadata.labels?.['app.kubernetes.io/component'];
let dir: string;

beforeAll(() => {
  execFileSync('bash', [join(ROOT, 'scripts/debian-tool.sh'), 'promtool', 'prometheus'], { stdio: 'ignore' });
  dir = mkdtempSync(join(tmpdir(), 'billing-alert-'));
  const [rule] = render([allFeatures]).filter((m) => m.kind === 'PrometheusRule');
  expect(rule, 'the chart renders a PrometheusRule').toBeDefined();
  const groups = ((rule as Manifest).spec.groups as { name: string }[]).filter((g) => g.name.endsWith('.billing'));
  expect(groups).toHaveLength(1);
  writeFileSync(join(dir, 'rules.yaml'), stringify({ groups }));
}, 120_000);

describe('billing close CronJob', () => {
  it('closes last month at 00:30 UTC on the 1st from the usage image, with its Postgres and Redis, one run at a time', () => {
    const manifests = render([defaults]);
    const cron = manifests.find((m) => m.kind === 'CronJob' && component(m) === 'billing-close') as Manifest;
    expect(cron.metadata.name).toBe('fcd-facility-compliance-billing-close');
    expect(cron.spec).toMatchObject({ schedule: '30 0 1 * *', timeZone: 'Etc/UTC', concurrencyPolicy: 'Forbid', suspend: false });
    const pod = cron.spec.jobTemplate.spec.template.spec;
    expect(pod.restartPolicy).toBe('Never');
    const [container] = pod.containers;
    const usage = manifests.find((m) => m.kind === 'Deployment' && component(m) === 'usage') as Manifest;
    expect(container.image).toBe(usage.spec.template.spec.containers[0].image);
    expect(container.command).toEqual(['node', 'services/usage/dist/cli.js', 'billing', 'close', '--period', 'previous', '--json']);
    const env = new Map<string, unknown>(
      container.env.map((e: { name: string; value?: string; valueFrom?: unknown }) => [e.name, e.value ?? e.valueFrom]),
    );
    expect([...env.keys()]).toEqual(expect.arrayContaining(['DATABASE_URL', 'REDIS_URL', 'REDIS_KEY_PREFIX']));
    expect(env.get('REDIS_KEY_PREFIX')).toBe('fcd:');
    expect(container.securityContext).toMatchObject({ runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
  });

  it('reaches only DNS, Postgres and Redis, and is refused everything in', () => {
    const policy = render([allFeatures]).find((m) => m.kind === 'NetworkPolicy' && component(m) === 'billing-close') as Manifest;
    expect(policy.spec.ingress).toEqual([]);
    const ports = policy.spec.egress.flatMap((r: { ports: { port: number | string }[] }) => r.ports.map((p) => p.port));
    expect(ports.filter((p: number | string) => p !== 53)).toEqual([5432, 6379]);
  });

  it('is left out with billingClose.enabled false, and refuses an unknown setting', () => {
    const off = render([defaults], ['--set', 'billingClose.enabled=false']);
    expect(off.filter((m) => component(m) === 'billing-close')).toEqual([]);
    expect(() => helmTemplate([defaults], ['--set', 'billingClose.schedul=x'])).toThrow(/schedul/);
    expect(() => helmTemplate([defaults], ['--set', 'billingClose.alertFromDayOfMonth=1'])).toThrow(/alertFromDayOfMonth/);
  });
});

const series = (value: string) => ({
  series: 'fcd_billing_last_closed_period_end_timestamp_seconds{namespace="fcd", pod="usage-0"}',
  values: value,
});
const DAY = 86_400;
const firing = () => ({
  exp_labels: { severity: 'warning' },
  exp_annotations: {
    summary: 'billing: last month is not closed',
    description:
      'No billing close of last month has run to its end: its statements are missing or partial, so it cannot be invoiced. The CronJob billing-close runs at 00:30 UTC on the 1st.',
    runbook_url: 'https://docs.example.com/facility-compliance/operations.md#fcdbillingperiodnotclosed',
  },
});

it('FcdBillingPeriodNotClosed fires from the 2nd while last month is not closed, and not once it is', () => {
  // promtool's time 0 is 1970-01-01T00:00Z: January 1970 ends at 31 days, February 1970 at 59.
  const tests = {
    rule_files: ['rules.yaml'],
    evaluation_interval: '10m',
    tests: [
      {
        // December 1969 closed (its end, 0, is 1 January); January never closed.
        interval: '10m',
        input_series: [series('0x4700')],
        alert_rule_test: [
          { eval_time: '31d12h', alertname: 'FcdBillingPeriodNotClosed', exp_alerts: [] }, // 1 February: not yet
          { eval_time: '32d10m', alertname: 'FcdBillingPeriodNotClosed', exp_alerts: [] }, // the 2nd, within `for`
          { eval_time: '32d30m', alertname: 'FcdBillingPeriodNotClosed', exp_alerts: [firing()] },
          { eval_time: '32d12h', alertname: 'FcdBillingPeriodNotClosed', exp_alerts: [firing()] },
        ],
      },
      {
        // January closed at 00:40 on 1 February (the gauge becomes its end, 31 days): never fires.
        interval: '10m',
        input_series: [series(`0x4468 ${31 * DAY}x300`)],
        alert_rule_test: [
          { eval_time: '32d1h', alertname: 'FcdBillingPeriodNotClosed', exp_alerts: [] },
          { eval_time: '33d', alertname: 'FcdBillingPeriodNotClosed', exp_alerts: [] },
        ],
      },
      {
        // No close ever recorded (no series): fires from the 2nd.
        interval: '10m',
        input_series: [],
        alert_rule_test: [
          { eval_time: '20h', alertname: 'FcdBillingPeriodNotClosed', exp_alerts: [] },
          { eval_time: '1d1h', alertname: 'FcdBillingPeriodNotClosed', exp_alerts: [firing()] },
        ],
      },
    ],
  };
  writeFileSync(join(dir, 'tests.yaml'), stringify(tests));
  const out = execFileSync('promtool', ['test', 'rules', 'tests.yaml'], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  expect(out).toContain('SUCCESS');
}, 120_000);
