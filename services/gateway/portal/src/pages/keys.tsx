import { useState } from 'preact/hooks';
import { data } from '../api';
import { ErrorNote, Loading, Notice, PageTitle, ShownOnce, useAction, useResource, when } from '../ui';

/** /v1/account/keys: create, rename, roll and revoke the account's API keys (docs/api.md, "API keys"). */

interface Key {
  id: string;
  name: string;
  prefix: string | null;
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
  revoked_at: string | null;
}

const OVERLAPS = [
  { seconds: 0, label: 'Stop the old key now' },
  { seconds: 3600, label: 'Keep the old key 1 hour' },
  { seconds: 86_400, label: 'Keep the old key 1 day' },
  { seconds: 604_800, label: 'Keep the old key 7 days' },
];

const stateOf = (key: Key) =>
  key.revoked_at ? 'revoked' : key.expires_at && Date.parse(key.expires_at) <= Date.now() ? 'expired' : 'live';

const LIFETIMES = [
  { days: 0, label: 'Never' },
  { days: 30, label: 'In 30 days' },
  { days: 90, label: 'In 90 days' },
  { days: 365, label: 'In a year' },
];

function CreateKey({ onCreated }: { onCreated: (key: Key & { key: string }) => void }) {
  const [name, setName] = useState('');
  const [days, setDays] = useState(0);
  const action = useAction();
  const submit = async (event: Event) => {
    event.preventDefault();
    const body = { name, ...(days > 0 ? { expires_at: new Date(Date.now() + days * 86_400_000).toISOString() } : {}) };
    const created = await action.run(() => data<Key & { key: string }>('POST', '/v1/account/keys', body));
    if (created) {
      setName('');
      setDays(0);
      onCreated(created);
    }
  };
  return (
    <form onSubmit={submit} aria-labelledby="create-key-title" class="card">
      <h2 id="create-key-title">Create a key</h2>
      <label for="key-name">Name</label>
      <input id="key-name" required maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} />
      <label for="key-expires">Expires</label>
      <select id="key-expires" value={days} onChange={(e) => setDays(Number(e.currentTarget.value))}>
        {LIFETIMES.map((l) => (
          <option key={l.days} value={l.days}>
            {l.label}
          </option>
        ))}
      </select>
      <button type="submit" disabled={action.busy}>
        Create key
      </button>
      <ErrorNote error={action.error} />
    </form>
  );
}

function Rename({ apiKey, onDone }: { apiKey: Key; onDone: () => void }) {
  const [name, setName] = useState(apiKey.name);
  const action = useAction();
  const submit = async (event: Event) => {
    event.preventDefault();
    if (await action.run(() => data('PATCH', `/v1/account/keys/${apiKey.id}`, { name }))) onDone();
  };
  return (
    <form onSubmit={submit} class="inline">
      <label for={`rename-${apiKey.id}`}>New name for {apiKey.name}</label>
      <input id={`rename-${apiKey.id}`} required maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} />
      <button type="submit" disabled={action.busy}>
        Save name
      </button>
      <ErrorNote error={action.error} />
    </form>
  );
}

function Roll({ apiKey, onRolled }: { apiKey: Key; onRolled: (key: Key & { key: string }) => void }) {
  const [overlap, setOverlap] = useState(3600);
  const action = useAction();
  const submit = async (event: Event) => {
    event.preventDefault();
    const path = `/v1/account/keys/${apiKey.id}/roll`;
    const rolled = await action.run(() => data<Key & { key: string }>('POST', path, { expires_in_seconds: overlap }));
    if (rolled) onRolled(rolled);
  };
  return (
    <form onSubmit={submit} class="inline">
      <label for={`overlap-${apiKey.id}`}>When the new key is made</label>
      <select id={`overlap-${apiKey.id}`} value={overlap} onChange={(e) => setOverlap(Number(e.currentTarget.value))}>
        {OVERLAPS.map((o) => (
          <option key={o.seconds} value={o.seconds}>
            {o.label}
          </option>
        ))}
      </select>
      <button type="submit" disabled={action.busy}>
        Roll {apiKey.name}
      </button>
      <ErrorNote error={action.error} />
    </form>
  );
}

