export * from './eventually';
export * from './process';
export * from './redis-server';
export * from './services';
export * from './stack';
export * from './private-postgres';
