import { Cluster, type ClusterNode, type RedisOptions } from 'ioredis';

/** Fail fast: one retry, 2 s to connect, 2 s per command (callers answer 503 rather than wait). */
export const REDIS_COMMAND_DEFAULTS = {
  maxRetriesPerRequest: 1,
  connectTimeout: 2000,
  commandTimeout: 2000,
};

/**
 * `REDIS_CLUSTER_NODES`: comma-separated `host:port` (or `redis://host:port`, `rediss://host:port`
 * for TLS) of some of the cluster's nodes; the client learns the others from them.
 */
export function parseClusterNodes(value: string): Array<{ host: string; port: number; tls: boolean }> {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((entry) => {
      const m = /^(?:(rediss?):\/\/)?(\[[0-9a-fA-F:.]+\]|[^:/\s]+):(\d{1,5})$/.exec(entry);
      const port = Number(m?.[3]);
      if (!m || port < 1 || port > 65535) throw new Error(`REDIS_CLUSTER_NODES: "${entry}" is not host:port`);
      return { host: (m[2] as string).replace(/^\[|\]$/g, ''), port, tls: m[1] === 'rediss' };
    });
}

/**
 * A Redis Cluster client: credentials and TLS (`redisOptions(config)`) apply to every node. With
 * TLS the nodes' names are kept as given (not resolved first), so certificates naming them verify.
 */
export function createRedisCluster(nodes: ClusterNode[], auth: RedisOptions = {}): Cluster {
  return new Cluster(nodes, {
    redisOptions: { ...auth, ...REDIS_COMMAND_DEFAULTS },
    enableOfflineQueue: false,
    enableAutoPipelining: true,
    scaleReads: 'master',
    retryDelayOnFailover: 100,
    retryDelayOnClusterDown: 100,
    retryDelayOnTryAgain: 100,
    slotsRefreshTimeout: 1000,
    slotsRefreshInterval: 2000,
    clusterRetryStrategy: (times) => Math.min(100 + times * 100, 1000),
    ...(auth.tls ? { dnsLookup: (address: string, callback: (err: null, address: string) => void) => callback(null, address) } : {}),
  });
}

/**
 * The Redis a service is configured for: a Redis Cluster when `REDIS_CLUSTER_NODES` is set, else the
 * one Redis of `REDIS_URL` (made by `single`, which sets its own options). Credentials and TLS
 * (`redisOptions`) apply to every node.
 */
export function clusterFromSettings(
  settings: { REDIS_CLUSTER_NODES?: string | undefined },
  auth: (schemeUrl: string) => RedisOptions,
): Cluster | undefined {
  if (settings.REDIS_CLUSTER_NODES === undefined) return undefined;
  const nodes = parseClusterNodes(settings.REDIS_CLUSTER_NODES);
  // TLS: a rediss:// node, or REDIS_TLS_CA_FILE (redisOptions reads the scheme of the URL it is given).
  const scheme = nodes.some((n) => n.tls) ? 'rediss://' : 'redis://';
  return createRedisCluster(
    nodes.map(({ host, port }) => ({ host, port })),
    auth(scheme),
  );
}

/** Start-up check beyond the schema: a Redis to use, `REDIS_URL` or `REDIS_CLUSTER_NODES`. */
export function redisTargetProblems(settings: { REDIS_URL?: string | undefined; REDIS_CLUSTER_NODES?: string | undefined }): string[] {
  if (settings.REDIS_URL === undefined && settings.REDIS_CLUSTER_NODES === undefined)
    return ['REDIS_URL: required unless REDIS_CLUSTER_NODES is set'];
  return [];
}
