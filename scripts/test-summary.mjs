// Prints the plain closing line of the test run: "N passed, N failed[, N skipped]".
import { existsSync, readFileSync } from 'node:fs';

const [staticPassed, staticFailed, vitestRc, ...files] = process.argv.slice(2);
let passed = Number(staticPassed);
let failed = Number(staticFailed);
let skipped = 0;
for (const file of files) {
  if (!existsSync(file)) {
    failed += 1;
    continue;
  }
  const r = JSON.parse(readFileSync(file, 'utf8'));
  passed += r.numPassedTests;
  failed += r.numFailedTests;
  skipped += r.numPendingTests + r.numTodoTests;
  // A test file that failed to load has no failed test but must fail the run.
  const brokenFiles = r.testResults.filter((t) => t.status === 'failed' && t.assertionResults.every((a) => a.status !== 'failed')).length;
  failed += brokenFiles;
}
if (Number(vitestRc) !== 0 && failed === 0) failed = 1;
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(failed > 0 ? 1 : 0);
