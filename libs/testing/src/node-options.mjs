// The node flags each service runs with, read from their one home: the Helm chart's values
// (`<service>.nodeOptions`, else `serviceDefaults.nodeOptions`). The chart puts them on the
// container's command line; tests (startService), `npm run up` and the benchmarks start local
// processes with the same flags, so what is measured here is what runs in the cluster.
// Plain JavaScript, so that scripts run by bare node (scripts/up.sh, scripts/bench) use it too:
//   node libs/testing/src/node-options.mjs gateway   → prints the flags, space-separated
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

const VALUES = resolve(dirname(fileURLToPath(import.meta.url)), '../../../deploy/helm/facility-compliance/values.yaml');

/** @param {string} service @returns {string[]} */
export function nodeOptionsOf(service) {
  const values = parse(readFileSync(VALUES, 'utf8'));
  return values[service]?.nodeOptions ?? values.serviceDefaults?.nodeOptions ?? [];
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.stdout.write(`${nodeOptionsOf(process.argv[2] ?? '').join(' ')}\n`);
}
