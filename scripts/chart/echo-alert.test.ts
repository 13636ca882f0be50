import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { CHART, ROOT, render } from './manifests';

/**
 * FcdEchoSyncStale as the chart renders it (ci/all-features-values.yaml: echoSync on, 192 h),
 * under `promtool test rules` (installed by scripts/debian-tool.sh when missing): it fires once the
 * last successful sync is older than the threshold for 30 minutes, and not while syncs succeed.
 */
let dir: string;

beforeAll(() => {
  execFileSync('bash', [join(ROOT, 'scripts/debian-tool.sh'), 'promtool', 'prometheus'], { stdio: 'ignore' });
  dir = mkdtempSync(join(tmpdir(), 'echo-alert-'));
  const [rule] = render([join(CHART, 'ci/all-features-values.yaml')]).filter((m) => m.kind === 'PrometheusRule');
  expect(rule, 'the chart renders a PrometheusRule').toBeDefined();
  const groups = ((rule as { spec: { groups: unknown } }).spec.groups as { name: string }[]).filter((g) => g.name.endsWith('.echo-sync'));
  expect(groups).toHaveLength(1);
  writeFileSync(join(dir, 'rules.yaml'), stringify({ groups }));
}, 120_000);

const series = 'fcd_facility_echo_sync_last_success_timestamp_seconds{namespace="fcd", pod="facility-0"}';
const alert = (value: string) => ({
  exp_labels: { severity: 'warning' },
  exp_annotations: {
    summary: 'ECHO sync: no successful sync in the last 192 hours',
    description: `The last successful ECHO sync finished ${value} ago: the API serves stale EPA data and no real-data events fire.`,
    runbook_url: 'https://docs.example.com/facility-compliance/operations.md#fcdechosyncstale',
  },
});

it('FcdEchoSyncStale fires when the last successful sync is older than echoSync.staleAfterHours, and not while syncs succeed', () => {
  const tests = {
    rule_files: ['rules.yaml'],
    evaluation_interval: '1m',
    tests: [
      {
        // One success at t = 1 h, then none (scraped every minute): stale from t = 193 h (192 h
        // later), firing 30 minutes after.
        interval: '1m',
        input_series: [{ series, values: '3600x12000' }],
        alert_rule_test: [
          { eval_time: '100h', alertname: 'FcdEchoSyncStale', exp_alerts: [] },
          { eval_time: '193h20m', alertname: 'FcdEchoSyncStale', exp_alerts: [] },
          { eval_time: '194h', alertname: 'FcdEchoSyncStale', exp_alerts: [alert('8d 1h 0m 0s')] },
        ],
      },
      {
        // Syncs keep succeeding (a replica that restarted reports the same time): never stale.
        interval: '1m',
        input_series: [
          { series, values: '0+60x12000' },
          { series: series.replace('facility-0', 'facility-1'), values: '_x6000 360000+60x6000' },
        ],
        alert_rule_test: [{ eval_time: '199h', alertname: 'FcdEchoSyncStale', exp_alerts: [] }],
      },
    ],
  };
  writeFileSync(join(dir, 'tests.yaml'), stringify(tests));
  const out = execFileSync('promtool', ['test', 'rules', 'tests.yaml'], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  expect(out).toContain('SUCCESS');
});
