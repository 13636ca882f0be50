// The delivery log and the dispatch queue (SQL); the I/O-free delivery modules are in ../pure.ts.
export * from './log';
export * from './queue';
export * from './secret-cache';
export * from './store';
