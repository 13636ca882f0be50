import { useEffect, useState } from 'preact/hooks';

/**
 * The portal's routes are real paths under /portal/ (the gateway serves the page for each:
 * src/portal/static.ts PAGE_PATHS); links change them with the History API.
 */
const NAVIGATED = 'portal:navigated';
let moved = false;

export function navigate(path: string): void {
  if (path === location.pathname + location.search) return;
  moved = true;
  history.pushState(null, '', path);
  window.dispatchEvent(new Event(NAVIGATED));
}

/** Replaces the current path (no history entry, no focus move): /portal/ becomes /portal/usage. */
export function replace(path: string): void {
  history.replaceState(null, '', path);
  window.dispatchEvent(new Event(NAVIGATED));
}

/** True once the page changed without a load (a link or the back button): focus then moves to the new page's heading. */
export function hasNavigated(): boolean {
  return moved;
}

/** The current path (and query), following links and the back button. */
export function useLocation(): string {
  const [path, setPath] = useState(location.pathname + location.search);
  useEffect(() => {
    const update = () => setPath(location.pathname + location.search);
    const back = () => {
      moved = true;
      update();
    };
    window.addEventListener('popstate', back);
    window.addEventListener(NAVIGATED, update);
    return () => {
      window.removeEventListener('popstate', back);
      window.removeEventListener(NAVIGATED, update);
    };
  }, []);
  return path;
}

/** A click on a link that the page handles itself (not a new tab, not a modified click). */
export function followLink(event: MouseEvent, href: string): void {
  if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  event.preventDefault();
  navigate(href);
}
