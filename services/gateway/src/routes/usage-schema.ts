import { Type } from '@sinclair/typebox';

/** GET /v1/account/usage → { data: <account usage> } (docs/metering.md "Usage report"). */
export const UsageResponseSchema = Type.Object({
  data: Type.Object({
    tier: Type.String(),
    daily_limit: Type.Integer(),
    today: Type.Object({ request_count: Type.Integer(), remaining: Type.Integer(), resets_at: Type.String({ format: 'date-time' }) }),
    billing_period: Type.Object({
      start: Type.String({ format: 'date' }),
      end: Type.String({ format: 'date' }),
      total_requests: Type.Integer(),
      included_requests: Type.Integer(),
      overage_requests: Type.Integer(),
      overage_rate_usd: Type.String(),
      estimated_overage_usd: Type.String(),
    }),
  }),
});

/** The usage endpoint takes no query parameters; any given one is a VALIDATION_ERROR naming it. */
export const NoQuery = Type.Object({}, { additionalProperties: false });
