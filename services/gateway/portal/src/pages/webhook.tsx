import { useState } from 'preact/hooks';
import { data } from '../api';
import { navigate } from '../router';
import { ErrorNote, Link, Loading, Notice, PageTitle, ShownOnce, useAction, useResource, when } from '../ui';
import { DeliveryLog } from './deliveries';
import { Recover } from './recover';
import { type Subscription, type WebhookBody, WebhookForm } from './webhook-form';

/** One subscription: edit it, send a test, rotate its secret, recover a window, delete it, and its delivery log. */

function Edit({ sub, onSaved }: { sub: Subscription; onSaved: () => Promise<void> }) {
  const action = useAction();
  const [saved, setSaved] = useState(false);
  const submit = async (body: WebhookBody) => {
    setSaved(false);
    if (await action.run(() => data('PATCH', `/v1/webhooks/${sub.id}`, body))) {
      await onSaved();
      setSaved(true);
    }
  };
  return (
    <section class="card" aria-labelledby="edit-title">
      <h2 id="edit-title">Settings</h2>
      <WebhookForm id="edit" initial={sub} submitLabel="Save changes" busy={action.busy} error={action.error} onSubmit={submit} />
      {saved && <Notice>Changes saved.</Notice>}
    </section>
  );
}

function Rotate({ sub, onRotated }: { sub: Subscription; onRotated: () => Promise<void> }) {
  const [overlap, setOverlap] = useState('0');
  const [secret, setSecret] = useState<string | undefined>(undefined);
  const action = useAction();
  const submit = async (event: Event) => {
    event.preventDefault();
    const path = `/v1/webhooks/${sub.id}/rotate-secret`;
    const rotated = await action.run(() => data<Subscription>('POST', path, { overlap_seconds: Number(overlap) }));
    if (rotated) {
      setSecret(rotated.secret);
      await onRotated();
    }
  };
  return (
    <section class="card" aria-labelledby="rotate-title">
      <h2 id="rotate-title">Rotate the signing secret</h2>
      <form onSubmit={submit}>
        <label for="rotate-overlap">Seconds the old secret still signs too (0–604800)</label>
        <input
          id="rotate-overlap"
          type="number"
          min={0}
          max={604800}
          required
          value={overlap}
          onInput={(e) => setOverlap(e.currentTarget.value)}
        />
        <button type="submit" disabled={action.busy}>
          Rotate secret
        </button>
        <ErrorNote error={action.error} />
      </form>
      {secret && <ShownOnce label="The new signing secret" secret={secret} onDone={() => setSecret(undefined)} />}
    </section>
  );
}

function Remove({ sub }: { sub: Subscription }) {
  const [asked, setAsked] = useState(false);
  const action = useAction();
  const remove = async () => {
    const done = await action.run(async () => {
      await data('DELETE', `/v1/webhooks/${sub.id}`);
      return true;
    });
    if (done) navigate('/portal/webhooks');
  };
  return (
    <section class="card" aria-labelledby="delete-title">
      <h2 id="delete-title">Delete this webhook</h2>
      <button type="button" class="secondary" aria-expanded={asked} onClick={() => setAsked(!asked)}>
        Delete…
      </button>
      {asked && (
        <div class="confirm">
          <p>Delete the webhook to {sub.url}? Nothing more is sent to it and its delivery log is gone.</p>
          <button type="button" class="danger" onClick={remove} disabled={action.busy}>
            Yes, delete it
          </button>
        </div>
      )}
      <ErrorNote error={action.error} />
    </section>
  );
}

function Facts({ sub }: { sub: Subscription }) {
  return (
    <dl class="facts">
      <dt>Id</dt>
      <dd>
        <code>{sub.id}</code>
      </dd>
      <dt>State</dt>
      <dd>{sub.is_active ? 'active' : `inactive (${sub.deactivation_reason ?? 'manual'})`}</dd>
      <dt>Secret</dt>
      <dd>
        <code>{sub.secret}</code>
        {sub.secret_rotation_ends_at && ` (the previous one signs too until ${when(sub.secret_rotation_ends_at)})`}
      </dd>
      <dt>Created</dt>
      <dd>{when(sub.created_at)}</dd>
    </dl>
  );
}

export function WebhookPage({ id }: { id: string }) {
  const sub = useResource<Subscription>(`/v1/webhooks/${encodeURIComponent(id)}`);
  const [logVersion, setLogVersion] = useState(0);
  const refreshLog = () => setLogVersion((v) => v + 1);
  return (
    <>
      <p>
        <Link href="/portal/webhooks">← All webhooks</Link>
      </p>
      <PageTitle>Webhook {sub.value ? sub.value.url : ''}</PageTitle>
      <ErrorNote error={sub.error} />
      {!sub.value && !sub.error && <Loading what="the webhook" />}
      {sub.value && (
        <>
          <Facts sub={sub.value} />
          <DeliveryLog id={sub.value.id} version={logVersion} refresh={refreshLog} />
          <Edit key={sub.value.url + String(sub.value.is_active)} sub={sub.value} onSaved={sub.reload} />
          <Recover id={sub.value.id} onRecovered={refreshLog} />
          <Rotate sub={sub.value} onRotated={sub.reload} />
          <Remove sub={sub.value} />
        </>
      )}
    </>
  );
}
