import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './process';

/**
 * Private Redis and NATS servers that require credentials and TLS, for tests of the services'
 * backend options (never the shared servers). The certificate is self-signed for 127.0.0.1 and
 * serves as its own CA file; `otherCaFile` is a CA the servers do not use (an untrusted chain).
 */
export class TestCertificates {
  readonly dir = mkdtempSync(join(tmpdir(), 'fcd-tls-'));
  readonly certFile = join(this.dir, 'server.pem');
  readonly keyFile = join(this.dir, 'server.key');
  readonly otherCaFile = join(this.dir, 'other.pem');

  constructor() {
    for (const [cert, key] of [
      [this.certFile, this.keyFile],
      [this.otherCaFile, join(this.dir, 'other.key')],
    ] as const) {
      execFileSync(
        'openssl',
        ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=127.0.0.1'].concat([
          '-addext',
          'subjectAltName=IP:127.0.0.1,DNS:localhost',
        ]),
        { stdio: 'ignore' },
      );
    }
  }

  get caFile(): string {
    return this.certFile;
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

async function waitForPort(port: number, what: string): Promise<void> {
  const until = Date.now() + 15_000;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const s = createConnection({ port, host: '127.0.0.1' });
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (open) return;
    if (Date.now() > until) throw new Error(`${what} did not start on ${port}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function stopProcess(p: ChildProcess | undefined): Promise<void> {
  if (!p || p.exitCode !== null) return;
  const exited = new Promise((r) => p.once('exit', r));
  p.kill('SIGKILL');
  await exited;
}

/** redis-server on a TLS port only, with a password (`requirepass`). */
export class PrivateTlsRedis {
  private proc: ChildProcess | undefined;

  private constructor(
    readonly port: number,
    readonly password: string,
  ) {}

  static async start(certs: TestCertificates, password: string): Promise<PrivateTlsRedis> {
    const r = new PrivateTlsRedis(await freePort(), password);
    r.proc = spawn(
      'redis-server',
      ['--port', '0', '--tls-port', String(r.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'].concat([
        '--tls-cert-file',
        certs.certFile,
        '--tls-key-file',
        certs.keyFile,
        '--tls-ca-cert-file',
        certs.caFile,
        '--tls-auth-clients',
        'no',
        '--requirepass',
        password,
      ]),
      { stdio: 'ignore' },
    );
    await waitForPort(r.port, 'redis-server (TLS)');
    return r;
  }

  get url(): string {
    return `rediss://127.0.0.1:${this.port}`;
  }

  stop(): Promise<void> {
    return stopProcess(this.proc);
  }
}

export interface NatsUser {
  user: string;
  password: string;
  /** Subjects this user may publish to / subscribe to (omitted: everything). */
  publish?: string[];
  subscribe?: string[];
}

/** nats-server with JetStream, TLS and a user list with permissions, from a config file it writes. */
export class PrivateTlsNats {
  private proc: ChildProcess | undefined;
  readonly dir = mkdtempSync(join(tmpdir(), 'fcd-nats-tls-'));

  private constructor(readonly port: number) {}

  static async start(certs: TestCertificates, users: NatsUser[]): Promise<PrivateTlsNats> {
    const n = new PrivateTlsNats(await freePort());
    const list = (subjects: string[] | undefined) => (subjects ? `{ allow: ${JSON.stringify(subjects)} }` : undefined);
    const userBlock = users
      .map((u) => {
        const perms = [u.publish && `publish: ${list(u.publish)}`, u.subscribe && `subscribe: ${list(u.subscribe)}`].filter(Boolean);
        const permissions = perms.length > 0 ? `, permissions: { ${perms.join(', ')} }` : '';
        return `    { user: ${JSON.stringify(u.user)}, password: ${JSON.stringify(u.password)}${permissions} }`;
      })
      .join('\n');
    const conf = join(n.dir, 'nats.conf');
    writeFileSync(
      conf,
      `listen: 127.0.0.1:${n.port}
jetstream { store_dir: ${JSON.stringify(join(n.dir, 'js'))} }
tls { cert_file: ${JSON.stringify(certs.certFile)}, key_file: ${JSON.stringify(certs.keyFile)} }
authorization {
  users: [
${userBlock}
  ]
}
`,
    );
    n.proc = spawn('nats-server', ['-c', conf, '-l', join(n.dir, 'log')], { stdio: 'ignore' });
    await waitForPort(n.port, 'nats-server (TLS)');
    return n;
  }

  get url(): string {
    return `tls://127.0.0.1:${this.port}`;
  }

  log(): string {
    try {
      return readFileSync(join(this.dir, 'log'), 'utf8');
    } catch {
      return '';
    }
  }

  async stop(): Promise<void> {
    await stopProcess(this.proc);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
