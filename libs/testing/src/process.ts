import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nodeOptionsOf } from './node-options.mjs';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/**
 * Ports handed out by `freePort`: below Linux's ephemeral range (32768+), so
 * no outgoing connection can take one between the check and the child's
 * bind, and one disjoint block per vitest worker, so two test files running
 * at once never get the same port. Below RabbitMQ's 25672.
 */
const PORT_BASE = 20_000;
const PORT_BLOCK = 300;
const PORT_BLOCKS = 16;
// Started at a per-process offset, so consecutive test files of one worker rarely reuse a port.
let portCursor = process.pid % PORT_BLOCK;

function canListen(port: number): Promise<boolean> {
  return new Promise((res) => {
    const srv = createServer();
    srv.once('error', () => res(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => res(true)));
  });
}

/** A TCP port nothing listens on now and that no other test worker will be given (see PORT_BASE). */
export async function freePort(): Promise<number> {
  const worker = Number(process.env.VITEST_POOL_ID ?? process.env.VITEST_WORKER_ID ?? 0);
  const block = PORT_BASE + (worker % PORT_BLOCKS) * PORT_BLOCK;
  for (let tries = 0; tries < PORT_BLOCK; tries++) {
    const port = block + (portCursor++ % PORT_BLOCK);
    if (await canListen(port)) return port;
  }
  throw new Error(`no free port in ${block}-${block + PORT_BLOCK - 1}`);
}

/** Waits until something accepts connections on 127.0.0.1:`port` (a server just spawned). */
export async function waitForPort(port: number, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await portOpen(port))) {
    if (Date.now() > deadline) throw new Error(`${what} did not start on ${port}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection({ port, host: '127.0.0.1' });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

export interface LogLine {
  level?: string;
  msg?: string;
  [key: string]: unknown;
}

export interface ServiceProcess {
  name: string;
  proc: ChildProcess;
  /** Every line the process wrote (stdout and stderr), raw. */
  output: string[];
  /** stdout lines parsed as JSON logs. */
  logs(): LogLine[];
  waitForLog(predicate: (l: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  exited: Promise<number | null>;
}

interface StartOptions {
  entry?: string;
  args?: string[];
  readyTimeoutMs?: number;
  waitReady?: boolean;
  /** Runs the process under this file-descriptor limit (`ulimit -n` in bash, then exec node). */
  fdLimit?: number;
  /**
   * false: node without `--enable-source-maps`, as the chart runs it, for a test that measures the
   * process's memory (the maps are read at start-up: 5-12 MiB of the gateway's resident set).
   * Otherwise on, so a failing test's logged stacks name the TypeScript sources.
   */
  sourceMaps?: boolean;
}

/** node with the service's flags and telemetry preload, on dist/<entry>.js (under `ulimit -n` when asked). */
function spawnService(name: string, env: Record<string, string>, options: StartOptions): ChildProcess {
  const script = resolve(repoRoot, 'services', name, 'dist', `${options.entry ?? 'main'}.js`);
  const telemetry = resolve(repoRoot, 'services', name, 'dist', 'telemetry.js');
  const preload = (options.entry ?? 'main') === 'main' && existsSync(telemetry) ? ['--import', telemetry] : [];
  const sourceMaps = options.sourceMaps === false ? [] : ['--enable-source-maps'];
  const nodeArgs = [...nodeOptionsOf(name), ...sourceMaps, ...preload, script, ...(options.args ?? [])];
  const [command, args] =
    options.fdLimit === undefined
      ? [process.execPath, nodeArgs]
      : ['bash', ['-c', `ulimit -n ${Math.floor(options.fdLimit)} && exec "$0" "$@"`, process.execPath, ...nodeArgs]];
  return spawn(command, args, {
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Every line of the process's stdout and stderr, the JSON ones parsed, and a wait for a line. */
function collectLogs(name: string, proc: ChildProcess, exited: Promise<number | null>) {
  const output: string[] = [];
  const waiters: Array<{ pred: (l: LogLine) => boolean; resolve: (l: LogLine) => void }> = [];
  const parsed: LogLine[] = [];
  const onData = (buf: Buffer, acc: { rest: string }) => {
    acc.rest += buf.toString('utf8');
    const lines = acc.rest.split('\n');
    acc.rest = lines.pop() ?? '';
    for (const line of lines) {
      if (!line) continue;
      output.push(line);
      try {
        const l = JSON.parse(line) as LogLine;
        parsed.push(l);
        for (const w of [...waiters]) {
          if (w.pred(l)) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve(l);
          }
        }
      } catch {
        // not a JSON log line
      }
    }
  };
  const outAcc = { rest: '' };
  const errAcc = { rest: '' };
  proc.stdout?.on('data', (b: Buffer) => onData(b, outAcc));
  proc.stderr?.on('data', (b: Buffer) => onData(b, errAcc));

  const waitForLog = (predicate: (l: LogLine) => boolean, timeoutMs = 15_000) =>
    new Promise<LogLine>((res, rej) => {
      const found = parsed.find(predicate);
      if (found) return res(found);
      const timer = setTimeout(() => {
        rej(new Error(`${name}: timed out waiting for log line; output:\n${output.slice(-20).join('\n')}`));
      }, timeoutMs);
      waiters.push({
        pred: predicate,
        resolve: (l) => {
          clearTimeout(timer);
          res(l);
        },
      });
      void exited.then((code) => {
        clearTimeout(timer);
        rej(new Error(`${name} exited with ${code} before the expected log line; output:\n${output.slice(-20).join('\n')}`));
      });
    });
  return { output, parsed, waitForLog };
}

/**
 * Starts a built service (services/<name>/dist/<entry>.js) as a child process
 * with the given environment and waits until it logs `ready`. Like production,
 * the service's dist/telemetry.js (when built) is loaded first with --import, and node runs with
 * the service's flags from the Helm chart (`nodeOptions`, node-options.mjs).
 */
export async function startService(name: string, env: Record<string, string>, options: StartOptions = {}): Promise<ServiceProcess> {
  const proc = spawnService(name, env, options);
  const exited = new Promise<number | null>((res) => proc.once('exit', (code) => res(code)));
  const { output, parsed, waitForLog } = collectLogs(name, proc, exited);
  const sp: ServiceProcess = {
    name,
    proc,
    output,
    logs: () => parsed,
    waitForLog,
    exited,
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      proc.kill(signal);
      return exited;
    },
  };
  if (options.waitReady !== false) {
    // 45 s: a loaded 2-core machine can take long to start a bundle; a process that never got ready
    // is killed, so a failed start leaves nothing running.
    try {
      await waitForLog((l) => l.msg === 'ready', options.readyTimeoutMs ?? 45_000);
    } catch (err) {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      throw err;
    }
  }
  return sp;
}

/**
 * Environment for `startService` that makes the given host names resolve to the
 * given addresses inside the child process, through node:dns `lookup` (see
 * hosts-preload.mjs). Merge it into the service's env. With `file`, that JSON file is read
 * again at every lookup (its entries win), so the test can change the answers while the process runs.
 */
export function hostsPreloadEnv(hosts: Record<string, string | string[]>, options: { file?: string } = {}): Record<string, string> {
  const preload = resolve(dirname(fileURLToPath(import.meta.url)), 'hosts-preload.mjs');
  return {
    NODE_OPTIONS: `--import ${preload}`,
    FCD_TEST_HOSTS: JSON.stringify(hosts),
    ...(options.file ? { FCD_TEST_HOSTS_FILE: options.file } : {}),
  };
}
