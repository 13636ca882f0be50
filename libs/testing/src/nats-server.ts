import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitForPort } from './process';

/**
 * A private JetStream server (`nats-server -js`, never the machine's shared one), so tests can
 * stop and restart NATS. Its store directory survives restarts; `destroy()` removes it.
 */
export class PrivateNats {
  private proc: ChildProcess | undefined;
  readonly dir = mkdtempSync(join(tmpdir(), 'fcd-nats-'));

  constructor(readonly port: number) {}

  /** On a free port, not started yet. */
  static async create(): Promise<PrivateNats> {
    return new PrivateNats(await freePort());
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** Starts the server (a running one is left as it is) and waits until it accepts connections. */
  async start(): Promise<void> {
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) return;
    this.proc = spawn('nats-server', ['-js', '-a', '127.0.0.1', '-p', String(this.port), '-sd', this.dir], { stdio: 'ignore' });
    await waitForPort(this.port, 'private nats-server');
  }

  async stop(): Promise<void> {
    const p = this.proc;
    this.proc = undefined;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGTERM');
    await exited;
  }

  /** Stops the server and removes its store. */
  async destroy(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
