/**
 * GET webhook-deliveries filters by event type and status (validated), and pages like every list:
 * cursor in a Link header that keeps the filters.
 */
import { createLocation, mintKey, request, startTestApi, type Res, type TestApi } from '../support/harness.js';
import { emit } from './support.js';

let t: TestApi;
let loc: { id: string; slug: string };
let other: { id: string };
let token: string;
let otherToken: string;

beforeAll(async () => {
  t = await startTestApi();
  loc = await createLocation(t.owner);
  other = await createLocation(t.owner);
  ({ token } = await mintKey(t.owner, loc.id));
  ({ token: otherToken } = await mintKey(t.owner, other.id));
});
afterAll(() => t.close());

const list = (query: string, tok = token, location = loc.id) =>
  request(t.baseUrl, 'GET', `/api/v1/locations/${location}/webhook-deliveries${query}`, { token: tok });

/** Follows Link rel=next to the end; returns every page's data. */
async function allPages(path: string): Promise<{ pages: any[][]; links: string[] }> {
  const pages: any[][] = [];
  const links: string[] = [];
  let next: string | null = path;
  while (next) {
    const res: Res = await request(t.baseUrl, 'GET', next, { token });
    expect(res.status).toBe(200);
    pages.push(res.body.data);
    const link: string | null = res.headers.get('link');
    if (link) links.push(link);
    next = link ? /^<([^>]+)>; rel="next"$/.exec(link)![1] : null;
  }
  return { pages, links };
}

test('event and status filters, each alone and together, page with the filters kept in the next link', async () => {
  // No worker: fan-out leaves every attempt pending; statuses are then set to make a mix.
  const { rows: [ep] } = await t.owner.query(
    `insert into app.webhook_endpoints (location_id, url, events, secret)
     values ($1, 'https://hooks.example.com/w', '{lead.created,call.emergency,booking.created}', app.webhook_new_secret()) returning id`, [loc.id]);
  const made: Record<string, string[]> = { 'lead.created': [], 'call.emergency': [], 'booking.created': [] };
  for (let i = 0; i < 7; i++) made['lead.created'].push(await emit(t.owner, loc.id, 'lead.created', { i }));
  for (let i = 0; i < 5; i++) made['call.emergency'].push(await emit(t.owner, loc.id, 'call.emergency', { i }));
  for (let i = 0; i < 3; i++) made['booking.created'].push(await emit(t.owner, loc.id, 'booking.created', { i }));
  // Another location's deliveries never show.
  await t.owner.query(
    `insert into app.webhook_endpoints (location_id, url, events, secret)
     values ($1, 'https://hooks.example.com/w', '{call.emergency}', app.webhook_new_secret())`, [other.id]);
  await emit(t.owner, other.id, 'call.emergency', { i: 99 });
  // Statuses: emergencies alternate dead/delivered, leads delivered except two failed.
  await t.owner.query(`update app.webhook_deliveries set status = case when event_id = any ($2::uuid[]) then 'dead' else 'delivered' end
                        where endpoint_id = $1 and event = 'call.emergency'`, [ep.id, made['call.emergency'].filter((_, i) => i % 2 === 0)]);
  await t.owner.query(`update app.webhook_deliveries set status = case when event_id = any ($2::uuid[]) then 'failed' else 'delivered' end
                        where endpoint_id = $1 and event = 'lead.created'`, [ep.id, made['lead.created'].slice(0, 2)]);

  const events = async (q: string) => (await list(q)).body.data.map((d: { event: string; status: string }) => `${d.event}/${d.status}`);
  expect((await events('?event=call.emergency')).sort()).toEqual(['call.emergency/dead', 'call.emergency/dead', 'call.emergency/dead', 'call.emergency/delivered', 'call.emergency/delivered']);
  expect(await events('?status=dead')).toEqual(['call.emergency/dead', 'call.emergency/dead', 'call.emergency/dead']);
  expect(await events('?status=pending')).toEqual(['booking.created/pending', 'booking.created/pending', 'booking.created/pending']);
  expect(await events('?event=lead.created&status=failed')).toEqual(['lead.created/failed', 'lead.created/failed']);
  expect(await events('?event=booking.created&status=delivered')).toEqual([]);
  expect(await events(`?event=call.emergency&status=dead&endpoint_id=${ep.id}`)).toHaveLength(3);
  expect((await list('?event=call.emergency', otherToken, other.id)).body.data).toHaveLength(1);

  // Pages of 2, newest first, the filter kept in every next link, every row once.
  const { pages, links } = await allPages(`/api/v1/locations/${loc.slug}/webhook-deliveries?event=lead.created&status=delivered&limit=2`);
  expect(pages.map((p) => p.length)).toEqual([2, 2, 1]);
  for (const link of links) {
    expect(link).toMatch(/[?&]event=lead.created/);
    expect(link).toMatch(/[?&]status=delivered/);
    expect(link).toMatch(/[?&]cursor=/);
  }
  const rows = pages.flat();
  expect(rows.every((d) => d.event === 'lead.created' && d.status === 'delivered')).toBe(true);
  expect(new Set(rows.map((d) => d.id)).size).toBe(5);
  const keys = rows.map((d) => `${d.created_at}|${d.id}`);
  expect([...keys].sort().reverse()).toEqual(keys);
  const expected = made['lead.created'].slice(2);
  expect(rows.map((d) => d.event_id).sort()).toEqual([...expected].sort());
  // The vanity path pages the same way.
  const vanity = await request(t.baseUrl, 'GET', `/locations/${loc.id}/webhook-deliveries?status=dead&limit=1`, { token });
  expect(vanity.headers.get('link')).toMatch(/^<\/locations\/[^>]+status=dead[^>]*cursor=[^>]+>; rel="next"$/);
});

test('unknown event types and statuses are a 400 in the envelope; unknown parameters are ignored; the filters need webhooks:read', async () => {
  for (const q of ['?event=lead.deleted', '?event=', '?status=queued', '?status=DEAD', '?event=lead.created&status=nope']) {
    const res = await list(q);
    expect([q, res.status, res.body.error.code]).toEqual([q, 400, 'validation_error']);
  }
  expect((await list('?event=webhook.test')).status).toBe(200);
  // As on every list (docs/api-contract.md §5): a parameter it does not know changes nothing.
  const all = await list('');
  for (const q of ['?type=lead.created', '?_=1700000000000']) expect([q, (await list(q)).body]).toEqual([q, all.body]);
  const { token: noScope } = await mintKey(t.owner, loc.id, ['calls:read']);
  expect((await list('?event=lead.created', noScope)).status).toBe(403);
  expect((await list('?event=lead.created', otherToken)).status).toBe(404);
});
