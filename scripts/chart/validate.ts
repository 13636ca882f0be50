/**
 * Validates a stream of rendered manifests (a file argument or stdin) against the Kubernetes
 * schemas, fields the schemas do not declare included (see manifests.ts). Prints one line per
 * problem; exits 1 when there is any.
 *   helm template ... | npx tsx scripts/chart/validate.ts [label]
 */
import { readFileSync } from 'node:fs';
import { parseManifests, validateManifests } from './manifests';

const [file, label = file ?? 'stdin'] = process.argv.slice(2);
const text = readFileSync(file && file !== '-' ? file : 0, 'utf8');
const manifests = parseManifests(text);
const problems = await validateManifests(manifests);
for (const p of problems) process.stderr.write(`${label}: ${p}\n`);
const kinds = new Map<string, number>();
for (const m of manifests) kinds.set(m.kind, (kinds.get(m.kind) ?? 0) + 1);
const summary = [...kinds].map(([k, n]) => `${n} ${k}`).join(', ');
process.stdout.write(
  `${label}: ${manifests.length} manifests (${summary}): ${problems.length === 0 ? 'valid' : `${problems.length} problem(s)`}\n`,
);
process.exit(problems.length === 0 ? 0 : 1);
