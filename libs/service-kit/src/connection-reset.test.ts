import { describe, expect, it } from 'vitest';
import { RESEND_WITHIN_MS, resetBeforeAnswer } from './connection-reset';

describe('resetBeforeAnswer', () => {
  const now = () => performance.now();

  it.each(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE'])('holds for %s soon after the call began', (code) => {
    expect(resetBeforeAnswer(Object.assign(new Error('reset'), { code }), now())).toBe(true);
  });

  it.each(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ECONNREFUSED', 'UND_ERR_DESTROYED', 'UND_ERR_ABORTED'])(
    'does not hold for %s (a timeout took its bound; a refused or closed pool is not the race)',
    (code) => {
      expect(resetBeforeAnswer(Object.assign(new Error('other'), { code }), now())).toBe(false);
    },
  );

  it('does not hold for a reset later than RESEND_WITHIN_MS after the call began', () => {
    const err = Object.assign(new Error('reset'), { code: 'ECONNRESET' });
    expect(resetBeforeAnswer(err, now() - RESEND_WITHIN_MS - 1)).toBe(false);
    expect(resetBeforeAnswer(err, now() - RESEND_WITHIN_MS + 200)).toBe(true);
  });

  it('does not hold for what is not an error with a code', () => {
    expect(resetBeforeAnswer(undefined, now())).toBe(false);
    expect(resetBeforeAnswer(null, now())).toBe(false);
    expect(resetBeforeAnswer(new Error('no code'), now())).toBe(false);
    expect(resetBeforeAnswer({ code: 42 }, now())).toBe(false);
  });
});
