import { useState } from 'preact/hooks';
import { data } from '../api';
import { ErrorNote, Link, Loading, PageTitle, ShownOnce, useAction, useResource } from '../ui';
import { type Subscription, type WebhookBody, WebhookForm } from './webhook-form';

/** GET and POST /v1/webhooks: the account's subscriptions and a new one (docs/webhooks.md). */

function WebhookItem({ sub }: { sub: Subscription }) {
  return (
    <li class="item" data-testid="webhook-item">
      <h3>
        <Link href={`/portal/webhooks/${sub.id}`}>{sub.url}</Link>{' '}
        <span class={`badge ${sub.is_active ? 'live' : 'revoked'}`}>{sub.is_active ? 'active' : 'inactive'}</span>
      </h3>
      <p>
        {sub.events.join(', ')} · {sub.facility_ids ? `${sub.facility_ids.length} facilities` : 'every facility'}
      </p>
    </li>
  );
}

function Create({ onCreated }: { onCreated: (sub: Subscription) => void }) {
  const action = useAction();
  const [generation, setGeneration] = useState(0);
  const submit = async (body: WebhookBody) => {
    const created = await action.run(() => data<Subscription>('POST', '/v1/webhooks', body));
    if (created) {
      setGeneration(generation + 1);
      onCreated(created);
    }
  };
  return (
    <section class="card" aria-labelledby="create-webhook-title">
      <h2 id="create-webhook-title">Create a webhook</h2>
      <WebhookForm key={generation} id="create" submitLabel="Create webhook" busy={action.busy} error={action.error} onSubmit={submit} />
    </section>
  );
}

export function WebhooksPage({ tier }: { tier: string }) {
  const list = useResource<Subscription[]>('/v1/webhooks?limit=100');
  const [created, setCreated] = useState<Subscription | undefined>(undefined);
  const onCreated = async (sub: Subscription) => {
    setCreated(sub);
    await list.reload();
  };
  if (list.error?.code === 'FORBIDDEN') {
    return (
      <>
        <PageTitle>Webhooks</PageTitle>
        <p>
          Webhooks come with the Pro tier; this account is on <strong>{tier}</strong>. The <Link href="/portal/events">event log</Link> has
          the same events to poll on every tier.
        </p>
      </>
    );
  }
  return (
    <>
      <PageTitle>Webhooks</PageTitle>
      {created && <ShownOnce label={`Signing secret of ${created.url}`} secret={created.secret} onDone={() => setCreated(undefined)} />}
      <section aria-labelledby="webhooks-title">
        <h2 id="webhooks-title">Your webhooks</h2>
        <ErrorNote error={list.error} />
        {!list.value && !list.error && <Loading what="webhooks" />}
        {list.value?.length === 0 && <p>No webhooks yet.</p>}
        <ul class="list">
          {list.value?.map((sub) => (
            <WebhookItem key={sub.id} sub={sub} />
          ))}
        </ul>
      </section>
      <Create onCreated={onCreated} />
    </>
  );
}
