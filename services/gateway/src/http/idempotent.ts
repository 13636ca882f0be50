import { AppError, Backoff, errMessage, pollWithBackoff, serviceUnavailable, validationError } from '@fcd/service-kit';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuthenticatedAccount } from '../auth/account';
import { sendAnswer } from '../clients/proxy';
import { IDEMPOTENCY_KEY_PATTERN, IdempotencyStore, type StoredAnswer } from './idempotency';

/**
 * A POST with an Idempotency-Key (every POST route, whatever the upstream): the first request with
 * a key does the work and its answer is kept 24 h; the same key with the same request replays that
 * answer byte for byte without doing the work again; with another request it is 422. A duplicate
 * that arrives while the first is still working waits for its answer (409 after idempotencyWaitMs).
 * The request was authenticated and counted before (a replay counts like any request).
 */
export async function idempotent(
  store: IdempotencyStore,
  waitMs: number,
  request: FastifyRequest,
  reply: FastifyReply,
  account: AuthenticatedAccount,
  header: string | string[],
  work: () => Promise<StoredAnswer>,
): Promise<FastifyReply> {
  const value = Array.isArray(header) ? undefined : header;
  if (value === undefined || !IDEMPOTENCY_KEY_PATTERN.test(value)) {
    throw validationError([{ field: 'Idempotency-Key', message: 'must be 1 to 255 visible ASCII characters, sent once' }]);
  }
  const body = request.body === undefined || request.body === null ? undefined : JSON.stringify(request.body);
  const fingerprint = IdempotencyStore.fingerprint(request.method, request.url, body);
  const key = store.redisKey(account.accountId, value);
  const guarded = async <T>(op: () => Promise<T>): Promise<T> => {
    try {
      return await op();
    } catch (err) {
      request.log.warn({ err: { message: errMessage(err) } }, 'idempotency store unavailable');
      throw serviceUnavailable('idempotency store', 1, err);
    }
  };
  const attempt = async (): Promise<FastifyReply | undefined> => {
    const begun = await guarded(() => store.begin(key, fingerprint));
    if (begun.kind === 'mismatch') {
      throw new AppError(
        'IDEMPOTENCY_KEY_REUSED',
        'This Idempotency-Key was used with another request (method, path or body) in the last 24 hours. Use a new key for a new request.',
      );
    }
    if (begun.kind === 'replay') {
      reply.header('idempotent-replayed', 'true');
      return sendAnswer(reply, begun.answer);
    }
    if (begun.kind === 'run') return sendAnswer(reply, await runAndKeep(store, key, fingerprint, begun.token, request, work));
    return undefined; // In progress elsewhere: wait for its answer.
  };
  const sent = await pollWithBackoff(attempt, { backoff: new Backoff({ initialMs: 20, maxMs: 250 }), waitMs });
  if (sent) return sent;
  throw new AppError('IDEMPOTENCY_KEY_IN_USE', 'A request with this Idempotency-Key is still being processed. Retry shortly.', {
    retryAfterSeconds: 1,
  });
}

/** Does the work under the key's lease and keeps its answer (a 5xx or no answer frees the key instead). */
async function runAndKeep(
  store: IdempotencyStore,
  key: string,
  fingerprint: string,
  token: string,
  request: FastifyRequest,
  work: () => Promise<StoredAnswer>,
): Promise<StoredAnswer> {
  let answer: StoredAnswer;
  try {
    answer = await work();
  } catch (err) {
    // No answer from the upstream (unreachable, failed): the key is free for a retry.
    await store.release(key, token).catch(() => undefined);
    throw err;
  }
  if (answer.status >= 500) {
    await store.release(key, token).catch(() => undefined);
    return answer;
  }
  try {
    if (!(await store.complete(key, fingerprint, token, answer))) {
      request.log.warn('idempotency lease expired before the answer was stored');
    }
  } catch (err) {
    // The work is done: the client gets its answer; a retry within the lease waits, then may run again.
    request.log.error({ err: { message: errMessage(err) } }, 'idempotency answer not stored');
  }
  return answer;
}
