export * from './receiver.js';
export * from './signature.js';
export * from './standard.js';
