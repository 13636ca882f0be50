import { KeyId, PageQuery, Pagination } from '@fcd/service-kit';
import { Type } from '@sinclair/typebox';

/** The account's history (docs/api.md, "Audit log" and "Usage history"): request and response schemas. */

const DateTime = (description: string) => Type.String({ format: 'date-time', description });
const Day = (description: string) => Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$', description });

const AuditEntrySchema = Type.Object({
  id: Type.String({ pattern: '^aud_[0-9a-f-]{36}$', description: 'Entry id (`aud_<uuid>`).' }),
  actor: Type.Object(
    {
      type: Type.String({
        description:
          '`key` (the account, through one of its keys), `portal_session` (the account, in a customer-portal session) or `operator`; more types may be added.',
      }),
      key_id: Type.Optional(Type.String({ pattern: KeyId.pattern, description: 'For `key`: the key that made the call.' })),
      session_id: Type.Optional(
        Type.String({
          pattern: '^pses_[0-9a-f-]{36}$',
          description: "For `portal_session`: the session's id (`pses_<uuid>`; never its token).",
        }),
      ),
    },
    { description: 'Who made the change.' },
  ),
  action: Type.String({ description: '`key.created`, `key.renamed`, `key.revoked` or `key.rolled`; more actions may be added.' }),
  key_id: Type.String({ pattern: KeyId.pattern, description: 'The key changed (for `key.rolled`, the key rolled).' }),
  details: Type.Record(Type.String(), Type.Unknown(), {
    description: 'What changed: `name`, `previous_name`, `expires_at`, `new_key_id`, `expires_in_seconds`, `was_live`. Never a key.',
  }),
  occurred_at: DateTime('When the change was made.'),
});

export const AuditLogQuery = Type.Object(PageQuery, { additionalProperties: false });
export const AuditLogResponse = Type.Object({ data: Type.Array(AuditEntrySchema), pagination: Pagination });

export const DailyUsageQuery = Type.Object(
  {
    from: Type.Optional(Day('First day (UTC), YYYY-MM-DD. Default: 29 days before `to`.')),
    to: Type.Optional(Day('Last day (UTC), YYYY-MM-DD, not after today. Default: today.')),
  },
  { additionalProperties: false },
);

export const DailyUsageResponse = Type.Object({
  data: Type.Object({
    from: Type.String({ format: 'date' }),
    to: Type.String({ format: 'date' }),
    days: Type.Array(
      Type.Object({
        date: Type.String({ format: 'date' }),
        requests: Type.Integer({ description: 'Requests counted that day (today: so far).' }),
        included: Type.Integer({ description: "The day's included requests: the daily limit." }),
        overage: Type.Integer({ description: 'Requests over the daily limit, billed as overage (0 on a tier with a hard limit).' }),
      }),
      { description: 'Every day from `from` to `to`, oldest first; a day without requests has 0.' },
    ),
  }),
});
