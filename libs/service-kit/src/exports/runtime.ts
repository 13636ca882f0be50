/** `@fcd/service-kit/runtime`: the process: config, backends' credentials, logger, metrics, shutdown, CLI, tracing. */
export * from '../backends';
export * from '../cli';
export * from '../config';
export * from '../logger';
export * from '../metrics';
export * from '../process-guard';
export * from '../shutdown';
export * from '../trace-context';
