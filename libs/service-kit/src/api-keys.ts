/**
 * The rules of an account's own API keys (docs/api.md, "API keys"), defined once: the gateway's
 * route schemas and checks, and the usage service's, which applies them again for every caller
 * (the gateway, the admin API, the CLI).
 */

/** Live keys an account may hold at once: one more is 409 LIMIT_REACHED (a roll may exceed it by the key it replaces). */
export const MAX_LIVE_KEYS = 10;

/** How long a rolled key's old half may keep working, in seconds: 0 to 7 days. */
export const MAX_ROLL_SECONDS = 604_800;

/** A key's name is 1 to this many characters. */
export const MAX_KEY_NAME_LENGTH = 100;

/** What is wrong with a key's name, or undefined: not only white space, at most 100 characters, no control characters. */
export function keyNameProblem(name: string): string | undefined {
  if (name.trim().length === 0) return 'must not be empty';
  if (name.length > MAX_KEY_NAME_LENGTH) return `must be at most ${MAX_KEY_NAME_LENGTH} characters`;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (/[\u0000-\u001f\u007f]/.test(name)) return 'must not contain control characters';
  return undefined;
}
