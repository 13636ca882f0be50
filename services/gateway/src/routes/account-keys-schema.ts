import { KeyId, MAX_KEY_NAME_LENGTH, MAX_ROLL_SECONDS, Nullable } from '@fcd/service-kit';
import { Type } from '@sinclair/typebox';

/** The account's own API keys (docs/api.md, "API keys"): request and response schemas. */

const DateTime = (description: string) => Type.String({ format: 'date-time', description });

const KeyName = Type.String({
  minLength: 1,
  maxLength: MAX_KEY_NAME_LENGTH,
  pattern: '\\S',
  description: 'A name to tell keys apart (`ci`, `production`): 1 to 100 characters, not only spaces, no control characters.',
});

/** A key as its account sees it: never the key itself. */
const ApiKeySchema = Type.Object({
  id: Type.String({ pattern: KeyId.pattern, description: 'Key id (`key_<uuid>`): not the key.' }),
  name: Type.String(),
  prefix: Nullable(Type.String(), {
    description:
      'The first 8 characters of the key (`fcd_` and four more), to recognise it. Null for keys created before prefixes were kept.',
  }),
  created_at: DateTime('When the key was created.'),
  last_used_at: Nullable(Type.String({ format: 'date-time' }), {
    description: 'When the key last authenticated a request. **May lag by up to a minute** (written in batches). Null: never used.',
  }),
  expires_at: Nullable(Type.String({ format: 'date-time' }), {
    description: 'When the key stops working (set at creation, or by a roll). Null: never.',
  }),
  revoked_at: Nullable(Type.String({ format: 'date-time' }), {
    description: 'When the key was revoked (DELETE, or a roll with `expires_in_seconds: 0`). Null: not revoked.',
  }),
});

const CreatedKey = Type.Object({
  ...ApiKeySchema.properties,
  key: Type.String({ pattern: '^fcd_[A-Za-z0-9]{32}$', description: 'The API key itself. **Shown only in this response**: store it now.' }),
});

export const KeyListResponse = Type.Object({ data: Type.Array(ApiKeySchema) });
export const KeyResponse = Type.Object({ data: ApiKeySchema });
export const CreatedKeyResponse = Type.Object({ data: CreatedKey });
export const RolledKeyResponse = Type.Object({
  data: Type.Object({
    ...CreatedKey.properties,
    previous: Type.Object(ApiKeySchema.properties, {
      description: 'The rolled key, with its new `expires_at` (or `revoked_at` when `expires_in_seconds` was 0).',
    }),
  }),
});

export const CreateKeyBody = Type.Object(
  {
    name: KeyName,
    expires_at: Type.Optional(
      Nullable(Type.String({ format: 'date-time' }), { description: 'When the key stops working; in the future. Omitted or null: never.' }),
    ),
  },
  { additionalProperties: false },
);

export const RenameKeyBody = Type.Object({ name: KeyName }, { additionalProperties: false });

export const RollKeyBody = Type.Object(
  {
    expires_in_seconds: Type.Integer({
      minimum: 0,
      maximum: MAX_ROLL_SECONDS,
      description: 'How long the old key keeps working, 0 to 604800 (7 days). 0: it is revoked at once.',
    }),
  },
  { additionalProperties: false },
);

export const KeyParams = Type.Object({ key_id: Type.String() });
