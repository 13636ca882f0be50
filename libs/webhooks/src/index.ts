// Signing and verification live in the dependency-free @fcd/webhook-verify package.
export * from '@fcd/webhook-verify';
export * from './deliveries/index';
export * from './event-log';
export * from './events';
export * from './limits';
export * from './matching';
export * from './migrations';
export * from './secrets';
export * from './store';
export * from './url-safety';
