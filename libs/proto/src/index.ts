export * from './gen/usage/v1/billing_pb';
export * from './gen/usage/v1/portal_pb';
export * from './gen/usage/v1/usage_pb';
