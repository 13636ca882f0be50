export * from './gen/usage/v1/usage_pb';
