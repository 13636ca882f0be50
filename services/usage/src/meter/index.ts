export type { Decision, MeterResult, UsageReport } from '../domain/meter-decision';
export { type MeterDeps, type MeterOptions, type MeterRequest, UsageMeter } from './meter';
