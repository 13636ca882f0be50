import { CliUsageError, parseCliArgs } from '@fcd/service-kit';
import { RECORD_KINDS, type RecordKind } from '../domain/records';

/** Every option of every facility command (one parser, strict: an unknown option is a usage error). */
const OPTIONS = {
  json: { type: 'boolean' },
  kind: { type: 'string' },
  facilities: { type: 'string' },
  seed: { type: 'string' },
  'as-of': { type: 'string' },
  out: { type: 'string' },
  format: { type: 'string' },
  rate: { type: 'string' },
  duration: { type: 'string' },
  from: { type: 'string' },
  only: { type: 'string' },
  'dry-run': { type: 'boolean' },
  'emit-events': { type: 'boolean' },
  'rejected-rows-ok': { type: 'boolean' },
  'retry-for': { type: 'string' },
} as const;

type Values = ReturnType<typeof parseCliArgs<typeof OPTIONS>>['values'];
type StringOption = { [K in keyof Values]-?: Values[K] extends string | undefined ? K : never }[keyof Values];
type BooleanOption = Exclude<keyof Values, StringOption>;

/** The parsed command line of one facility command. */
export interface Args {
  positional: string[];
  flag(name: StringOption): string | undefined;
  has(name: BooleanOption): boolean;
}

export function parseFacilityArgs(argv: string[]): Args {
  const { positionals, values } = parseCliArgs(argv, OPTIONS);
  return {
    positional: positionals,
    flag: (name) => values[name] as string | undefined,
    has: (name) => values[name] === true,
  };
}

export function positiveInt(value: string | undefined, name: string): number {
  const n = Number(value);
  if (value === undefined || !Number.isInteger(n) || n < 1) throw new CliUsageError(`--${name} must be a positive integer`);
  return n;
}

export function kindOf(value: string | undefined): RecordKind {
  if (!value || !RECORD_KINDS.includes(value as RecordKind)) throw new CliUsageError(`--kind must be one of ${RECORD_KINDS.join(', ')}`);
  return value as RecordKind;
}
