export * from './events';
export * from './matching';
export * from './migrations';
export * from './secrets';
export * from './signature';
export * from './store';
export * from './url-safety';
