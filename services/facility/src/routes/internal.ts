import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { existingFacilityIds, type Queryable } from '../store/queries';
import { ExistingBody, ExistingResponse } from './schemas';

/** Internal endpoints for other services (the webhook service checks facility ids). */
export async function internalRoutes(app: FastifyInstance, opts: { db: Queryable }): Promise<void> {
  app.post<{ Body: Static<typeof ExistingBody> }>(
    '/internal/v1/facilities/existing',
    { schema: { body: ExistingBody, response: { 200: ExistingResponse } } },
    async (request) => {
      const ids = request.body.ids.map((id) => id.replace(/^urn:uuid:/i, '').toLowerCase());
      return { data: { existing: await existingFacilityIds(opts.db, ids) } };
    },
  );
}
