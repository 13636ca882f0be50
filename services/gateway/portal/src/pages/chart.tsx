/** The 30-day chart: bars drawn as SVG by this component (no chart library, nothing from elsewhere). */

export interface Day {
  date: string;
  requests: number;
  included: number;
  overage: number;
}

const WIDTH = 720;
const HEIGHT = 240;
const LEFT = 56;
const BOTTOM = 28;
const TOP = 12;

/** A round upper bound for the axis: 1, 2 or 5 times a power of ten, at least 10 (so its half is a whole number). */
function axisMax(max: number): number {
  if (max <= 10) return 10;
  const power = 10 ** Math.floor(Math.log10(max));
  return ([1, 2, 5, 10].find((m) => m * power >= max) ?? 10) * power;
}

export function UsageChart({ days }: { days: Day[] }) {
  // The daily included line is drawn once the busiest day reaches half of it; below that it would flatten the bars.
  const peak = Math.max(...days.map((d) => d.requests));
  const limit = Math.max(...days.map((d) => d.included));
  const top = axisMax(peak >= limit / 2 ? Math.max(peak, limit) : peak);
  const within = (d: Day) => d.requests - d.overage;
  const plotHeight = HEIGHT - TOP - BOTTOM;
  const slot = (WIDTH - LEFT) / days.length;
  const y = (n: number) => TOP + plotHeight - (n / top) * plotHeight;
  const total = days.reduce((sum, d) => sum + d.requests, 0);
  const first = days[0]?.date ?? '';
  const last = days[days.length - 1]?.date ?? '';
  const ticks = [0, top / 2, top];
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-labelledby="chart-title chart-desc" data-testid="usage-chart">
        <title id="chart-title">
          Requests per day, {first} to {last}
        </title>
        <desc id="chart-desc">
          {total.toLocaleString('en-US')} requests over {days.length} days; the highest day had{' '}
          {Math.max(...days.map((d) => d.requests)).toLocaleString('en-US')}. Overage requests are drawn in a second colour above the
          included ones; a dashed line marks a day's included requests when the bars reach near it.
        </desc>
        {ticks.map((t) => (
          <g key={t} class="tick">
            <line x1={LEFT} x2={WIDTH} y1={y(t)} y2={y(t)} />
            <text x={LEFT - 6} y={y(t) + 4} text-anchor="end">
              {t.toLocaleString('en-US')}
            </text>
          </g>
        ))}
        {days.map((d, i) => (
          <g key={d.date} class="day" data-date={d.date}>
            <rect class="included" x={LEFT + i * slot + 1} width={Math.max(slot - 2, 1)} y={y(within(d))} height={y(0) - y(within(d))} />
            <rect
              class="overage"
              x={LEFT + i * slot + 1}
              width={Math.max(slot - 2, 1)}
              y={y(d.requests)}
              height={y(within(d)) - y(d.requests)}
            />
            {d.included > 0 && d.included <= top && (
              <line class="limit" x1={LEFT + i * slot} x2={LEFT + (i + 1) * slot} y1={y(d.included)} y2={y(d.included)} />
            )}
          </g>
        ))}
        <text class="axis-label" x={LEFT} y={HEIGHT - 8}>
          {first}
        </text>
        <text class="axis-label" x={WIDTH} y={HEIGHT - 8} text-anchor="end">
          {last}
        </text>
      </svg>
      <figcaption>
        <span class="key included-key">Included</span> <span class="key overage-key">Overage</span>{' '}
        <span class="key limit-key">Daily included requests</span>
      </figcaption>
    </figure>
  );
}

/** The same figures as a table, for screen readers and for reading exact numbers. */
export function UsageTable({ days }: { days: Day[] }) {
  return (
    <details>
      <summary>The figures of each day</summary>
      <table>
        <caption class="visually-hidden">Requests per day</caption>
        <thead>
          <tr>
            <th scope="col">Date</th>
            <th scope="col">Requests</th>
            <th scope="col">Included (daily)</th>
            <th scope="col">Overage</th>
          </tr>
        </thead>
        <tbody>
          {[...days].reverse().map((d) => (
            <tr key={d.date}>
              <th scope="row">{d.date}</th>
              <td>{d.requests.toLocaleString('en-US')}</td>
              <td>{d.included.toLocaleString('en-US')}</td>
              <td>{d.overage.toLocaleString('en-US')}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </details>
  );
}

/** The last 30 UTC dates ending today, oldest first. */
export function last30Days(today: Date): string[] {
  return Array.from({ length: 30 }, (_, i) => new Date(today.getTime() - (29 - i) * 86_400_000).toISOString().slice(0, 10));
}

/** Every one of `dates`, with zeros where the API returned no row (`data` is `{ from, to, days }`). */
export function fillDays(dates: string[], answer: { days: Day[] } | Day[]): Day[] {
  const rows = Array.isArray(answer) ? answer : answer.days;
  const byDate = new Map(rows.map((r) => [r.date, r]));
  return dates.map((date) => byDate.get(date) ?? { date, requests: 0, included: 0, overage: 0 });
}
