import { Webhook } from 'standardwebhooks';
import { effect, getOrAdd, iso, type PromiseResult, type Run, Tally } from './checker-common';
import type { Timeline } from './checker-timeline';
import type { ReceiptRecord } from './history';

/** How far a webhook-timestamp may be from the receipt (docs/webhooks.md, "Signatures": 5 minutes). */
export const TIMESTAMP_TOLERANCE_MS = 5 * 60_000;

/** A secret and when it may sign: from `from` to `until`; `secret` undefined when it was never seen (an unanswered rotation). */
export interface SecretSpan {
  secret: string | undefined;
  from: number;
  until: number;
  label: string;
}

/**
 * When each secret of a subscription may sign (docs/webhooks.md, "Rotation with overlap"): the
 * create's from the create; a rotation's new one from the rotation; the one it replaces until the
 * rotation's answer plus its overlap plus the in-flight bound (a send claimed before the rotation
 * still arrives), an older one still in its overlap until the answer plus the bound. A rotation
 * with an unknown outcome adds its secret (unknown unless recorded) and ends none.
 */
export function secretSpans(tl: Timeline, boundMs: number): SecretSpan[] {
  const spans: SecretSpan[] = [];
  let n = 0;
  for (const op of tl.ops) {
    const e = effect(op.status);
    if ((op.op !== 'create' && op.op !== 'rotate') || e === 'not') continue;
    if (op.op === 'create' && e !== 'done') continue;
    if (op.op === 'rotate' && e === 'done') {
      for (const s of spans) {
        if (s.until === Number.POSITIVE_INFINITY) s.until = op.t1 + (op.overlapMs ?? 0) + boundMs;
        else s.until = Math.min(s.until, op.t1 + boundMs);
      }
    }
    const label = `secret #${++n} of sub ${tl.id} (${op.op} at ${iso(op.t0)}${e === 'done' ? '' : ', unanswered'})`;
    spans.push({ secret: op.secret, from: op.t0, until: Number.POSITIVE_INFINITY, label });
  }
  return spans;
}

/** Signs with standardwebhooks, one Webhook per secret. */
class Signer {
  private readonly hooks = new Map<string, Webhook>();

  sign(secret: string, r: ReceiptRecord): string {
    const hook = getOrAdd(this.hooks, secret, () => new Webhook(secret));
    return hook.sign(r.webhookId, new Date(Number(r.timestamp) * 1000), r.body);
  }
}

/** Why a receipt's signature does not hold, or null. */
function signatureProblem(r: ReceiptRecord, spans: SecretSpan[], signer: Signer): string | null {
  const ts = Number(r.timestamp);
  const what = `the receipt of ${r.event} at sub ${r.sub} at ${iso(r.t)}`;
  if (r.timestamp === '' || !Number.isFinite(ts)) return `${what} has no webhook-timestamp`;
  if (Math.abs(r.t - ts * 1000) > TIMESTAMP_TOLERANCE_MS)
    return `${what} carries webhook-timestamp ${r.timestamp}, ${r.t - ts * 1000} ms from its arrival`;
  const given = new Set(r.signature.split(' ').filter((s) => s.length > 0));
  const valid = spans.filter((s) => s.from <= r.t && r.t <= s.until);
  if (valid.some((s) => s.secret !== undefined && given.has(signer.sign(s.secret, r)))) return null;
  // A secret valid then that the history never saw (an unanswered rotation): not checkable, not a violation.
  if (valid.some((s) => s.secret === undefined)) return null;
  const stale = spans.find((s) => s.secret !== undefined && !valid.includes(s) && given.has(signer.sign(s.secret, r)));
  if (stale) return `${what} is signed only with ${stale.label}, valid until ${iso(stale.until)}`;
  return `${what} carries no signature by a secret valid then (webhook-signature "${r.signature.slice(0, 40)}")`;
}

/**
 * Signatures: every receipt of a known subscription carries a Standard Webhooks signature by a
 * secret valid at its arrival, and a timestamp within 5 minutes of it. Checked: those receipts.
 */
export function checkSignatures(run: Run, tls: Map<string, Timeline>): PromiseResult {
  const tally = new Tally('signatures');
  const signer = new Signer();
  const spans = new Map<string, SecretSpan[]>();
  for (const tl of tls.values()) if (tl.created) spans.set(tl.id, secretSpans(tl, run.meta.inFlightBoundMs));
  for (const r of run.receipts) {
    const own = spans.get(r.sub);
    if (!own) continue;
    tally.checked++;
    const problem = signatureProblem(r, own, signer);
    if (problem) tally.fail(problem);
  }
  return tally.result();
}
