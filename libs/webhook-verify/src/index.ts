export * from './receiver';
export * from './signature';
export * from './standard';
