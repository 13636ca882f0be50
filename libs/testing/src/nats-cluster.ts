import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './process';

interface Node {
  name: string;
  port: number;
  clusterPort: number;
  monitorPort: number;
  dir: string;
  proc: ChildProcess | undefined;
}

/** What a node's monitoring endpoint (`/jsz?streams=true`) says of one stream. */
export interface NodeStreamState {
  /** This node's copy: messages and last sequence. */
  messages: number;
  lastSeq: number;
  /** Server name of the stream's leader as this node sees it ('' during an election). */
  leader: string;
  /** Replicas other than the leader, as the leader reports them (`current`: caught up). */
  replicas: Array<{ name: string; current: boolean; offline?: boolean }>;
}

/**
 * A private, throw-away NATS JetStream cluster for tests: N `nats-server` processes (default 3) on
 * free loopback ports, each with its own server name, client port, cluster route port, monitoring
 * port (`-m`) and JetStream store directory (`-sd`) under one temporary directory, routed to each
 * other under one cluster name. A killed node restarts on the same ports and store, so it catches
 * up from the others. Never the machine's shared NATS.
 */
export class PrivateNatsCluster {
  private constructor(
    private readonly nodes: Node[],
    private readonly root: string,
    readonly clusterName: string,
  ) {}

  static async start(options: { size?: number } = {}): Promise<PrivateNatsCluster> {
    const root = await mkdtemp(join(tmpdir(), 'fcd-nats-cluster-'));
    const clusterName = `fcd-${randomBytes(4).toString('hex')}`;
    const nodes: Node[] = [];
    for (let i = 0; i < (options.size ?? 3); i++) {
      const name = `n${i + 1}`;
      const dir = join(root, name);
      await mkdir(dir, { recursive: true });
      nodes.push({ name, port: await freePort(), clusterPort: await freePort(), monitorPort: await freePort(), dir, proc: undefined });
    }
    const cluster = new PrivateNatsCluster(nodes, root, clusterName);
    try {
      for (const n of nodes) cluster.spawn(n);
      await cluster.waitHealthy();
      return cluster;
    } catch (err) {
      await cluster.stop();
      throw err;
    }
  }

  private spawn(n: Node): void {
    const routes = this.nodes.filter((o) => o !== n).map((o) => `nats://127.0.0.1:${o.clusterPort}`);
    n.proc = spawn(
      'nats-server',
      [
        '-js',
        '-sd',
        join(n.dir, 'js'),
        '-n',
        n.name,
        '-a',
        '127.0.0.1',
        '-p',
        String(n.port),
        '-m',
        String(n.monitorPort),
        '--cluster_name',
        this.clusterName,
        '--cluster',
        `nats://127.0.0.1:${n.clusterPort}`,
        '--routes',
        routes.join(','),
        '-l',
        join(n.dir, 'log'),
      ],
      { stdio: 'ignore' },
    );
  }

  /** Server names, in start order (`n1`, `n2`, …). */
  get names(): string[] {
    return this.nodes.map((n) => n.name);
  }

  /** Client URL of every node. */
  get urls(): string[] {
    return this.nodes.map((n) => `nats://127.0.0.1:${n.port}`);
  }

  /** NATS_URL of the whole cluster: every node's client URL, comma-separated. */
  get url(): string {
    return this.urls.join(',');
  }

  urlOf(name: string): string {
    return `nats://127.0.0.1:${this.node(name).port}`;
  }

  private node(name: string): Node {
    const n = this.nodes.find((x) => x.name === name);
    if (!n) throw new Error(`no node ${name}`);
    return n;
  }

  private alive(n: Node): boolean {
    return n.proc !== undefined && n.proc.exitCode === null && n.proc.signalCode === null;
  }

  /** GET of a node's monitoring endpoint (`/varz`, `/connz`, `/jsz?…`, `/healthz`) as JSON. */
  async monitor<T = Record<string, unknown>>(name: string, path: string): Promise<T> {
    const res = await fetch(`http://127.0.0.1:${this.node(name).monitorPort}${path}`, { signal: AbortSignal.timeout(2000) });
    return (await res.json()) as T;
  }

  /** Names of the clients connected to a node now (the `name` they gave in connect()). */
  async clientsOf(name: string): Promise<string[]> {
    const connz = await this.monitor<{ connections?: Array<{ name?: string }> }>(name, '/connz?limit=1024');
    return (connz.connections ?? []).map((c) => c.name ?? '');
  }

  /** One stream as a node sees it (null when the node holds no copy of it). */
  async streamOn(name: string, stream: string): Promise<NodeStreamState | null> {
    type Jsz = {
      account_details?: Array<{
        stream_detail?: Array<{
          name: string;
          state: { messages: number; last_seq: number };
          cluster?: { leader?: string; replicas?: Array<{ name: string; current: boolean; offline?: boolean }> };
        }>;
      }>;
    };
    const jsz = await this.monitor<Jsz>(name, '/jsz?accounts=true&streams=true');
    for (const acc of jsz.account_details ?? []) {
      for (const s of acc.stream_detail ?? []) {
        if (s.name !== stream) continue;
        return {
          messages: s.state.messages,
          lastSeq: s.state.last_seq,
          leader: s.cluster?.leader ?? '',
          replicas: s.cluster?.replicas ?? [],
        };
      }
    }
    return null;
  }

  /** SIGKILL one node (no shutdown: its store is left as a crash leaves it). */
  async kill(name: string): Promise<void> {
    const n = this.node(name);
    const p = n.proc;
    if (!p || !this.alive(n)) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGKILL');
    await exited;
  }

  /** Starts a killed node again on the same ports and store directory. */
  async restart(name: string): Promise<void> {
    const n = this.node(name);
    if (this.alive(n)) return;
    this.spawn(n);
    await this.waitHealthy();
  }

  /**
   * Until every live node answers /healthz (JetStream current) and reports a meta leader and
   * every other node as a peer.
   */
  async waitHealthy(timeoutMs = 30_000): Promise<void> {
    await this.waitFor(
      async () => {
        for (const n of this.nodes.filter((x) => this.alive(x))) {
          const health = await this.monitor<{ status?: string }>(n.name, '/healthz');
          if (health.status !== 'ok') return false;
          const jsz = await this.monitor<{ meta_cluster?: { leader?: string; cluster_size?: number } }>(n.name, '/jsz');
          if (!jsz.meta_cluster?.leader || (jsz.meta_cluster.cluster_size ?? 0) < this.nodes.length) return false;
        }
        return true;
      },
      'the NATS cluster to be healthy',
      timeoutMs,
    );
  }

  async waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      if (await check().catch(() => false)) return;
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** A node's log file (for a failing test's message). */
  async log(name: string): Promise<string> {
    return readFile(join(this.node(name).dir, 'log'), 'utf8').catch(() => '');
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => this.kill(n.name)));
    await rm(this.root, { recursive: true, force: true });
  }
}
