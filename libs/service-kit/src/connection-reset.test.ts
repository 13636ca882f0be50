import { describe, expect, it } from 'vitest';
import { RESEND_WITHIN_MS, resetBeforeAnswer, sendOnceMoreAfterReset } from './connection-reset';

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

describe('sendOnceMoreAfterReset', () => {
  const reset = () => Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' });

  /** A send that fails with each of `failures` in turn, then answers its call number. */
  function sender(...failures: Error[]) {
    let calls = 0;
    return {
      send: async () => {
        const failure = failures[calls++];
        if (failure) throw failure;
        return calls;
      },
      get calls() {
        return calls;
      },
    };
  }

  it('sends once more after a reset before the answer, and tells onResend once', async () => {
    const s = sender(reset());
    let resent = 0;
    expect(await sendOnceMoreAfterReset(s.send, () => resent++)).toBe(2);
    expect(s.calls).toBe(2);
    expect(resent).toBe(1);
  });

  it("sends only once more: a second reset is the caller's error", async () => {
    const s = sender(reset(), reset());
    await expect(sendOnceMoreAfterReset(s.send)).rejects.toMatchObject({ code: 'UND_ERR_SOCKET' });
    expect(s.calls).toBe(2);
  });

  it('does not send again after any other failure', async () => {
    const s = sender(Object.assign(new Error('headers timeout'), { code: 'UND_ERR_HEADERS_TIMEOUT' }));
    let resent = 0;
    await expect(sendOnceMoreAfterReset(s.send, () => resent++)).rejects.toMatchObject({ code: 'UND_ERR_HEADERS_TIMEOUT' });
    expect(s.calls).toBe(1);
    expect(resent).toBe(0);
  });

  it('answers what the first send answers, sending nothing more', async () => {
    const s = sender();
    expect(await sendOnceMoreAfterReset(s.send)).toBe(1);
    expect(s.calls).toBe(1);
  });
});
