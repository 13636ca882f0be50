import { type Static, type TObject, Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { backendSettingsProblems } from './backends';
import { httpServerSettingsProblems } from './http-server';

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration: ${problems.join('; ')}`);
    this.name = 'ConfigError';
  }
}

/**
 * Parses environment variables once through one TypeBox schema: defaults are
 * applied, strings converted to numbers/booleans, every problem reported at
 * once, and the result frozen.
 */
export function parseConfig<T extends TObject>(schema: T, env: Record<string, string | undefined> = process.env): Readonly<Static<T>> {
  const input: Record<string, unknown> = {};
  for (const key of Object.keys(schema.properties)) {
    const raw = env[key];
    if (raw !== undefined && raw !== '') input[key] = raw;
  }
  const withDefaults = Value.Default(schema, input);
  const converted = Value.Convert(schema, withDefaults);
  const problems = [...Value.Errors(schema, converted)].map((e) => {
    const name = e.path.replace(/^\//, '') || '(root)';
    return `${name}: ${e.message}`;
  });
  if (problems.length === 0) {
    problems.push(...httpServerSettingsProblems(converted as Record<string, unknown>));
    problems.push(...backendSettingsProblems(converted as Record<string, unknown>));
  }
  if (problems.length > 0) throw new ConfigError([...new Set(problems)]);
  return Object.freeze(converted as Static<T>);
}

/** For main.ts: parse, or print one clear line and exit 1. */
export function loadConfigOrExit<T extends TObject>(service: string, schema: T): Readonly<Static<T>> {
  try {
    return parseConfig(schema);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${service}: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
}

/** Common schema fragments. */
export const Env = {
  port: (def: number) => Type.Integer({ minimum: 0, maximum: 65535, default: def }),
  url: (def?: string) => Type.String({ pattern: '^[a-z][a-z0-9+.-]*://', ...(def === undefined ? {} : { default: def }) }),
  secret: () => Type.String({ minLength: 32 }),
  logLevel: () =>
    Type.Union(
      ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
      { default: 'info' },
    ),
  bool: (def: boolean) => Type.Boolean({ default: def }),
  int: (def: number, min = 0, max = Number.MAX_SAFE_INTEGER) => Type.Integer({ default: def, minimum: min, maximum: max }),
};
