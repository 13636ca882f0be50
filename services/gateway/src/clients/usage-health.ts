import { grpc } from '@fcd/grpc';
import { service as healthService } from 'grpc-health-check';

type CheckFn = (req: { service: string }, opts: { deadline: number }, cb: (err: Error | null, res?: { status: string }) => void) => void;

/**
 * Standard gRPC health checks against the usage service. It reports its own
 * state ("") and its stores ("postgres", "redis"), so the gateway's /readyz can
 * name the relational database and the cache store apart (docs/operations.md, "Configuration").
 */
export class UsageHealth {
  private readonly client: grpc.Client & { check: CheckFn };

  constructor(address: string) {
    const Ctor = grpc.makeGenericClientConstructor(healthService as unknown as grpc.ServiceDefinition, 'Health');
    this.client = new Ctor(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & { check: CheckFn };
  }

  check(name: string, timeoutMs = 1000): Promise<void> {
    return new Promise((resolve, reject) => {
      this.client.check({ service: name }, { deadline: Date.now() + timeoutMs }, (err, res) => {
        if (err) return reject(new Error(name === '' ? `usage unreachable: ${err.message}` : 'usage service unreachable'));
        if (res?.status !== 'SERVING') return reject(new Error(`${name || 'usage'} is ${res?.status ?? 'UNKNOWN'}`));
        resolve();
      });
    });
  }

  close(): void {
    this.client.close();
  }
}
