/**
 * Event bodies checked against the published catalog (GET /event-types: src/webhooks/events.ts),
 * with a real JSON Schema 2020-12 validator (ajv + ajv-formats).
 *
 * test/webhooks/catalog.test.ts makes the system emit every event type and validates each body.
 * A resource added later proves its own events in its own test file with
 * `expectEmittedEventsValid(owner, locationId, ['<type>', …])` (the types as string literals):
 * catalog.test.ts leaves the types some test file claims that way to that file
 * (`claimedEventTypes`), so adding an event does not edit catalog.test.ts.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type pg from 'pg';
import { projectRoot } from '../../src/db/migrate.js';
import { closedEventJsonSchema, publishedEvents } from '../../src/webhooks/events.js';

// ajv-formats is CommonJS: its default export is the module object under NodeNext typing.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (a: Ajv2020) => void;

let validators: Map<string, ValidateFunction> | undefined;

/** The problems of one delivery body against its type's schema, closed (empty when it conforms). */
export function eventBodyProblems(body: any): string[] {
  if (!validators) {
    const ajv = new Ajv2020({ strict: true, allErrors: true });
    addFormats(ajv);
    // The closed schemas: the published ones are open (a receiver accepts a field added later), but
    // the service sends only the documented fields.
    validators = new Map(publishedEvents.map((e) => [e.type, ajv.compile(closedEventJsonSchema(e))]));
  }
  const v = validators.get(body?.event);
  if (!v) return [`no schema for ${body?.event}`];
  return v(body) ? [] : (v.errors ?? []).map((e) => `${body.event} ${e.instancePath} ${e.message}`);
}

/** Every body of these types in the location's outbox conforms, and each type was emitted at least once. */
export async function expectEmittedEventsValid(owner: pg.Pool, locationId: string, types: string[]): Promise<void> {
  const { rows } = await owner.query<{ body: string }>('select body from app.events where location_id = $1 and type = any ($2) order by created_at, id', [locationId, types]);
  const bodies = rows.map((r) => JSON.parse(r.body));
  expect(bodies.flatMap(eventBodyProblems)).toEqual([]);
  expect([...new Set(bodies.map((b) => b.event))].sort()).toEqual([...types].sort());
}

/** Event type → the test file that calls `expectEmittedEventsValid(…, [ … ])` naming it. */
export function claimedEventTypes(): Map<string, string> {
  const claims = new Map<string, string>();
  const dir = path.join(projectRoot, 'test');
  for (const f of fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.test.ts'))) {
    const text = fs.readFileSync(path.join(dir, f), 'utf8');
    for (const m of text.matchAll(/expectEmittedEventsValid\([^[]*\[([^\]]*)\]/g)) {
      for (const t of m[1].matchAll(/'([^']+)'/g)) claims.set(t[1], f);
    }
  }
  return claims;
}
