import { describe, expect, it } from 'vitest';
import { upsertStatement } from './upsert';

const squash = (sql: string) => sql.replace(/\s+/g, ' ').trim();
const table = { table: 't', alias: 'x', key: 'k' };

describe('upsertStatement', () => {
  it('reads every column, writes and compares all but the key, and returns what changed with its previous value', () => {
    const sql = upsertStatement({
      ...table,
      columns: [
        ['k', 'text'],
        ['a', 'float8'],
        ['s', 'text'],
      ],
      returning: 'x.id, x.k, x.a, x.s',
      previous: 's',
    });
    expect(squash(sql)).toBe(
      squash(`WITH input AS ( SELECT * FROM jsonb_to_recordset($1::jsonb) AS t(new_id uuid, k text, a float8, s text) ),
       old AS ( SELECT x.k, x.s FROM t x JOIN input i ON i.k = x.k ),
       up AS ( INSERT INTO t AS x (id, k, a, s, updated_at) SELECT new_id, k, a, s, $2::timestamptz FROM input
         ON CONFLICT (k) DO UPDATE SET a = EXCLUDED.a, s = EXCLUDED.s, updated_at = EXCLUDED.updated_at
         WHERE (x.a, x.s) IS DISTINCT FROM (EXCLUDED.a, EXCLUDED.s)
         RETURNING x.id, x.k, x.a, x.s )
       SELECT up.*, old.s AS previous_status, (old.k IS NULL) AS inserted FROM up LEFT JOIN old ON old.k = up.k`),
    );
  });

  it('joins what the result needs besides the written row', () => {
    const sql = upsertStatement({
      ...table,
      columns: [
        ['k', 'text'],
        ['p', 'uuid'],
      ],
      returning: 'x.id, x.k, x.p',
      join: { from: 'JOIN parents p ON p.id = up.p', select: 'p.name AS parent_name' },
    });
    expect(squash(sql)).toContain(
      'SELECT up.*, p.name AS parent_name, (old.k IS NULL) AS inserted FROM up JOIN parents p ON p.id = up.p LEFT JOIN old ON old.k = up.k',
    );
    expect(squash(sql)).toContain('old AS ( SELECT x.k FROM t x JOIN input i ON i.k = x.k )');
  });
});

describe('upsertStatement stamps', () => {
  it('sets each stamp column with updated_at to the transaction timestamp', () => {
    const sql = upsertStatement({
      ...table,
      columns: [
        ['k', 'text'],
        ['a', 'text'],
      ],
      returning: 'x.k',
      stamps: ['data_as_of'],
    });
    expect(squash(sql)).toContain(
      'INSERT INTO t AS x (id, k, a, updated_at, data_as_of) SELECT new_id, k, a, $2::timestamptz, $2::timestamptz FROM input ON CONFLICT (k) DO UPDATE SET a = EXCLUDED.a, updated_at = EXCLUDED.updated_at, data_as_of = EXCLUDED.data_as_of',
    );
  });
});
