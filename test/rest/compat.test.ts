/**
 * Compatibility with the last release (docs/api-contract.md "Compatibility and deprecation"): the
 * current document is compared with the committed document of the last release
 * (openapi/releases/<version>.json) by api-smart-diff (scripts/api-compat.ts), and every breaking
 * change must be declared in openapi/breaking-changes.json. A second case proves the check fails
 * on undeclared breaks: a removed operation, a new required request field, a removed response
 * field and a renamed operationId.
 */
import { buildOpenApi } from '../../src/http/openapi.js';
import { routes } from '../../src/http/routes/index.js';
import { changes, declaredBreaks, lastRelease, matches, undeclaredBreaks } from '../../scripts/api-compat.js';

type Json = Record<string, any>;
const current = buildOpenApi(routes);
const newer = (a: string, b: string) => a.localeCompare(b, 'en', { numeric: true }) > 0;

test('no breaking change since the last release is undeclared, and the version moved on', async () => {
  const { version, doc } = lastRelease();
  const all = await changes(doc, current);
  expect(undeclaredBreaks(all, declaredBreaks()).map((c) => `${c.action} ${c.path}: ${c.description}`)).toEqual([]);
  if (all.length) expect([current.info.version, newer(current.info.version, version)]).toEqual([current.info.version, true]);
  // A declaration that no longer matches anything is stale: the file lists this release's breaks only.
  for (const d of declaredBreaks()) expect([d.path ?? d.pattern, all.some((c) => c.type === 'breaking' && matches(d, c.path))]).toEqual([d.path ?? d.pattern, true]);
}, 120_000);

test('the check fails on a breaking change nobody declared', async () => {
  // The leads operations alone keep the comparison small.
  const only = (d: Json): Json => ({ ...d, paths: { '/locations/{locationId}/leads': d.paths['/locations/{locationId}/leads'], '/locations/{locationId}/leads/{leadId}': d.paths['/locations/{locationId}/leads/{leadId}'] }, webhooks: {} });
  const before = only(current);
  const after = only(structuredClone(current));
  delete after.paths['/locations/{locationId}/leads/{leadId}'].get;
  after.components.schemas.LeadCreate.required.push('email');
  delete after.components.schemas.Lead.properties.notes;
  after.components.schemas.Lead.required = after.components.schemas.Lead.required.filter((f: string) => f !== 'notes');
  after.paths['/locations/{locationId}/leads'].get.operationId = 'getLeads';
  const open = undeclaredBreaks(await changes(before, after), declaredBreaks().filter((d) => !d.pattern?.includes('operationId')));
  const paths = open.map((c) => c.path);
  expect(paths).toContain('paths//locations/{locationId}/leads/{leadId}/get');
  expect(paths).toContain('paths//locations/{locationId}/leads/post/requestBody/content/application/json/schema/required/2');
  expect(paths.some((p) => p.endsWith('/properties/notes'))).toBe(true);
  expect(paths).toContain('paths//locations/{locationId}/leads/get/operationId');
}, 120_000);

test('a new event type is not a break; a new value of another enum an answer carries is', async () => {
  const only = (d: Json): Json => ({ ...d, paths: { '/locations/{locationId}/webhook-endpoints': d.paths['/locations/{locationId}/webhook-endpoints'], '/locations/{locationId}/leads': d.paths['/locations/{locationId}/leads'] }, webhooks: {} });
  const before = only(structuredClone(current));
  before.components.schemas.WebhookEndpoint.properties.events.items.enum.pop();
  before.components.schemas.Lead.properties.status.enum.pop();
  const all = await changes(before, only(current));
  const added = (schema: string) => all.filter((c) => c.action === 'add' && c.path.includes(schema) && /\/enum\/\d+$/.test(c.path));
  expect(added('/events/items/').length).toBeGreaterThan(0);
  expect(added('/events/items/').every((c) => c.type === 'non-breaking')).toBe(true);
  expect(added('/status/').length).toBeGreaterThan(0);
  expect(added('/status/').every((c) => c.type === 'breaking')).toBe(true);
}, 120_000);
