import { useState } from 'preact/hooks';
import { type Session, signIn } from '../api';
import { ErrorNote, PageTitle, useAction } from '../ui';

/**
 * Signing in: an operator's one-time link signs in by itself (GET /portal/login, then here with a
 * session); without one, an API key of the account, sent once to POST /portal/session and then
 * dropped: the form is cleared and nothing is written to storage.
 */
export function SignIn({ linkFailed, onSignedIn }: { linkFailed: boolean; onSignedIn: (session: Session) => void }) {
  const [key, setKey] = useState('');
  const action = useAction();
  const submit = async (event: Event) => {
    event.preventDefault();
    const session = await action.run(() => signIn(key.trim()));
    setKey('');
    if (session) onSignedIn(session);
  };
  return (
    <main id="main" class="sign-in">
      <PageTitle>Sign in to the customer portal</PageTitle>
      {linkFailed && (
        <div class="error" role="alert">
          <p>
            <strong>This sign-in link cannot be used.</strong> It has expired or was already used: each link works once. Ask your operator
            for a new link, or sign in with one of your API keys.
          </p>
        </div>
      )}
      <form onSubmit={submit}>
        <label for="api-key">API key</label>
        <input
          id="api-key"
          name="api_key"
          type="password"
          autocomplete="off"
          spellcheck={false}
          required
          value={key}
          onInput={(e) => setKey(e.currentTarget.value)}
          aria-describedby="api-key-help"
        />
        <p id="api-key-help" class="muted">
          The key is sent once to start a session and is not kept in this browser.
        </p>
        <button type="submit" disabled={action.busy}>
          Sign in
        </button>
      </form>
      <ErrorNote error={action.error} />
    </main>
  );
}
