import { Backoff, errMessage, type Logger, type NatsAuthOptions, natsServers, WakeableSleep } from '@fcd/service-kit';
import { type ConnectionOptions, connect, type NatsConnection } from '@nats-io/transport-node';

export interface ConnectSettings {
  /** One NATS URL, or several comma-separated (a cluster): the client reconnects through them. */
  url: string;
  /** Credentials and TLS (`natsOptions(config)`). */
  auth?: NatsAuthOptions;
  /** The connection's name (seen in the server's monitoring). */
  name: string;
  /** Ping interval (ms): how fast a dead server is noticed (default 10 s). */
  pingIntervalMs?: number;
  logger: Pick<Logger, 'info' | 'warn'>;
  /** True once the caller is closing: stop trying (the result is then undefined). */
  isClosing: () => boolean;
  /** The wait between tries (default: a real timer); `wake()` it to stop waiting at close. */
  sleep?: WakeableSleep;
  /** The delays between tries (default 200 ms doubling to 2 s, ±20 %). */
  backoff?: Backoff;
  /** The NATS connect (tests inject it). */
  connect?: (options: ConnectionOptions) => Promise<NatsConnection>;
}

/** The options of every connection: reconnects forever once connected. */
export function connectionOptions(s: Pick<ConnectSettings, 'url' | 'auth' | 'name' | 'pingIntervalMs'>): ConnectionOptions {
  return {
    ...s.auth,
    servers: natsServers(s.url),
    name: s.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    timeout: 2000,
    pingInterval: s.pingIntervalMs ?? 10_000,
  };
}

/**
 * Connects to NATS, trying again after a capped, jittered backoff until it succeeds or the caller
 * closes (then undefined; a connection made meanwhile is closed). The first failure is logged
 * once ("nats unavailable; retrying in the background"); the service serves meanwhile.
 */
export async function connectWithBackoff(s: ConnectSettings): Promise<NatsConnection | undefined> {
  const sleep = s.sleep ?? new WakeableSleep();
  const backoff = s.backoff ?? new Backoff({ initialMs: 200, maxMs: 2000, jitter: 0.2 });
  const open = s.connect ?? connect;
  let warned = false;
  while (!s.isClosing()) {
    try {
      const nc = await open(connectionOptions(s));
      if (s.isClosing()) {
        await nc.close();
        return undefined;
      }
      s.logger.info('nats connected');
      return nc;
    } catch (err) {
      if (!warned) s.logger.warn({ err: { message: errMessage(err) } }, 'nats unavailable; retrying in the background');
      warned = true;
      await sleep.sleep(backoff.next());
    }
  }
  return undefined;
}
