export * from './process';
export * from './services';
