// Loaded before the app: node --import ./dist/telemetry.js ./dist/main.js (OTEL_* variables configure it).
import { startTelemetry } from '@fcd/service-kit/telemetry';

// Delivery URLs are customers' and often carry their credential in the path or query: spans keep only the origin.
await startTelemetry('dispatcher', process.env, { redactOutgoingUrls: true });
