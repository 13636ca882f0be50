export * from './process';
export * from './services';
export * from './stack';
