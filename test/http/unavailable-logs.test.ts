/**
 * Logs during a database outage: one short line per failed request (no stack trace) and one
 * throttled "database unavailable" warning, not two stack traces per request.
 */
import { randomUUID } from 'node:crypto';
import { OutageLog } from '../../src/http/errors.js';
import { memoryLog, request, useApiWithDatabaseDown } from '../support/harness.js';

// The service's logger settings, writing into memory; the database is "down" for every request.
const { log, lines } = memoryLog();
const api = useApiWithDatabaseDown(log);

test('N failed requests write N one-line records and one outage warning, with no stack trace', async () => {
  const N = 40;
  lines.length = 0;
  for (let i = 0; i < N; i++) {
    const res = await request(api.baseUrl, 'GET', '/api/v1/me', { token: randomUUID() });
    expect(res.status).toBe(503);
  }
  const ready = await request(api.baseUrl, 'GET', '/readyz');
  expect(ready.status).toBe(503);
  await new Promise((r) => setImmediate(r));

  const records = lines.map((l) => JSON.parse(l));
  const perRequest = records.filter((r) => r.res?.statusCode === 503);
  const warnings = records.filter((r) => /database unavailable/.test(r.msg));
  expect(perRequest).toHaveLength(N + 1);
  expect(warnings).toHaveLength(1);
  expect(records).toHaveLength(N + 2);
  expect(warnings[0]).toMatchObject({ level: 40, cause: 'ECONNREFUSED', suppressed: 0 });
  expect(perRequest[0]).toMatchObject({ req: { method: 'GET', url: '/api/v1/me' }, err: { code: 'unavailable', cause: 'ECONNREFUSED' } });
  expect(perRequest.at(-1)).toMatchObject({ req: { url: '/readyz' }, err: { code: 'unavailable' } });
  expect(lines.join('\n')).not.toMatch(/stack|\s+at /);
  // Concise: a few hundred bytes a request, not kilobytes of stack traces.
  expect(lines.join('\n').length).toBeLessThan((N + 2) * 400);
});

test('the outage warning repeats at most once per interval, counting what it suppressed', () => {
  let now = 0;
  const warned: unknown[] = [];
  const fake = { warn: (obj: unknown) => warned.push(obj) } as unknown as Parameters<OutageLog['failed']>[0];
  const outage = new OutageLog(15_000, () => now);
  for (now = 0; now < 40_000; now += 1_000) outage.failed(fake, 'ECONNREFUSED');
  expect(warned).toEqual([
    { cause: 'ECONNREFUSED', suppressed: 0, interval_s: 15 },
    { cause: 'ECONNREFUSED', suppressed: 14, interval_s: 15 },
    { cause: 'ECONNREFUSED', suppressed: 14, interval_s: 15 },
  ]);
});
