/**
 * What every service's command-line tool shares: the argument parser (node's `util.parseArgs`),
 * the exit codes, the injected I/O and the process entry.
 *
 * A CLI is `run(argv, io) → Promise<exit code>`: it writes only through `io`, reads the environment
 * only from `io.env` and never calls `process.exit`, so tests call it in-process. Its `src/cli.ts`
 * ends with `runCliIfMain(import.meta.url, run)`, which runs it when the file is the process's
 * entry (the built `dist/cli.js`) and does nothing when a test imports it.
 *
 * Exit codes (CONTRIBUTING.md "Command-line tools"): 0 done; 1 failed; 2 partly done (facility:
 * some rows rejected) or, for the webhook CLI, a usage error. Each CLI's argument errors keep the
 * code its tests pin: usage-cli and the facility CLI 1, webhook-cli 2.
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { errMessage } from './errors';

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
/** Partly done (rows rejected), or a usage error where a CLI says so. */
export const EXIT_PARTIAL = 2;
export const EXIT_USAGE = 2;

/** Where a CLI writes and what it reads: the process's own in production, captured ones in tests. */
export interface CliIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  env: Record<string, string | undefined>;
  /** Stops a long-running command; without it such a command stops on SIGINT/SIGTERM. */
  signal?: AbortSignal;
}

export type CliRun = (argv: string[], io: CliIo) => Promise<number>;

/** A bad command line: the CLI prints its message (and usage) and exits with its usage-error code. */
export class CliUsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CliUsageError';
  }
}

type Options = NonNullable<ParseArgsConfig['options']>;

/**
 * `util.parseArgs` with positionals allowed and strict options; a parse error (unknown option,
 * missing value) becomes a one-line CliUsageError instead of a multi-line TypeError.
 */
export function parseCliArgs<const O extends Options>(argv: string[], options: O) {
  try {
    return parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new CliUsageError(errMessage(err).replace(/\s*\n\s*/g, ' '));
  }
}

/** The process's own I/O. */
export function processIo(): CliIo {
  return { stdout: process.stdout, stderr: process.stderr, env: process.env };
}

/** `io.signal`, or one aborted on the process's SIGINT/SIGTERM (for commands that run until stopped). */
export function stopSignal(io: CliIo): AbortSignal {
  if (io.signal) return io.signal;
  const abort = new AbortController();
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => abort.abort());
  return abort.signal;
}

function isProcessEntry(moduleUrl: string): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(moduleUrl));
  } catch {
    return false;
  }
}

/**
 * Runs the CLI when `moduleUrl` (the caller's `import.meta.url`) is the process's entry, then exits
 * with its code; an error that escaped `run` is one line on stderr and exit 1.
 */
export function runCliIfMain(moduleUrl: string, name: string, run: CliRun): void {
  if (!isProcessEntry(moduleUrl)) return;
  run(process.argv.slice(2), processIo()).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`${name}: ${errMessage(err)}\n`);
      process.exit(EXIT_FAILURE);
    },
  );
}
