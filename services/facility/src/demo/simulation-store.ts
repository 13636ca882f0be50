import type { CaseRecord, FacilityRecord } from '../domain/records';
import type { Queryable } from '../store/queries';
import type { FacilityRow } from '../store/rows';
import { FACILITY_COLUMNS } from '../store/rows';

/** Reads for `simulate`: current records in import form, so a change can be written back as a full row. */
export async function listRegistryIds(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ registry_id: string }>('SELECT registry_id FROM facilities ORDER BY registry_id');
  return rows.map((r) => r.registry_id);
}

export async function loadFacilityRecord(db: Queryable, registryId: string): Promise<FacilityRecord | undefined> {
  const { rows } = await db.query<FacilityRow>(`SELECT ${FACILITY_COLUMNS} FROM facilities WHERE registry_id = $1`, [registryId]);
  const r = rows[0];
  if (!r) return undefined;
  const { id: _id, data_as_of: _d, updated_at: _u, ...record } = r;
  return record as FacilityRecord;
}

/** A random case that is not closed yet, as an import row. */
export async function randomOpenCase(db: Queryable): Promise<CaseRecord | undefined> {
  const { rows } = await db.query<CaseRecord>(
    `SELECT c.case_number, c.case_type, c.status, c.lead_agency, c.filed_date, c.settled_date, c.penalty_amount_usd,
            ARRAY(SELECT f.registry_id FROM facilities f WHERE f.id = ANY(c.facility_ids) ORDER BY f.registry_id) AS registry_ids
       FROM cases c
      WHERE c.status <> 'closed'
      ORDER BY random() LIMIT 1`,
  );
  return rows[0];
}
