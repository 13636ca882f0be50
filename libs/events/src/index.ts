export * from './connect';
export * from './stream';
export * from './types';
