/** `@fcd/service-kit/redis`: Redis Cluster from the backends' settings. */
export * from '../redis-cluster';
