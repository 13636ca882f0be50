import { type ChildProcess, spawn } from 'node:child_process';
import { freePort, waitForPort } from './process';

/**
 * A private, throw-away redis-server for tests that stop and restart Redis
 * (never the shared one). No persistence, like the project's Redis.
 */
export class PrivateRedis {
  private proc: ChildProcess | undefined;

  private constructor(readonly port: number) {}

  static async start(): Promise<PrivateRedis> {
    const r = new PrivateRedis(await freePort());
    await r.start();
    return r;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    this.proc = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: 'ignore',
    });
    await waitForPort(this.port, 'redis-server');
  }

  /** Freezes the server (SIGSTOP): connections stay open, commands wait unanswered until `resume`. */
  pause(): void {
    this.proc?.kill('SIGSTOP');
  }

  resume(): void {
    this.proc?.kill('SIGCONT');
  }

  async stop(): Promise<void> {
    this.resume();
    const p = this.proc;
    if (!p || p.exitCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGKILL');
    await exited;
    this.proc = undefined;
  }
}
