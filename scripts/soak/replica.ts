import { createWriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { type ServiceProcess, startService } from '@fcd/testing';
import type { HistoryWriter } from './history';

/**
 * One replica of a service, as a kubelet runs it: a process on fixed ports (the Service's
 * endpoint), started again when it dies (by the nemesis or by itself), a SIGSTOP that a SIGCONT
 * ends. Its peak RSS is sampled from /proc while it runs.
 */
export class Replica {
  private current: ServiceProcess | undefined;
  private stopping = false;
  private restarting: Promise<void> | undefined;
  peakRssBytes = 0;
  /** Exits the nemesis did not cause. */
  crashes = 0;
  private expectedExit = false;

  constructor(
    readonly name: string,
    readonly service: string,
    private readonly env: Record<string, string>,
    private readonly history: HistoryWriter,
    /** Called when the replica is ready (put it back in its Service) or gone (take it out). */
    private readonly onReady: (ready: boolean) => void = () => undefined,
    /** Where its output goes (appended across restarts), to chase a counter-example. */
    private readonly logFile?: string,
  ) {}

  get process(): ServiceProcess | undefined {
    return this.current;
  }

  get alive(): boolean {
    const p = this.current?.proc;
    return p !== undefined && p.exitCode === null && p.signalCode === null;
  }

  async start(): Promise<void> {
    const sp = await startService(this.service, this.env, { readyTimeoutMs: 90_000 });
    this.current = sp;
    this.history.write({ k: 'proc', t: Date.now(), name: this.name, event: 'start', pid: sp.proc.pid });
    if (this.logFile) {
      // Every line the process writes from now on (what it wrote before being ready is in sp.output).
      const out = createWriteStream(this.logFile, { flags: 'a' });
      out.write(`${sp.output.join('\n')}\n`);
      sp.proc.stdout?.pipe(out, { end: false });
      sp.proc.stderr?.pipe(out, { end: false });
      sp.proc.once('exit', () => out.end());
    }
    sp.proc.once('exit', (code, signal) => {
      this.history.write({ k: 'proc', t: Date.now(), name: this.name, event: 'exit', code, signal });
      this.onReady(false);
      if (this.stopping) return;
      if (!this.expectedExit) {
        // A crash: the kubelet restarts the container after a short back-off.
        this.crashes++;
        setTimeout(() => void this.restart(), 1_000);
      }
    });
    this.onReady(true);
  }

  /** SIGKILL now; `restart` brings it back (the nemesis decides when). */
  async kill(): Promise<void> {
    if (!this.alive) return;
    this.expectedExit = true;
    this.history.write({ k: 'proc', t: Date.now(), name: this.name, event: 'signal', signal: 'SIGKILL' });
    this.onReady(false);
    await this.current?.stop('SIGKILL');
  }

  signal(signal: 'SIGSTOP' | 'SIGCONT'): void {
    if (!this.alive) return;
    this.history.write({ k: 'proc', t: Date.now(), name: this.name, event: 'signal', signal });
    this.current?.proc.kill(signal);
  }

  /** Starts the process again if it is not running (one restart at a time). */
  async restart(): Promise<void> {
    if (this.alive || this.stopping) return;
    this.restarting ??= (async () => {
      for (let tries = 0; !this.alive && !this.stopping; tries++) {
        this.expectedExit = false;
        try {
          await this.start();
        } catch (err) {
          // Not ready in time (its backend down, say): the kubelet tries again.
          this.history.write({ k: 'proc', t: Date.now(), name: this.name, event: 'exit', code: -1, signal: String(err).slice(0, 200) });
          await new Promise((r) => setTimeout(r, Math.min(10_000, 1_000 * 2 ** tries)));
        }
      }
    })().finally(() => {
      this.restarting = undefined;
    });
    await this.restarting;
  }

  async sampleRss(): Promise<void> {
    const pid = this.alive ? this.current?.proc.pid : undefined;
    if (pid === undefined) return;
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    this.peakRssBytes = Math.max(this.peakRssBytes, kb * 1024);
  }

  /** SIGTERM (the graceful stop: usage flushes its counts), SIGKILL after 30 s. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.restarting?.catch(() => undefined);
    const sp = this.current;
    if (!sp || !this.alive) return;
    sp.proc.kill('SIGCONT');
    const killer = setTimeout(() => sp.proc.kill('SIGKILL'), 30_000);
    await sp.stop('SIGTERM');
    clearTimeout(killer);
  }
}
