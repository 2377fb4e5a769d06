/** Lists page newest first through the Link header with no duplicates or gaps, ties included. */
import { createLocation, mintKey, request, startTestApi, type TestApi, type TestLocation } from '../support/harness.js';

let t: TestApi;
let A: TestLocation;
let token: string;

beforeAll(async () => {
  t = await startTestApi();
  A = await createLocation(t.owner);
  ({ token } = await mintKey(t.owner, A.id));
  const other = await createLocation(t.owner);
  // 23 leads: 9 share one created_at (ties broken by id), the rest spread out; plus noise elsewhere.
  await t.owner.query(
    `insert into app.leads (location_id, name, phone, created_at)
     select $1, 'L' || g, '+15125550100', case when g <= 9 then timestamptz '2026-11-01T12:00:00Z'
                                            else timestamptz '2026-11-01T12:00:00Z' + g * interval '1 minute' end
       from generate_series(1, 23) g`, [A.id]);
  await t.owner.query(`insert into app.leads (location_id, name, phone) select $1, 'X', '+15125550100' from generate_series(1, 5)`, [other.id]);
});
afterAll(() => t.close());

async function walk(path: string): Promise<any[]> {
  const seen: any[] = [];
  let next: string | null = path;
  let pages = 0;
  while (next) {
    const res: { status: number; body: any; headers: Headers } = await request(t.baseUrl, "GET", next, { token });
    if (res.status !== 200) throw new Error(`${next}: ${JSON.stringify(res.body)}`);
    expect(Object.keys(res.body)).toEqual(['data']);
    seen.push(...res.body.data);
    const link: string | null = res.headers.get('link');
    next = link ? /^<([^>]+)>; rel="next"$/.exec(link)![1] : null;
    pages += 1;
    expect(pages).toBeLessThan(50);
  }
  return seen;
}

test.each(['/api/v1', ''])('leads in pages of 4 under prefix "%s": complete, unique, newest first', async (prefix) => {
  const all = (await request(t.baseUrl, 'GET', `${prefix}/locations/${A.id}/leads?limit=200`, { token })).body.data;
  expect(all).toHaveLength(23);
  const paged = await walk(`${prefix}/locations/${A.id}/leads?limit=4`);
  expect(paged.map((l) => l.id)).toEqual(all.map((l: any) => l.id));
  expect(new Set(paged.map((l) => l.id)).size).toBe(23);
  const keys = paged.map((l) => `${l.created_at}|${l.id}`);
  expect([...keys].sort().reverse()).toEqual(keys);
});

test('filters are kept across pages; the last page has no Link', async () => {
  const paged = await walk(`/api/v1/locations/${A.id}/leads?status=new&limit=10`);
  expect(paged).toHaveLength(23);
  const last = await request(t.baseUrl, 'GET', `/api/v1/locations/${A.id}/leads?limit=23`, { token });
  expect(last.headers.get('link')).toBeNull();
});

test('a malformed cursor is a 400', async () => {
  const res = await request(t.baseUrl, 'GET', `/api/v1/locations/${A.id}/leads?cursor=%%%`, { token });
  expect(res.status).toBe(400);
  expect(res.body.error.code).toBe('validation_error');
});

test('a cursor other than the one the API wrote (a part missing or added, a non-finite instant) is a 400 on every list', async () => {
  const b64 = (s: string) => Buffer.from(s).toString('base64url');
  const id = '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b';
  const bad = ['2026-11-28T01:50:34Z', `2026-11-28T01:50:34Z|${id}|x`, `infinity|${id}`, `epoch|${id}`, `|${id}`, `2026-11-28 01:50:34+00|${id}`];
  for (const list of ['leads', 'calls', 'faqs']) {
    for (const cursor of bad) {
      const res = await request(t.baseUrl, 'GET', `/api/v1/locations/${A.id}/${list}?cursor=${b64(cursor)}`, { token });
      expect([list, cursor, res.status, res.body.error?.code]).toEqual([list, cursor, 400, 'validation_error']);
    }
  }
  // The API's own cursor still works.
  const first = await request(t.baseUrl, 'GET', `/api/v1/locations/${A.id}/leads?limit=2`, { token });
  const link = /^<([^>]+)>; rel="next"$/.exec(first.headers.get('link')!)![1];
  const next = await request(t.baseUrl, 'GET', link, { token });
  expect(next.status).toBe(200);
  expect(next.body.data).toHaveLength(2);
});
