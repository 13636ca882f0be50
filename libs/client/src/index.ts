export { type AuditEntry, auditLog, type DailyUsage, type DailyUsageRange, dailyUsage } from './account.js';
export {
  type ClientOptions,
  createClient,
  type FcdClient,
  type ListItem,
  type ListPath,
  type Result,
  type SuccessData,
} from './client.js';
export {
  type ErrorCode,
  type ErrorEnvelope,
  errorFromResponse,
  FcdApiError,
  RateLimitError,
  ServiceUnavailableError,
  UNEXPECTED_RESPONSE,
} from './errors.js';
export type { components, operations, paths } from './generated/openapi.js';
export { type RateLimit, rateLimitOf } from './rate-limit.js';
export { DEFAULT_RETRY, parseRetryAfter, type RetryOptions, retryDelay, retryingFetch, type Sleep, sleep } from './retry.js';
export { listStatements, type Statement, type StatementAdjustment, type StatementTier } from './statements.js';
