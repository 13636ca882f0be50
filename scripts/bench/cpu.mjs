// CPU time of the processes a benchmark starts, read from /proc (Linux): user + system time,
// the same figure for every process whatever it runs (a service, a bare baseline, a CLI).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

/** The fields of /proc/<pid>/stat after the command name (field 3, `state`, is index 0). */
function statFields(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** CPU seconds (user + system) a process has used so far (/proc/<pid>/stat utime + stime). */
export function cpuSeconds(pid) {
  const fields = statFields(pid);
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

/**
 * CPU seconds (user + system) used so far by this process's children that have exited and been
 * waited for (/proc/self/stat cutime + cstime): the CPU of a process run with execFileSync is the
 * difference of two readings around it.
 */
export function childrenCpuSeconds() {
  const fields = statFields('self');
  return (Number(fields[13]) + Number(fields[14])) / CLK_TCK;
}

/**
 * The machine's CPU time so far (/proc/stat, every core): `busy` (everything but idle and iowait)
 * and `total`, in clock ticks. The busy share of a window is the difference of two readings.
 */
export function machineCpu() {
  const [, ...ticks] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already inside user).
  const total = ticks.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: total - ticks[3] - ticks[4], total };
}

/** The busy share (0–1) of the machine's CPU between two `machineCpu` readings. */
export const busyShare = (from, to) => (to.busy - from.busy) / Math.max(1, to.total - from.total);

/** Microseconds of CPU per unit of work, rounded (0 units count as 1). */
export const usPerUnit = (seconds, units) => Math.round((seconds * 1e6) / Math.max(1, units));

/**
 * Accumulates the CPU seconds of named processes over measured windows:
 * `const w = meter.open(); …measured work…; meter.close(w)`; `meter.seconds(name)` is the total.
 * @param {Record<string, number>} pids process name → pid
 */
export function cpuMeter(pids) {
  const totals = Object.fromEntries(Object.keys(pids).map((name) => [name, 0]));
  const read = () => Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuSeconds(pid)]));
  return {
    open: read,
    close(from) {
      const to = read();
      for (const name of Object.keys(pids)) totals[name] += to[name] - from[name];
    },
    seconds: (name) => totals[name],
  };
}

/**
 * CPU seconds used so far by the Postgres backends serving database `dbName` (every connection of
 * every process to it, the bench's own included), by reading /proc for the pids pg_stat_activity
 * lists: `pool` may be connected to any database of the server. Backends that end between two
 * readings drop out of the second; the benchmarks keep their pools open throughout.
 * @returns {Promise<Map<number, number>>} pid → CPU seconds
 */
export async function postgresBackendsCpu(pool, dbName) {
  const { rows } = await pool.query('SELECT pid FROM pg_stat_activity WHERE datname = $1', [dbName]);
  const out = new Map();
  for (const { pid } of rows) {
    try {
      out.set(pid, cpuSeconds(pid));
    } catch {
      // The backend ended meanwhile.
    }
  }
  return out;
}

/** The CPU seconds the backends alive at `to` used since `from` (a backend new since `from` counts from 0). */
export function postgresCpuBetween(from, to) {
  let total = 0;
  for (const [pid, seconds] of to) total += seconds - (from.get(pid) ?? 0);
  return total;
}
