import { useMemo } from 'preact/hooks';
import { count, ErrorNote, Loading, PageTitle, useResource, when } from '../ui';
import { type Day, fillDays, last30Days, UsageChart, UsageTable } from './chart';

/** GET /v1/account/usage and GET /v1/account/usage/daily: the period's figures and the last 30 days. */

interface Usage {
  tier: string;
  daily_limit: number;
  today: { request_count: number; remaining: number; resets_at: string };
  billing_period: {
    start: string;
    end: string;
    total_requests: number;
    included_requests: number;
    overage_requests: number;
    overage_rate_usd: string;
    estimated_overage_usd: string;
  };
}

function Figures({ usage }: { usage: Usage }) {
  const period = usage.billing_period;
  return (
    <div class="cards">
      <section class="card" aria-labelledby="today-title">
        <h2 id="today-title">Today</h2>
        <dl>
          <dt>Requests</dt>
          <dd data-testid="today-requests">{count(usage.today.request_count)}</dd>
          <dt>Daily limit</dt>
          <dd>{usage.daily_limit > 0 ? count(usage.daily_limit) : 'none'}</dd>
          <dt>Remaining</dt>
          <dd>{count(usage.today.remaining)}</dd>
          <dt>Resets</dt>
          <dd>{when(usage.today.resets_at)}</dd>
        </dl>
      </section>
      <section class="card" aria-labelledby="period-title">
        <h2 id="period-title">
          Billing period {period.start} to {period.end}
        </h2>
        <dl>
          <dt>Requests</dt>
          <dd data-testid="period-requests">{count(period.total_requests)}</dd>
          <dt>Included</dt>
          <dd>{count(period.included_requests)}</dd>
          <dt>Overage</dt>
          <dd>{count(period.overage_requests)}</dd>
          <dt>Estimated overage charge</dt>
          <dd>
            US${period.estimated_overage_usd} (at US${period.overage_rate_usd} per request)
          </dd>
        </dl>
      </section>
    </div>
  );
}

function Daily() {
  const dates = useMemo(() => last30Days(new Date()), []);
  const daily = useResource<{ days: Day[] } | Day[]>(`/v1/account/usage/daily?from=${dates[0]}&to=${dates[dates.length - 1]}`);
  if (daily.error) return <ErrorNote error={daily.error} />;
  if (!daily.value) return <Loading what="the last 30 days" />;
  const days = fillDays(dates, daily.value);
  return (
    <>
      <UsageChart days={days} />
      <UsageTable days={days} />
    </>
  );
}

export function UsagePage() {
  const usage = useResource<Usage>('/v1/account/usage');
  return (
    <>
      <PageTitle>Usage</PageTitle>
      {usage.error && <ErrorNote error={usage.error} />}
      {!usage.value && !usage.error && <Loading what="usage" />}
      {usage.value && (
        <p>
          Tier <strong>{usage.value.tier}</strong>. Every request to <code>/v1</code> counts, whichever of the account's keys made it.
        </p>
      )}
      {usage.value && <Figures usage={usage.value} />}
      <section aria-labelledby="daily-title">
        <h2 id="daily-title">The last 30 days</h2>
        <Daily />
      </section>
    </>
  );
}
