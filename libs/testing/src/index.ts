export * from './eventually';
export * from './private-postgres';
export * from './process';
export * from './redis-server';
export * from './services';
export * from './stack';
