import { startsTooLate } from '@fcd/webhooks/pure';

/**
 * The start bound of a rate-limited delivery (ADR 0014, amendment of 2026-11-28), checked where
 * the request is written: the sender asks the gate once its connection is up, so the time a new
 * connection takes (TCP and TLS, tens of ms, more under load) counts towards the bound like the
 * claim's own delay. A send stopped there is given back unsent and its connection stays in the
 * pool, so the next claim of the subscription, a pacing slot later, finds it warm.
 *
 * One rule keeps every subscription moving: after a send of a subscription was stopped at the
 * gate, the next send of that subscription (on this replica) is not gated there, only before the
 * send. A receiver that keeps connections alive loses one slot; one that closes each connection
 * behind a slow handshake is still delivered to, every other slot, rather than never.
 */
export class StartGates {
  /** Subscriptions whose last send on this replica was stopped at the gate. */
  private readonly stopped = new Set<string>();

  /** Entries kept at most; past this the memory starts over (each entry only relaxes one gate). */
  constructor(private readonly maxEntries = 10_000) {}

  /** The gate for a send of `subscriptionId` bound by `startBy` (null: no rate limit, no gate). */
  gate(subscriptionId: string, startBy: number | null, now: () => number): (() => boolean) | undefined {
    if (startBy === null || this.stopped.has(subscriptionId)) return undefined;
    return () => !startsTooLate(startBy, now());
  }

  /** A send of the subscription ended: stopped at the gate, or sent (with any outcome). */
  settled(subscriptionId: string, stoppedAtGate: boolean): void {
    if (!stoppedAtGate) {
      this.stopped.delete(subscriptionId);
      return;
    }
    if (this.stopped.size >= this.maxEntries) this.stopped.clear();
    this.stopped.add(subscriptionId);
  }
}
