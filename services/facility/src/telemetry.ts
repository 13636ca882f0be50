// Loaded before the app: node --import ./dist/telemetry.js ./dist/main.js (OTEL_* variables configure it).
import { startTelemetry } from '@fcd/service-kit/telemetry';

await startTelemetry('facility');
