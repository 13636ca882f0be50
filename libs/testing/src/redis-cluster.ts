import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './process';

const run = promisify(execFile);

interface Node {
  port: number;
  dir: string;
  proc: ChildProcess;
  nodeTimeoutMs: number;
}

/** One cluster node on `port`, its nodes.conf (the cluster's view, kept across restarts) in `dir`. */
function spawnNode(port: number, dir: string, nodeTimeoutMs: number): ChildProcess {
  return spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      'nodes.conf',
      '--cluster-node-timeout',
      String(nodeTimeoutMs),
      '--save',
      '',
      '--appendonly',
      'no',
    ],
    { stdio: 'ignore' },
  );
}

/**
 * A private, throw-away Redis Cluster for tests: 3 primaries and 3 replicas (`redis-server
 * --cluster-enabled yes` on free loopback ports, joined with `redis-cli --cluster create
 * --cluster-replicas 1`), each node in its own temporary directory, no persistence. A short
 * `cluster-node-timeout` makes a replica take over a killed primary within a few seconds.
 */
export class PrivateRedisCluster {
  private constructor(
    private readonly nodes: Node[],
    private readonly root: string,
  ) {}

  static async start(options: { nodeTimeoutMs?: number } = {}): Promise<PrivateRedisCluster> {
    const root = await mkdtemp(join(tmpdir(), 'fcd-redis-cluster-'));
    const nodes: Node[] = [];
    const cluster = new PrivateRedisCluster(nodes, root);
    try {
      for (let i = 0; i < 6; i++) {
        const port = await freePort();
        const dir = join(root, String(port));
        await run('mkdir', ['-p', dir]);
        nodes.push({ port, dir, proc: spawnNode(port, dir, options.nodeTimeoutMs ?? 1000), nodeTimeoutMs: options.nodeTimeoutMs ?? 1000 });
      }
      for (const n of nodes) await cluster.waitFor(() => cluster.cli(n.port, 'PING').then((r) => r === 'PONG'), `node ${n.port} to start`);
      await run('redis-cli', [
        '--cluster',
        'create',
        ...nodes.map((n) => `127.0.0.1:${n.port}`),
        '--cluster-replicas',
        '1',
        '--cluster-yes',
      ]);
      await cluster.waitHealthy();
      return cluster;
    } catch (err) {
      await cluster.stop();
      throw err;
    }
  }

  /** `host:port` of every node (REDIS_CLUSTER_NODES). */
  get addresses(): string[] {
    return this.nodes.map((n) => `127.0.0.1:${n.port}`);
  }

  private live(): Node[] {
    return this.nodes.filter((n) => n.proc.exitCode === null && n.proc.signalCode === null);
  }

  /** One redis-cli command against a node; its output, trimmed. */
  async cli(port: number, ...args: string[]): Promise<string> {
    const { stdout } = await run('redis-cli', ['-p', String(port), ...args], { timeout: 5000 });
    return stdout.trim();
  }

  /** Port of the primary serving the slot of `key` now. */
  async primaryOf(key: string): Promise<number> {
    const live = this.live()[0] as Node;
    const slot = Number(await this.cli(live.port, 'CLUSTER', 'KEYSLOT', key));
    for (const line of (await this.cli(live.port, 'CLUSTER', 'NODES')).split('\n')) {
      const [, address, flags, , , , , state, ...ranges] = line.split(' ');
      if (!flags?.includes('master') || flags.includes('fail') || state !== 'connected') continue;
      for (const r of ranges) {
        const [from, to] = r.split('-').map(Number);
        if (from !== undefined && slot >= from && slot <= (to ?? from)) return Number(address?.split(':')[1]?.split('@')[0]);
      }
    }
    throw new Error(`no primary serves slot ${slot}`);
  }

  /** SIGKILL one node (its replica, if it was a primary, takes over after the node timeout). */
  async kill(port: number): Promise<void> {
    const node = this.nodes.find((n) => n.port === port);
    if (!node || node.proc.exitCode !== null || node.proc.signalCode !== null) return;
    const exited = new Promise((r) => node.proc.once('exit', r));
    node.proc.kill('SIGKILL');
    await exited;
  }

  /**
   * Starts a killed node again on its port and nodes.conf: it rejoins the cluster (as a replica of
   * the primary that took over its slots, with no data: nothing is persisted) and syncs from it.
   */
  async restart(port: number): Promise<void> {
    const node = this.nodes.find((n) => n.port === port);
    if (!node || (node.proc.exitCode === null && node.proc.signalCode === null)) return;
    node.proc = spawnNode(node.port, node.dir, node.nodeTimeoutMs);
    await this.waitFor(() => this.cli(port, 'PING').then((r) => r === 'PONG'), `node ${port} to restart`);
  }

  /** Every node's port. */
  get ports(): number[] {
    return this.nodes.map((n) => n.port);
  }

  /** Until every live node says `cluster_state:ok` and every live replica's link to its primary is up. */
  async waitHealthy(timeoutMs = 30_000): Promise<void> {
    await this.waitFor(
      async () => {
        for (const n of this.live()) {
          if (!/cluster_state:ok/.test(await this.cli(n.port, 'CLUSTER', 'INFO'))) return false;
          const repl = await this.cli(n.port, 'INFO', 'replication');
          if (/role:slave/.test(repl) && !/master_link_status:up/.test(repl)) return false;
        }
        return true;
      },
      'the cluster to be healthy',
      timeoutMs,
    );
  }

  private async waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      if (await check().catch(() => false)) return;
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => this.kill(n.port)));
    await rm(this.root, { recursive: true, force: true });
  }
}
