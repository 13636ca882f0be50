import type { Timer } from './wakeable-sleep';

/** One timer a `manualTimer` was asked for: `fire` runs its callback, `cancelled` once cancelled. */
interface ManualTimerEntry {
  ms: number;
  fire: () => void;
  cancelled: boolean;
}

/**
 * A `Timer` for tests, the timer twin of `ManualClock`: nothing fires until the test says so.
 * `timers` holds every timer asked for, in order; `live()` those not cancelled; `fireNext()` fires
 * the oldest live one (returning its delay) and `fireAll()` every live one.
 */
export function manualTimer() {
  const timers: ManualTimerEntry[] = [];
  const timer: Timer = (ms, fire) => {
    const t = { ms, fire, cancelled: false };
    timers.push(t);
    return () => {
      t.cancelled = true;
    };
  };
  const live = () => timers.filter((t) => !t.cancelled);
  const fireNext = () => {
    const t = live()[0];
    if (!t) throw new Error('no timer pending');
    t.cancelled = true;
    t.fire();
    return t.ms;
  };
  const fireAll = () => {
    for (const t of live()) {
      t.cancelled = true;
      t.fire();
    }
  };
  return { timer, timers, live, fireNext, fireAll };
}
