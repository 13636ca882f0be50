// The commit-message rules of CONTRIBUTING.md ("Commits"), checked by the repository's commit-msg
// hook (.githooks/commit-msg, installed by `npm install`): the subject is "Scope: what changed",
// the scope one of SCOPES, the whole subject at most 72 characters, and a blank line before the body.
// Merges and reverts that git writes itself pass as they are.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

export const MAX_SUBJECT = 72;

/** The scopes a subject may start with: the parts of the repository, as the history names them. */
export const SCOPES = [
  'ADRs',
  'API',
  'Architecture',
  'Bench',
  'Benchmarks',
  'Build',
  'Chart',
  'CI',
  'Client',
  'Contributing',
  'Deps',
  'Dispatcher',
  'Docs',
  'ECHO',
  'ECHO sync',
  'Events',
  'Facility',
  'Gateway',
  'gRPC',
  'HTTP',
  'Image',
  'Lint',
  'Metering',
  'Observability',
  'OpenAPI',
  'Operations',
  'Outbox relay',
  'Proto',
  'Quick start',
  'README',
  'Repo',
  'Scripts',
  'Service kit',
  'Telemetry',
  'Testing',
  'Tests',
  'Usage',
  'Webhook',
  'Webhook verify',
  'Webhooks',
];

/** The message as git hands it to the hook: comment lines and the scissors part left out. */
function meaningfulLines(message) {
  const scissors = message.indexOf('\n# ------------------------ >8 ------------------------');
  const text = scissors < 0 ? message : message.slice(0, scissors);
  return text.split('\n').filter((l) => !l.startsWith('#'));
}

/** The problems of a commit message, one sentence each; empty when it keeps the rules. */
export function commitMessageProblems(message) {
  const lines = meaningfulLines(message);
  while (lines.length > 0 && lines[0].trim() === '') lines.shift();
  const subject = (lines[0] ?? '').trimEnd();
  if (subject === '') return ['the message is empty'];
  if (/^(Merge|Revert) /.test(subject) || /^(fixup|squash|amend)! /.test(subject)) return [];
  const problems = [];
  if ([...subject].length > MAX_SUBJECT) {
    problems.push(`the subject is ${[...subject].length} characters; at most ${MAX_SUBJECT}`);
  }
  const match = /^([^:]+): (\S.*)$/.exec(subject);
  if (match === null) {
    problems.push('the subject is not "Scope: what changed"');
  } else if (!SCOPES.includes(match[1])) {
    problems.push(`"${match[1]}" is not a scope; use one of: ${SCOPES.join(', ')}`);
  }
  if (/\b[Ii]ssues? #?\d+|(^|[\s(])#\d+\b/.test(subject)) {
    problems.push('the subject names a tracker number; name the doc or ADR instead');
  }
  if (lines.length > 1 && lines[1].trim() !== '') problems.push('the second line must be blank (subject, blank line, body)');
  return problems;
}

/** The hook: `node scripts/repo/commit-msg.mjs <message file>`; exit 1 with the problems on stderr. */
function main(file) {
  const problems = commitMessageProblems(readFileSync(file, 'utf8'));
  if (problems.length === 0) return 0;
  process.stderr.write(`commit-msg: ${problems.join('\ncommit-msg: ')}\n(CONTRIBUTING.md, "Commits")\n`);
  return 1;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) process.exitCode = main(process.argv[2]);
