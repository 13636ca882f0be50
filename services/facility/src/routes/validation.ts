import { AppError, fieldProblems } from '@fcd/service-kit';
import type { FastifyError, preHandlerAsyncHookHandler } from 'fastify';
import { PATTERN_MESSAGES } from './facility-query';

type Validation = NonNullable<FastifyError['validation']>;

/** Clearer messages than ajv's defaults for the keywords our query schemas use. */
function clarify(validation: Validation): Validation {
  return validation.map((v) => {
    const params = v.params as Record<string, unknown>;
    const field = v.instancePath.split('/').filter(Boolean).pop();
    if (v.keyword === 'enum') {
      const allowed = Array.isArray(params.allowedValues) ? (params.allowedValues as unknown[]) : [];
      const message = field === 'state' ? 'must be a USPS state code, e.g. TX' : `must be one of ${allowed.join(', ')}`;
      return { ...v, message };
    }
    if (v.keyword === 'format' && params.format === 'date') return { ...v, message: 'must be a date YYYY-MM-DD' };
    if (v.keyword === 'format' && params.format === 'uuid') return { ...v, message: 'must be a UUID' };
    if (v.keyword === 'pattern' && field !== undefined && PATTERN_MESSAGES[field]) return { ...v, message: PATTERN_MESSAGES[field] };
    if (v.keyword === 'type' && params.type === 'boolean') return { ...v, message: 'must be true or false' };
    if (v.keyword === 'formatMinimum') return { ...v, message: 'must be a date from 0001-01-01 to 9999-12-31' };
    return v;
  });
}

/**
 * With `attachValidation: true` on a route, this preHandler turns the attached
 * schema errors into one VALIDATION_ERROR listing every field, with messages a
 * client can act on.
 */
export const rejectInvalid: preHandlerAsyncHookHandler = async (request) => {
  const error = request.validationError as (Error & { validation?: Validation; validationContext?: string }) | undefined;
  if (!error?.validation) return;
  const fields = fieldProblems(clarify(error.validation), error.validationContext);
  throw new AppError(
    'VALIDATION_ERROR',
    fields.length === 1 ? `Invalid request: ${fields[0]?.field}: ${fields[0]?.message}` : 'The request is invalid.',
    {
      details: { fields },
    },
  );
};
