export * from './connect';
export * from './session';
export * from './stream';
export * from './types';
