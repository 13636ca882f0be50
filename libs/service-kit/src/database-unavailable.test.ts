import { describe, expect, it } from 'vitest';
import { AppError } from './errors';
import { classifyDatabaseError, isDatabaseUnavailable } from './pg';

/** An error as pg or Node makes it: a message and, where they give one, a code. */
function error(message: string, code?: string, extra: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(message), code === undefined ? {} : { code }, extra);
}

describe('isDatabaseUnavailable: an outage or a retry (503), never a 500', () => {
  it.each([
    ['admin shutdown (pg_terminate_backend)', error('terminating connection due to administrator command', '57P01')],
    ['crash shutdown', error('terminating connection due to crash of another server process', '57P02')],
    ['cannot connect now', error('the database system is starting up', '57P03')],
    ['a connection exception', error('connection failure', '08006')],
    ['too many connections', error('sorry, too many clients already', '53300')],
    ['a statement timeout or a cancel', error('canceling statement due to statement timeout', '57014')],
    ['a serialization failure', error('could not serialize access due to concurrent update', '40001')],
    ['a deadlock', error('deadlock detected', '40P01')],
    ['the connection ended under a query', error('Connection terminated unexpectedly')],
    ['a client that errored', error('Client has encountered a connection error and is not queryable')],
    ['a client that was closed', error('Client was closed and is not queryable')],
    ['the pool timed out', error('timeout exceeded when trying to connect')],
    ['a refused connection', error('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
    ['a broken pipe', error('write EPIPE', 'EPIPE')],
    ['a socket timeout', error('read ETIMEDOUT', 'ETIMEDOUT')],
    ['an unreachable network', error('connect ENETUNREACH 10.0.0.1:5432', 'ENETUNREACH')],
    ['no local address', error('connect EADDRNOTAVAIL', 'EADDRNOTAVAIL')],
    ['a DNS failure', error('getaddrinfo EAI_AGAIN db', 'EAI_AGAIN')],
    ['the SQLSTATE message without its code', error('terminating connection due to administrator command')],
    ['an outage wrapped as a cause', error('query failed', undefined, { cause: error('x', '57P01') })],
    [
      'every address of a host refused (AggregateError, empty message)',
      new AggregateError([error('a', 'ECONNREFUSED'), error('b', 'ECONNREFUSED')], ''),
    ],
  ])('%s', (_name, err) => {
    expect(isDatabaseUnavailable(err)).toBe(true);
    expect(classifyDatabaseError(err)).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503 });
  });

  it.each([
    ['a unique violation', error('duplicate key value violates unique constraint "x"', '23505')],
    ['a syntax error (a bug)', error('syntax error at or near "SELEC"', '42601')],
    ['an undefined column (a bug)', error('column "nope" does not exist', '42703')],
    ['a SQLSTATE that only starts like one of an outage', error('odd', '0800')],
    ['a plain bug', new TypeError("Cannot read properties of undefined (reading 'id')")],
    ['an AppError (already decided)', new AppError('NOT_FOUND', 'gone')],
    ['not an object', 'ECONNRESET'],
    ['null', null],
  ])('%s is not', (_name, err) => {
    expect(isDatabaseUnavailable(err)).toBe(false);
  });

  it('a cycle of causes ends (depth bound), and a deep enough one is not looked into', () => {
    const a = error('a') as Error & { cause?: unknown };
    a.cause = a;
    expect(isDatabaseUnavailable(a)).toBe(false);
    let deep: unknown = error('x', '57P01');
    for (let i = 0; i < 6; i++) deep = error(`wrap ${i}`, undefined, { cause: deep });
    expect(isDatabaseUnavailable(deep)).toBe(false);
  });
});
