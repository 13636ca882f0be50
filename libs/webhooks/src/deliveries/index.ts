export * from './bookkeeping';
export * from './envelope';
export * from './log';
export * from './queue';
export * from './redact';
export * from './secret-cache';
export * from './store';
export * from './types';
