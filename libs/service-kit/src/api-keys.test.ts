import { describe, expect, it } from 'vitest';
import { keyNameProblem, MAX_KEY_NAME_LENGTH, MAX_LIVE_KEYS, MAX_ROLL_SECONDS } from './api-keys';

describe('API key rules', () => {
  it('are the documented limits', () => {
    expect([MAX_LIVE_KEYS, MAX_ROLL_SECONDS, MAX_KEY_NAME_LENGTH]).toEqual([10, 7 * 86_400, 100]);
  });

  it('take a name of 1 to 100 characters, not only white space, without control characters', () => {
    for (const ok of ['ci', ' production ', 'é'.repeat(100), 'a b']) expect(keyNameProblem(ok)).toBeUndefined();
    expect(keyNameProblem('')).toBe('must not be empty');
    expect(keyNameProblem(' \t ')).toBe('must not be empty');
    expect(keyNameProblem('x'.repeat(101))).toBe('must be at most 100 characters');
    for (const bad of ['a\nb', 'a\u0000', 'tab\there', '\u007f']) expect(keyNameProblem(bad)).toBe('must not contain control characters');
  });
});
