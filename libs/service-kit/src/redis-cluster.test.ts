import { describe, expect, it } from 'vitest';
import { clusterFromSettings, redisTargetProblems } from './redis-cluster';

describe('which Redis a service uses', () => {
  it('needs REDIS_URL or REDIS_CLUSTER_NODES', () => {
    expect(redisTargetProblems({})).toEqual(['REDIS_URL: required unless REDIS_CLUSTER_NODES is set']);
    expect(redisTargetProblems({ REDIS_URL: 'redis://127.0.0.1:6379' })).toEqual([]);
    expect(redisTargetProblems({ REDIS_CLUSTER_NODES: 'a:7000' })).toEqual([]);
  });

  it('makes no cluster client without REDIS_CLUSTER_NODES, and asks for TLS options when a node is rediss://', () => {
    expect(clusterFromSettings({}, () => ({}))).toBeUndefined();
    const schemes: string[] = [];
    const cluster = clusterFromSettings({ REDIS_CLUSTER_NODES: 'rediss://127.0.0.1:1,127.0.0.1:2' }, (scheme) => {
      schemes.push(scheme);
      return { lazyConnect: true };
    });
    expect(schemes).toEqual(['rediss://']);
    // The nodes it was given (a private field of ioredis' Cluster: nothing public lists them before it connects).
    expect((cluster as unknown as { startupNodes: unknown }).startupNodes).toEqual([
      { host: '127.0.0.1', port: 1 },
      { host: '127.0.0.1', port: 2 },
    ]);
    cluster?.disconnect();
  });
});
