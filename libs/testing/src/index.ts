export * from './eventually';
export * from './fault-proxy';
export * from './postgres-server';
export * from './process';
export * from './redis-server';
export * from './services';
export * from './stack';
export * from './tls-servers';