function Revoke({ apiKey, onRevoked }: { apiKey: Key; onRevoked: () => void }) {
  const action = useAction();
  const revoke = async () => {
    const done = await action.run(async () => {
      await data('DELETE', `/v1/account/keys/${apiKey.id}`);
      return true;
    });
    if (done) onRevoked();
  };
  return (
    <div class="inline confirm">
      <p>Revoke {apiKey.name}? Requests with it are refused within seconds. This cannot be undone.</p>
      <button type="button" class="danger" onClick={revoke} disabled={action.busy}>
        Yes, revoke {apiKey.name}
      </button>
      <ErrorNote error={action.error} />
    </div>
  );
}

type Open = 'rename' | 'roll' | 'revoke' | undefined;

function KeyItem({ apiKey, reload, onSecret }: { apiKey: Key; reload: () => Promise<void>; onSecret: (k: Key & { key: string }) => void }) {
  const [open, setOpen] = useState<Open>(undefined);
  const state = stateOf(apiKey);
  const toggle = (what: Open) => setOpen(open === what ? undefined : what);
  const done = async () => {
    setOpen(undefined);
    await reload();
  };
  return (
    <li class="item" data-testid="key-item" data-key-id={apiKey.id}>
      <h3>
        {apiKey.name} <span class={`badge ${state}`}>{state}</span>
      </h3>
      <dl class="facts">
        <dt>Starts with</dt>
        <dd>
          <code>{apiKey.prefix ?? '—'}</code>
        </dd>
        <dt>Created</dt>
        <dd>{when(apiKey.created_at)}</dd>
        <dt>Last used</dt>
        <dd>{when(apiKey.last_used_at)}</dd>
        <dt>{apiKey.revoked_at ? 'Revoked' : 'Expires'}</dt>
        <dd>{apiKey.revoked_at ? when(apiKey.revoked_at) : apiKey.expires_at ? when(apiKey.expires_at) : 'never'}</dd>
      </dl>
      {state === 'live' && (
        <div class="actions">
          {(['rename', 'roll', 'revoke'] as const).map((what) => (
            <button key={what} type="button" class="secondary" aria-expanded={open === what} onClick={() => toggle(what)}>
              {{ rename: 'Rename', roll: 'Roll', revoke: 'Revoke' }[what]}
            </button>
          ))}
        </div>
      )}
      {open === 'rename' && <Rename apiKey={apiKey} onDone={done} />}
      {open === 'roll' && <Roll apiKey={apiKey} onRolled={(k) => done().then(() => onSecret(k))} />}
      {open === 'revoke' && <Revoke apiKey={apiKey} onRevoked={done} />}
    </li>
  );
}

export function KeysPage() {
  const keys = useResource<Key[]>('/v1/account/keys');
  const [fresh, setFresh] = useState<(Key & { key: string; previous?: Key }) | undefined>(undefined);
  const shown = async (k: Key & { key: string }) => {
    setFresh(k);
    await keys.reload();
  };
  return (
    <>
      <PageTitle>API keys</PageTitle>
      <p>Each key works for the whole account and draws on the same daily limit. At most 10 keys can be live at once.</p>
      {fresh && <ShownOnce label={`Your new key “${fresh.name}”`} secret={fresh.key} onDone={() => setFresh(undefined)} />}
      {fresh && (
        <Notice>
          {fresh.previous
            ? `Key ${fresh.name} rolled: the old key ${fresh.previous.revoked_at ? 'is revoked' : `works until ${when(fresh.previous.expires_at)}`}.`
            : `Key ${fresh.name} created.`}
        </Notice>
      )}
      <CreateKey onCreated={shown} />
      <section aria-labelledby="keys-title">
        <h2 id="keys-title">Your keys</h2>
        <ErrorNote error={keys.error} />
        {!keys.value && !keys.error && <Loading what="keys" />}
        <ul class="list">
          {keys.value?.map((k) => (
            <KeyItem key={k.id} apiKey={k} reload={keys.reload} onSecret={shown} />
          ))}
        </ul>
      </section>
    </>
  );
}
