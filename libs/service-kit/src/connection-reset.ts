/**
 * Error codes (undici's) of a request whose connection closed or was reset before any byte of its
 * answer: the upstream's server closing an idle keep-alive connection as the request was written
 * (a replica leaving, docs/operations.md "Rollouts"), or the replica's process gone. A FIN is
 * UND_ERR_SOCKET, an RST ECONNRESET; EPIPE is a write onto a socket the peer already reset.
 */
const RESET_CODES = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']);

/**
 * A reset this soon after the call began may be answered by sending a safe request once more. The
 * rollout's race resets at once. A later reset is a replica failing mid-request: not sent again,
 * so a call takes at most this plus one timeout, and a signed account header (valid for
 * INTERNAL_AUTH_TTL_MS, 5 s) is still valid when the second attempt arrives.
 */
export const RESEND_WITHIN_MS = 1000;

/**
 * Whether a request begun at `since` (performance.now()) failed with `err` because its connection
 * closed or was reset before its answer began, within RESEND_WITHIN_MS: a safe request (a read)
 * that did is sent once more, as Envoy's `retry_on: reset` does. A timeout is not such a failure:
 * it took the whole bound already.
 */
export function resetBeforeAnswer(err: unknown, since: number): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && RESET_CODES.has(code) && performance.now() - since < RESEND_WITHIN_MS;
}

/**
 * `send()`, and once more when it failed with a reset before the answer (`resetBeforeAnswer`),
 * after a turn of I/O: by then the client has seen the replica's other closes, sent at the same
 * time, so the second send goes out on a new connection. Only for a request safe to repeat (a
 * read); `onResend` is told of each second send. A proxied read, whose answer is read through a
 * dispatch handler, does the same within its handler (the gateway's proxy).
 */
export async function sendOnceMoreAfterReset<T>(send: () => Promise<T>, onResend?: () => void): Promise<T> {
  const since = performance.now();
  try {
    return await send();
  } catch (err) {
    if (!resetBeforeAnswer(err, since)) throw err;
    onResend?.();
    await new Promise((resolve) => setImmediate(resolve));
    return send();
  }
}
