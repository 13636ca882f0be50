import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { currentSession, type Session, SIGNED_OUT, signOut } from './api';
import { EventsPage } from './pages/events';
import { KeysPage } from './pages/keys';
import { SignIn } from './pages/sign-in';
import { UsagePage } from './pages/usage';
import { WebhookPage } from './pages/webhook';
import { WebhooksPage } from './pages/webhooks';
import { navigate, replace, useLocation } from './router';
import { ErrorNote, Link, Loading, useAction } from './ui';

/** The customer portal (docs/portal.md): the session, the frame and the page of the current path. */

const NAV = [
  { href: '/portal/usage', label: 'Usage' },
  { href: '/portal/keys', label: 'API keys' },
  { href: '/portal/webhooks', label: 'Webhooks' },
  { href: '/portal/events', label: 'Events' },
];

function Page({ path, session }: { path: string; session: Session }) {
  const route = path.split('?')[0] as string;
  const webhook = /^\/portal\/webhooks\/([^/]+)$/.exec(route);
  if (webhook) return <WebhookPage id={decodeURIComponent(webhook[1] as string)} />;
  if (route === '/portal/keys') return <KeysPage />;
  if (route === '/portal/webhooks') return <WebhooksPage tier={session.tier} />;
  if (route === '/portal/events') return <EventsPage />;
  return <UsagePage />;
}

/** One page per path; /portal/ is the usage page (and becomes /portal/usage without a new page). */
const pageKey = (path: string) => (/^\/portal\/?$/.test(path.split('?')[0] as string) ? '/portal/usage' : path.split('?')[0]);

function Frame({ session, path, onSignedOut }: { session: Session; path: string; onSignedOut: () => void }) {
  const action = useAction();
  const leave = async () => {
    const done = await action.run(async () => {
      await signOut();
      return true;
    });
    if (done) {
      navigate('/portal/');
      onSignedOut();
    }
  };
  return (
    <>
      <a class="skip" href="#main">
        Skip to the page
      </a>
      <header class="top">
        <p class="brand">Facility Compliance Data — customer portal</p>
        <p class="account">
          Account <code>{session.account_id}</code> · <span class="tier">{session.tier}</span>
        </p>
        <button type="button" class="secondary" onClick={leave} disabled={action.busy}>
          Sign out
        </button>
      </header>
      <nav aria-label="Portal">
        <ul>
          {NAV.map((item) => (
            <li key={item.href}>
              <Link href={item.href} current={path === item.href || path.startsWith(`${item.href}/`)}>
                {item.label}
              </Link>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main">
        <ErrorNote error={action.error} />
        <Page key={pageKey(path)} path={path} session={session} />
      </main>
    </>
  );
}

const linkRefused = () => new URLSearchParams(location.search).get('error') === 'link';

function App() {
  const path = useLocation();
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const [failed, setFailed] = useState<string | undefined>(undefined);
  useEffect(() => {
    // Back from a refused sign-in link (GET /portal/login answered /portal/?error=link): that link
    // started no session, so the page offers the other way in without asking the server.
    if (linkRefused()) setSession(null);
    else currentSession().then(setSession, (e: Error) => setFailed(e.message));
    const ended = () => setSession(null);
    window.addEventListener(SIGNED_OUT, ended);
    return () => window.removeEventListener(SIGNED_OUT, ended);
  }, []);
  useEffect(() => {
    if (session && (path === '/portal' || path === '/portal/')) replace('/portal/usage');
  }, [session, path]);
  if (failed)
    return (
      <main id="main">
        <p role="alert">The portal could not start: {failed}</p>
      </main>
    );
  if (session === undefined)
    return (
      <main id="main">
        <Loading what="your session" />
      </main>
    );
  if (session === null) {
    return (
      <SignIn
        linkFailed={linkRefused()}
        onSignedIn={(s) => {
          setSession(s);
          navigate('/portal/usage');
        }}
      />
    );
  }
  return <Frame session={session} path={path} onSignedOut={() => setSession(null)} />;
}

const root = document.getElementById('app');
if (root) render(<App />, root);
