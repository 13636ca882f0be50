export type { Decision, MeterResult, UsageReport } from '../domain/meter-decision';
export { UsageMeter } from './meter';
