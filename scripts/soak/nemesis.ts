import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { FaultProxy } from '@fcd/testing';
import type { HistoryWriter } from './history';
import type { PlannedFault } from './schedule';
import { DATABASE, type Topology } from './topology';

const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Plays the schedule against the topology: each fault starts at its offset, lasts its duration,
 * and is healed (a killed replica restarted as a kubelet would, a stopped backend started, a
 * paused one continued, a link healed). Each fault is written to the history when it is healed,
 * with both times.
 */
export class Nemesis {
  private readonly active = new Set<Promise<void>>();
  private stopped = false;
  injected = 0;

  constructor(
    private readonly topology: Topology,
    private readonly history: HistoryWriter,
  ) {}

  /** Runs the schedule from `startedAt` until it ends or `stop` is called; returns when every fault is healed. */
  async play(faults: PlannedFault[], startedAt: number): Promise<void> {
    for (const f of faults) {
      const wait = startedAt + f.at - Date.now();
      if (wait > 0) await this.sleepUnlessStopped(wait);
      if (this.stopped) break;
      const p = this.inject(f).catch((err: unknown) => {
        process.stderr.write(`soak: fault ${f.id} (${f.kind} ${f.target}) could not be played: ${String(err)}\n`);
      });
      this.active.add(p);
      void p.finally(() => this.active.delete(p));
    }
    await Promise.all([...this.active]);
  }

  stop(): void {
    this.stopped = true;
  }

  private async sleepUnlessStopped(ms: number): Promise<void> {
    const until = Date.now() + ms;
    while (!this.stopped && Date.now() < until) await sleep(Math.min(250, until - Date.now()));
  }

  private async inject(f: PlannedFault): Promise<void> {
    const start = Date.now();
    this.injected++;
    const heal = await this.begin(f);
    await sleep(f.durationMs);
    await heal();
    this.history.write({ k: 'fault', id: f.id, kind: f.kind, target: f.target, start, end: Date.now() });
  }

  /** Starts the fault; returns its heal. */
  private async begin(f: PlannedFault): Promise<() => Promise<void>> {
    const t = this.topology;
    switch (f.kind) {
      case 'kill': {
        const r = this.replica(f.target);
        await r.kill();
        return () => r.restart();
      }
      case 'pause': {
        const r = this.replica(f.target);
        r.signal('SIGSTOP');
        return async () => r.signal('SIGCONT');
      }
      case 'postgres-stop':
        await t.pg.stopFast();
        return () => t.pg.start();
      case 'postgres-terminate':
        await t.pg.terminateBackends(DATABASE);
        return async () => undefined;
      case 'redis-kill':
        return this.redisKill();
      case 'redis-pause':
        return this.redisPause(f.durationMs);
      case 'nats-kill': {
        const node = f.target.slice('nats-'.length);
        await t.nats.kill(node);
        return () => t.nats.restart(node);
      }
      case 'link-latency': {
        const proxy = this.link(f.target);
        proxy.setLatency(f.latencyMs ?? 100);
        return async () => proxy.setLatency(0);
      }
      case 'link-blackhole': {
        const proxy = this.link(f.target);
        proxy.blackhole();
        return async () => proxy.heal();
      }
    }
  }

  private replica(name: string) {
    const r = this.topology.replicas.find((x) => x.name === name);
    if (!r) throw new Error(`no replica ${name}`);
    return r;
  }

  private link(target: string): FaultProxy {
    const t = this.topology;
    const proxy = { 'link:postgres': t.pgProxy, 'link:redis': t.redisProxy, 'link:usage': t.usageProxy }[target];
    if (!proxy) throw new Error(`no link ${target}`);
    return proxy;
  }

  /** A single Redis: SIGKILL and a fresh start (no persistence: its counters are gone). A cluster: one primary killed, restarted as a replica. */
  private async redisKill(): Promise<() => Promise<void>> {
    const t = this.topology;
    if (t.redis) {
      const r = t.redis;
      await r.stop();
      return () => r.start();
    }
    const cluster = t.redisCluster;
    if (!cluster) throw new Error('no Redis');
    const port = await cluster.primaryOf('soak:any');
    await cluster.kill(port);
    return async () => {
      await cluster.restart(port);
      await cluster.waitHealthy(60_000);
    };
  }

  /** `CLIENT PAUSE ALL` for the duration on the server (every primary of a cluster). */
  private async redisPause(ms: number): Promise<() => Promise<void>> {
    const t = this.topology;
    const ports = t.redis ? [t.redis.port] : (t.redisCluster?.ports ?? []);
    await Promise.allSettled(
      ports.map((p) => run('redis-cli', ['-p', String(p), 'CLIENT', 'PAUSE', String(ms), 'ALL'], { timeout: 5_000 })),
    );
    // The pause ends by itself after ms.
    return async () => undefined;
  }
}
