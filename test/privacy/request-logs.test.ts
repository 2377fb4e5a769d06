/**
 * The privacy endpoints log no caller data: the identifiers travel in a query string (export) or a
 * body (erasure), and neither reaches a log line; the access line keeps the path only.
 */
import { asLocation, createLocation, memoryLog, mintKey, request, useTestApi } from '../support/harness.js';

const { log, lines } = memoryLog('trace');
const t = useTestApi({}, { log });

test('export and erasure requests, good and bad, leave no identifier in any log line', async () => {
  const loc = await createLocation(t.owner);
  const { token } = await mintKey(t.owner, loc.id);
  await asLocation(t.owner, loc.id, (c) =>
    c.query("insert into app.leads (location_id, name, phone, email) values ($1, 'Quinn Logless', '+15125550155', 'quinn@example.com')", [loc.id]));
  const L = `/api/v1/locations/${loc.id}`;
  expect((await request(t.baseUrl, 'GET', `${L}/caller-data?phone=%2B15125550155`, { token })).status).toBe(200);
  expect((await request(t.baseUrl, 'GET', `${L}/caller-data?email=quinn%40example.com`, { token })).status).toBe(200);
  expect((await request(t.baseUrl, 'GET', `${L}/caller-data?phone=5550155x`, { token })).status).toBe(400);
  expect((await request(t.baseUrl, 'POST', `${L}/erasures`, { token, body: { email: 'quinn@example' } })).status).toBe(400);
  expect((await request(t.baseUrl, 'POST', `${L}/erasures`, { token, body: { phone: '(512) 555-0155', email: 'quinn@example.com' } })).status).toBe(202);
  await new Promise((r) => setTimeout(r, 50));
  const text = lines.join('\n');
  expect(text).toContain(`${L}/caller-data`);
  for (const s of ['5550155', 'quinn', 'Quinn', 'Logless']) expect({ s, found: text.includes(s) }).toEqual({ s, found: false });
});
