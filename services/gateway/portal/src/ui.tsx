import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useId, useRef, useState } from 'preact/hooks';
import { ApiError, data } from './api';
import { followLink, hasNavigated } from './router';

/** The shared pieces of the pages: loading a resource, errors, notices, a secret shown once. */

export interface Loaded<T> {
  value: T | undefined;
  error: ApiError | undefined;
  reload: () => Promise<void>;
}

const asApiError = (error: unknown) =>
  error instanceof ApiError ? error : new ApiError(0, 'CLIENT', error instanceof Error ? error.message : String(error));

/** GETs `path` now and on reload(); the `data` of the answer. */
export function useResource<T>(path: string): Loaded<T> {
  const [value, setValue] = useState<T | undefined>(undefined);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const reload = useCallback(async () => {
    try {
      setValue(await data<T>('GET', path));
      setError(undefined);
    } catch (e) {
      setError(asApiError(e));
    }
  }, [path]);
  useEffect(() => {
    setValue(undefined);
    void reload();
  }, [reload]);
  return { value, error, reload };
}

/** Runs an action; `busy` while it runs, `error` when it failed. */
export function useAction(): {
  busy: boolean;
  error: ApiError | undefined;
  run: <T>(action: () => Promise<T>) => Promise<T | undefined>;
} {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const run = useCallback(async <T,>(action: () => Promise<T>) => {
    setBusy(true);
    setError(undefined);
    try {
      return await action();
    } catch (e) {
      setError(asApiError(e));
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run };
}

/** An error of the API, announced to screen readers; field problems listed. */
export function ErrorNote({ error }: { error: ApiError | undefined }) {
  if (!error) return null;
  const fields = (error.details as { fields?: { field: string; message: string }[] } | undefined)?.fields ?? [];
  return (
    <div class="error" role="alert">
      <p>
        <strong>{error.code === 'NETWORK' ? 'Connection problem' : 'Not done'}:</strong> {error.message}
      </p>
      {fields.length > 0 && (
        <ul>
          {fields.map((f) => (
            <li key={f.field}>
              <code>{f.field}</code>: {f.message}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p class="muted" role="status">
      Loading {what}…
    </p>
  );
}

/** A polite announcement of what an action did. */
export function Notice({ children }: { children: ComponentChildren }) {
  return (
    <p class="notice" role="status">
      {children}
    </p>
  );
}

/** A new key or signing secret, shown once: it lives in this component's state only, and is gone with it. */
export function ShownOnce({ label, secret, onDone }: { label: string; secret: string; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  const box = useRef<HTMLElement>(null);
  const title = useId();
  useEffect(() => box.current?.focus(), []);
  const copy = async () => {
    await navigator.clipboard.writeText(secret).then(
      () => setCopied(true),
      () => setCopied(false),
    );
  };
  return (
    <section class="shown-once" tabIndex={-1} ref={box} aria-labelledby={title}>
      <h3 id={title}>{label}</h3>
      <p>Copy it now: it is shown only this once and is not stored in this browser.</p>
      <p>
        <code class="secret" data-testid="secret">
          {secret}
        </code>
      </p>
      <div class="actions">
        <button type="button" onClick={copy}>
          Copy
        </button>
        <button type="button" class="secondary" onClick={onDone}>
          Done, hide it
        </button>
      </div>
      {copied && <Notice>Copied to the clipboard.</Notice>}
    </section>
  );
}

export function Link({ href, children, current }: { href: string; children: ComponentChildren; current?: boolean }) {
  return (
    <a href={href} aria-current={current ? 'page' : undefined} onClick={(e) => followLink(e, href)}>
      {children}
    </a>
  );
}

/**
 * The page's heading. After a change of page within the portal it takes the focus, so keyboard
 * and screen-reader users start on the new page; on a load the focus stays at the document's
 * start (the skip link is the first Tab). The document's title follows it.
 */
export function PageTitle({ children }: { children: ComponentChildren }) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    if (hasNavigated()) heading.current?.focus();
  }, []);
  // The document's title names the page too (and follows the heading, e.g. a webhook's URL once loaded).
  useEffect(() => {
    document.title = `${heading.current?.textContent ?? ''} — Customer portal`;
  });
  return (
    <h1 tabIndex={-1} ref={heading}>
      {children}
    </h1>
  );
}

/** `2026-11-28 07:05 UTC`, or a dash for none. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

export const count = (n: number) => n.toLocaleString('en-US');
