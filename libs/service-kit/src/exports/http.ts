/** `@fcd/service-kit/http`: the HTTP conventions on Fastify and node:http (loads pg for its error mapping). */
export * from '../bearer-token';
export * from '../connection-reset';
export * from '../gateway-account';
export * from '../health-routes';
export * from '../http';
export * from '../http-server';
