/**
 * A client's mistake is a 4xx in the envelope, never a 500: deep JSON, bodies that do not decode
 * with their Content-Encoding, odd Host headers on paged lists, huge numbers, odd query strings,
 * on the token API and on the platform routes.
 */
import http from 'node:http';
import zlib from 'node:zlib';
import { sign } from 'retell-sdk';
import { BILLING_SECRET, billingFixture, postBilling, VOICE_SECRET } from '../platform/support.js';
import { createLocation, mintKey, request, startTestApi, type TestApi } from '../support/harness.js';

let t: TestApi;
let token: string;
let loc: { id: string };
const V = '/api/v1';

beforeAll(async () => {
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET, BILLING_WEBHOOK_SECRET: BILLING_SECRET });
  loc = await createLocation(t.owner);
  ({ token } = await mintKey(t.owner, loc.id));
  for (const q of ['one?', 'two?', 'three?']) {
    const res = await request(t.baseUrl, 'POST', `${V}/locations/${loc.id}/faqs`, { token, body: { question: q, answer: 'yes' } });
    expect(res.status).toBe(201);
  }
});
afterAll(() => t.close());

interface RawRes {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: any;
}

/** A request with full control of the headers (Host, Content-Encoding) and the body bytes. */
function raw(method: string, path: string, headers: Record<string, string>, body?: Buffer | string): Promise<RawRes> {
  const { port } = new URL(t.baseUrl);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers: { authorization: `Bearer ${token}`, ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          /* asserted below */
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parsed });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Test titles stay readable when the input is long. */
const titled = (list: string[][]) => list.map((row) => [row.map((x) => (x.length > 70 ? `${x.slice(0, 70)}…` : x)).join(' '), ...row]);

const envelope = (code: string) => ({ error: { code, message: expect.any(String), details: expect.any(Object) } });

/** `depth` nested arrays/objects around a scalar, built without recursion. */
function nested(depth: number, kind: 'array' | 'object' = 'array'): string {
  const [open, close] = kind === 'array' ? ['[', ']'] : ['{"a":', '}'];
  return open.repeat(depth) + '1' + close.repeat(depth);
}

const integration = (config: string) =>
  `{"provider":"n8n","webhook_url":"https://93.184.215.14/hook","config":{"deep":${config}}}`;

describe('deep JSON', () => {
  test.each([
    ['arrays', nested(4500)],
    ['objects', nested(4500, 'object')],
    ['mixed', '[{"a":'.repeat(2250) + '1' + '}]'.repeat(2250)],
  ])('4,500 levels of %s in a ~30 KB body → 400 invalid_json', async (_kind, deep) => {
    const body = integration(deep);
    expect(body.length).toBeLessThan(64 * 1024);
    const res = await raw('POST', `${V}/locations/${loc.id}/integrations`, { 'content-type': 'application/json' }, body);
    expect(res.status).toBe(400);
    expect(res.body).toEqual(envelope('invalid_json'));
    expect(res.body.error.details).toEqual({ max_depth: 32 });
  });

  test('the depth limit is exactly 32 levels, wherever the body goes', async () => {
    // The integration body itself is 2 levels ({ config: { deep: … } }) around `deep`: 32 in all.
    const ok = await raw('POST', `${V}/locations/${loc.id}/integrations`, { 'content-type': 'application/json' }, integration(nested(30)));
    expect(ok.status).toBe(201);
    const over = await raw('PATCH', `${V}/locations/${loc.id}`, { 'content-type': 'application/json' }, `{"name":${nested(32)}}`);
    expect(over.status).toBe(400);
    expect(over.body).toEqual(envelope('invalid_json'));
    // Brackets inside strings do not count.
    const inString = await request(t.baseUrl, 'POST', `${V}/locations/${loc.id}/faqs`, { token, body: { question: '['.repeat(900), answer: '{'.repeat(900) } });
    expect(inString.status).toBe(201);
  });

  test('deep JSON in signed platform payloads → 400 invalid_json (after the signature)', async () => {
    const body = JSON.stringify({ event: 'call_ended', call: { call_id: 'deep-1', metadata: {} } }).replace('"metadata":{}', `"metadata":{"x":${nested(4500)}}`);
    const voice = await raw('POST', '/api/voice/post-call', { 'content-type': 'application/json', 'x-retell-signature': await sign(body, VOICE_SECRET) }, body);
    expect(voice.status).toBe(400);
    expect(voice.body).toEqual(envelope('invalid_json'));
    expect(voice.body.error.details).toEqual({ max_depth: 32 });

    const evt = billingFixture('subscription-created', loc.id);
    const stripeBody = JSON.stringify(evt).replace('"metadata":{', `"metadata":{"deep":${nested(4500, 'object')},`);
    expect(stripeBody).toContain('"deep"');
    const billing = await postBilling(t.baseUrl, null, { raw: stripeBody });
    expect(billing.status).toBe(400);
    expect(billing.body).toEqual(envelope('invalid_json'));
    expect(billing.body.error.details).toEqual({ max_depth: 32 });
  });
});

describe('Content-Encoding', () => {
  const json = JSON.stringify({ question: 'gz?', answer: 'yes' });
  const path = () => `${V}/locations/${loc.id}/faqs`;

  test.each([
    ['gzip', Buffer.from(json)],
    ['deflate', Buffer.from(json)],
    ['br', Buffer.from(json)],
    ['gzip', zlib.gzipSync(json).subarray(0, 12)], // truncated
    ['deflate', zlib.gzipSync(json)], // gzip bytes labelled deflate
    ['x-gzip', zlib.gzipSync(json)],
  ])('%s with a body that does not decode → 400 invalid_body', async (encoding, bytes) => {
    const res = await raw('POST', path(), { 'content-type': 'application/json', 'content-encoding': encoding }, bytes);
    expect([encoding, res.status]).toEqual([encoding, encoding === 'x-gzip' ? 415 : 400]);
    expect(res.body).toEqual(envelope(encoding === 'x-gzip' ? 'unsupported_media_type' : 'invalid_body'));
  });

  test.each(['compress', 'gzip, gzip', 'identity, gzip', 'snappy'])('unsupported encoding %s → 415', async (encoding) => {
    const res = await raw('POST', path(), { 'content-type': 'application/json', 'content-encoding': encoding }, zlib.gzipSync(json));
    expect(res.status).toBe(415);
    expect(res.body).toEqual(envelope('unsupported_media_type'));
  });

  test.each([
    ['gzip', zlib.gzipSync(json)],
    ['deflate', zlib.deflateSync(json)],
    ['br', zlib.brotliCompressSync(json)],
  ])('valid %s bodies are accepted', async (encoding, bytes) => {
    const res = await raw('POST', path(), { 'content-type': 'application/json', 'content-encoding': encoding }, bytes);
    expect(res.status).toBe(201);
  });

  test.each([
    ['application/json; charset=latin1', Buffer.from(json), 415],
    ['application/json; charset=bogus-9', Buffer.from(json), 415],
    ['application/json; charset=utf-16le', Buffer.from(json, 'utf16le'), 201],
    ['application/json; charset=utf-16le', Buffer.from('\ud800'), 400],
    ['application/json', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(json)]), 201], // a UTF-8 BOM is skipped
    ['application/json', Buffer.from([0xff, 0xfe, 0x7b]), 400],
  ])('%s with odd bytes → a 4xx or accepted, never 500', async (type, bytes, status) => {
    const res = await raw('POST', path(), { 'content-type': type }, bytes);
    expect([type, res.status]).toEqual([type, status]);
    if (status >= 400) expect(res.body.error.code).toEqual(expect.any(String));
  });

  test('a body that inflates past 64 KiB → 413', async () => {
    const bomb = zlib.gzipSync(JSON.stringify({ question: 'x'.repeat(5_000_000), answer: 'y' }));
    expect(bomb.length).toBeLessThan(64 * 1024);
    const res = await raw('POST', path(), { 'content-type': 'application/json', 'content-encoding': 'gzip' }, bomb);
    expect(res.status).toBe(413);
    expect(res.body).toEqual(envelope('payload_too_large'));
  });

  test.each(['/api/voice/post-call', '/api/voice/inbound', '/api/billing/webhook'])('platform route %s: bad gzip → 400, unknown encoding → 415', async (p) => {
    const bad = await raw('POST', p, { 'content-type': 'application/json', 'content-encoding': 'gzip' }, 'not gzip at all');
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual(envelope('invalid_body'));
    const unknown = await raw('POST', p, { 'content-type': 'application/json', 'content-encoding': 'compress' }, 'x');
    expect(unknown.status).toBe(415);
    expect(unknown.body).toEqual(envelope('unsupported_media_type'));
  });
});

describe('odd Host headers on a list with a next page', () => {
  test.each(['a b', 'exa[mple', '[::1', 'host:99999', 'h\u00fcst', '%zz', ':80', '@', 'x/y', '...'])('Host %j → 200 with a relative Link', async (host) => {
    const res = await raw('GET', `${V}/locations/${loc.id}/faqs?limit=1&x=%20y`, { host });
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(1);
    const link = String(res.headers.link);
    expect(link).toMatch(new RegExp(`^</api/v1/locations/${loc.id}/faqs\\?limit=1&x=\\+y&cursor=[A-Za-z0-9_-]+>; rel="next"$`));
    // The link leads to the next page.
    const next = await request(t.baseUrl, 'GET', link.slice(1, link.indexOf('>')), { token });
    expect(next.status).toBe(200);
    expect(next.body.data[0].id).not.toBe(res.body.data[0].id);
  });
});

describe('numbers and query strings', () => {
  test.each(titled([
    'limit=1e999', 'limit=-0', 'limit=9007199254740993', 'limit=1&limit=2', 'limit=0x10', 'limit=Infinity', 'limit=NaN',
    `${'a'.repeat(10)}${'[b]'.repeat(4500)}=1`, 'cursor=%00', 'cursor=AAAA', 'cursor=' + 'z'.repeat(200), 'cursor=' + 'z'.repeat(201),
    'cursor=' + Buffer.from('9999-99-99|not-a-uuid').toString('base64url'), 'cursor[]=x', 'cursor=%E0%A4%A',
  ].map((q) => [q])))('GET faqs?%s → 200 or 400, never 500', async (_title, qs) => {
    const res = await raw('GET', `${V}/locations/${loc.id}/faqs?${qs}`, {});
    expect([qs, [200, 400]]).toEqual([qs, expect.arrayContaining([res.status])]);
    if (res.status === 400) expect(res.body).toEqual(envelope('validation_error'));
  });

  test.each([
    ['insights', 'days=1e400'], ['insights', 'days=-1e-400'], ['insights', 'range=99999999999999999999'],
    ['calls', 'from=275760-09-13T00:00:00Z'], ['calls', 'from=2026-02-30T00:00:00Z'], ['calls', 'to=0000-01-01T00:00:00Z'],
    ['calls', 'from=2026-01-01T00:00:00%2B99:99'],
  ])('GET %s?%s → 200 or 400', async (what, qs) => {
    const res = await raw('GET', `${V}/locations/${loc.id}/${what}?${qs}`, {});
    expect([qs, [200, 400]]).toEqual([qs, expect.arrayContaining([res.status])]);
  });

  test.each([
    ['faqs', 'limit'], ['webhook-deliveries', 'limit'], ['insights', 'days'], ['insights', 'range'], ['availability', 'days'],
  ])('GET %s?%s= an integer spelled other than in decimal digits (0x10, 1e1, " 10", +10, 10.0…) is a 400 naming it; 10 is fine', async (what, name) => {
    const path = (v: string) => `${V}/locations/${loc.id}/${what}?${name}=${v}`;
    for (const v of ['0x10', '0X0A', '0b1010', '0o12', '1e1', '%2010', '10%20', '+10', '%2B10', '10.0', '10.', '1_0', '']) {
      const res = await raw('GET', path(v), {});
      expect([v, res.status, res.body.error?.code, res.body.error?.details.issues.map((i: { path: string }) => i.path)])
        .toEqual([v, 400, 'validation_error', [name]]);
    }
    expect((await raw('GET', path('10'), {})).status).toBe(200);
    expect((await raw('GET', path('010'), {})).status).toBe(200);
  });

  test.each(titled([
    ['POST', 'faqs', '{"question":"q","answer":"a","position":1e400}'],
    ['POST', 'faqs', '{"question":"q","answer":"a","position":1e21}'],
    ['POST', 'faqs', '{"question":"q","answer":"a","position":-0}'],
    ['POST', 'leads', '{"name":"n","phone":"+13125550123","estimated_value":1e308}'],
    ['POST', 'leads', '{"name":"n","phone":"+13125550123","estimated_value":5e-324}'],
    ['POST', 'leads', '{"name":"n","phone":"+13125550123","urgency_level":1e400}'],
    ['POST', 'leads', '{"name":"\\ud800","phone":"+13125550123"}'],
    ['POST', 'leads', '{"name":"a\\u0000b","phone":"+13125550123"}'],
    ['PATCH', '', '{"travel_radius_miles":5e-324}'],
    ['PATCH', '', '{"travel_radius_miles":1e400}'],
    ['PATCH', '', `{"zip_codes":[${'"12345",'.repeat(499)}"12345"]}`],
    ['PUT', 'business-hours', '[{"day":1e400,"open":"08:00","close":"09:00"}]'],
    ['POST', 'integrations', '{"provider":"make","webhook_url":"https://93.184.215.14/h","config":{"n":1e400,"s":"\\ud800"}}'],
  ]))('%s → 2xx or 4xx in the envelope', async (_title, method, what, body) => {
    const res = await raw(method, `${V}/locations/${loc.id}${what ? `/${what}` : ''}`, { 'content-type': 'application/json' }, body);
    expect([body, res.status < 500]).toEqual([body, true]);
    if (res.status >= 400) expect(res.body).toEqual(envelope(expect.any(String) as unknown as string));
  });
});

test('a body sent to a route that takes none is a 400 and nothing happens; none or {} is fine', async () => {
  const faqs = (await request(t.baseUrl, 'GET', `${V}/locations/${loc.id}/faqs`, { token })).body.data as Array<{ id: string }>;
  const target = faqs[0].id;
  for (const body of [{ x: 1 }, [1, 2, 3], { id: target }]) {
    const res = await request(t.baseUrl, 'DELETE', `${V}/locations/${loc.id}/faqs/${target}`, { token, body });
    expect([JSON.stringify(body), res.status, res.body.error?.code]).toEqual([JSON.stringify(body), 400, 'validation_error']);
  }
  expect((await request(t.baseUrl, 'GET', `${V}/locations/${loc.id}/faqs/${target}`, { token })).status).toBe(200);
  expect((await request(t.baseUrl, 'DELETE', `${V}/locations/${loc.id}/faqs/${target}`, { token, body: {} })).status).toBe(200);
  expect((await request(t.baseUrl, 'DELETE', `${V}/locations/${loc.id}/faqs/${faqs[1].id}`, { token })).status).toBe(200);
});

test('a location reference that cannot name one (NUL, space, newline) is a 404 after the token check, never a 400 or a 500', async () => {
  for (const ref of ['acme%00', `${loc.id}%00`, 'ac%20me', 'acme%0a']) {
    const res = await raw('GET', `${V}/locations/${ref}/faqs`, {});
    expect([ref, res.status, res.body.error?.code]).toEqual([ref, 404, 'not_found']);
    const anon = await raw('GET', `${V}/locations/${ref}/faqs`, { authorization: 'Bearer nope' });
    expect([ref, anon.status]).toEqual([ref, 401]);
  }
});

test('a phone number written with anything but digits, a leading + and separators is a 400, never a number found inside the text', async () => {
  const leads = async () => (await request(t.baseUrl, 'GET', `${V}/locations/${loc.id}/leads`, { token })).body.data.length as number;
  const before = await leads();
  for (const phone of ['<script>+13125550100', 'call +13125550100 now', '+13125550100abc', '+1 312 555 0100 ext. 99', '+1３１２５５５０１００', '+13125550100\u0000']) {
    const res = await request(t.baseUrl, 'POST', `${V}/locations/${loc.id}/leads`, { token, body: { name: 'Dana', phone } });
    expect([phone, res.status, res.body.error?.code]).toEqual([phone, 400, 'validation_error']);
  }
  expect(await leads()).toBe(before);
  for (const phone of ['(312) 555-0100', '312.555.0100', '+1 312-555-0100']) {
    const res = await request(t.baseUrl, 'POST', `${V}/locations/${loc.id}/leads`, { token, body: { name: 'Dana', phone } });
    expect([phone, res.status, res.body.data?.phone]).toEqual([phone, 201, '+13125550100']);
  }
});

test('bytes that are not UTF-8 inside a JSON string are invalid_json, not stored as U+FFFD; the same text in UTF-16 is read', async () => {
  const before = (await t.owner.query('select count(*)::int as n from app.leads where location_id = $1', [loc.id])).rows[0].n;
  const bad = Buffer.concat([Buffer.from('{"name":"Bad'), Buffer.from([0xff, 0xc3, 0x28, 0xed, 0xa0, 0x80]), Buffer.from('utf","phone":"+13125550100"}')]);
  for (const type of ['application/json', 'application/json; charset=utf-8']) {
    const res = await raw('POST', `${V}/locations/${loc.id}/leads`, { 'content-type': type }, bad);
    expect([type, res.status, res.body.error.code]).toEqual([type, 400, 'invalid_json']);
    // Compressed, the check is on the decoded bytes.
    const gz = await raw('POST', `${V}/locations/${loc.id}/leads`, { 'content-type': type, 'content-encoding': 'gzip' }, zlib.gzipSync(bad));
    expect([type, gz.status, gz.body.error.code]).toEqual([type, 400, 'invalid_json']);
  }
  expect((await t.owner.query('select count(*)::int as n from app.leads where location_id = $1', [loc.id])).rows[0].n).toBe(before);
  const utf16 = Buffer.from('{"name":"Zoë Quill","phone":"+13125550100"}', 'utf16le');
  const ok = await raw('POST', `${V}/locations/${loc.id}/leads`, { 'content-type': 'application/json; charset=utf-16le' }, utf16);
  expect([ok.status, ok.body.data?.name]).toEqual([201, 'Zoë Quill']);
});

test('a NUL in a query parameter is a 400 naming the parameter', async () => {
  for (const [q, path] of [['cursor=%00abc', 'cursor'], ['limit=5&phone=%2B1312%00', 'phone']]) {
    const res = await request(t.baseUrl, 'GET', `${V}/locations/${loc.id}/calls?${q}`, { token });
    expect([q, res.status, res.body.error.code, res.body.error.details.issues[0].path]).toEqual([q, 400, 'validation_error', path]);
  }
});

test('text PostgreSQL cannot store (a NUL, an unpaired surrogate) is a 400 naming its field, and nothing is stored', async () => {
  const count = async () => (await request(t.baseUrl, 'GET', `${V}/locations/${loc.id}/faqs`, { token })).body.data.length as number;
  const before = await count();
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ question: 'a\u0000b', answer: 'x' }, 'question'],
    [{ question: 'ok?', answer: 'half \ud800 pair' }, 'answer'],
    [{ question: 'ok?', answer: 'x', ['k\udc00']: 1 }, 'k\udc00'],
  ];
  for (const [body, path] of cases) {
    const res = await request(t.baseUrl, 'POST', `${V}/locations/${loc.id}/faqs`, { token, body });
    expect([path, res.status, res.body.error.code, res.body.error.details.issues[0].path]).toEqual([path, 400, 'validation_error', path]);
  }
  expect(await count()).toBe(before);
  // A surrogate pair (an emoji) is text like any other.
  expect((await request(t.baseUrl, 'POST', `${V}/locations/${loc.id}/faqs`, { token, body: { question: 'Pets? 🐕', answer: 'yes' } })).status).toBe(201);
});

test('lengths count characters: 1,000 emoji fit a 1,000-character question (2,000 UTF-16 units), 1,001 do not', async () => {
  const post = (question: string) => request(t.baseUrl, 'POST', `${V}/locations/${loc.id}/faqs`, { token, body: { question, answer: 'x' } });
  expect((await post('🔥'.repeat(1000))).status).toBe(201);
  const over = await post('🔥'.repeat(1001));
  expect([over.status, over.body.error.details.issues[0].path]).toEqual([400, 'question']);
});

test('year 0000 and offsets past ±15:59 (valid ISO 8601, not held by PostgreSQL) are a 400 naming the field, in a query as in a body', async () => {
  const cases: Array<[string, string, unknown, string]> = [
    ['GET', `${V}/locations/${loc.id}/calls?from=0000-01-01T00:00:00Z`, undefined, 'from'],
    ['GET', `${V}/locations/${loc.id}/availability?from=0000-01-01`, undefined, 'from'],
    ['PATCH', `${V}/locations/${loc.id}/bookings/00000000-0000-4000-8000-000000000000`, { scheduled_date: '0000-01-01' }, 'scheduled_date'],
    // Offsets ISO 8601 allows (to ±23:59) and PostgreSQL does not hold (beyond ±15:59).
    ['GET', `${V}/locations/${loc.id}/calls?to=2026-11-30T06:00:00%2B16:00`, undefined, 'to'],
    ['POST', `${V}/locations/${loc.id}/bookings`, { window_start: '2026-11-30T06:00:00+23:00', name: 'Z', phone: '+15125559006' }, 'window_start'],
    ['POST', `${V}/locations/${loc.id}/bookings`, { window_start: '2026-11-30T06:00:00-23:59', name: 'Z', phone: '+15125559006' }, 'window_start'],
  ];
  for (const [method, path, body, field] of cases) {
    const res = await request(t.baseUrl, method, path, { token, body });
    expect([field, res.status, res.body.error?.code, res.body.error?.details?.issues?.[0]?.path]).toEqual([field, 400, 'validation_error', field]);
  }
});

test('a body that is JSON but no object (null, a number, a string, true, an array) is validation_error at path "", and nothing is stored', async () => {
  const leads = async () => (await t.owner.query('select count(*)::int as n from app.leads where location_id = $1', [loc.id])).rows[0].n as number;
  const before = await leads();
  for (const text of ['null', '42', '"Ada"', 'true', '[]']) {
    for (const [method, path] of [['POST', `${V}/locations/${loc.id}/leads`], ['PATCH', `${V}/locations/${loc.id}`]]) {
      const res = await raw(method, path, { 'content-type': 'application/json', 'idempotency-key': `k-${method}-${text}` }, text);
      expect([text, method, res.status, res.body.error.code, res.body.error.details.issues[0].path]).toEqual([text, method, 400, 'validation_error', '']);
    }
  }
  expect(await leads()).toBe(before);
  // Bytes that are not JSON stay invalid_json.
  expect((await raw('POST', `${V}/locations/${loc.id}/leads`, { 'content-type': 'application/json' }, 'nul')).body.error.code).toBe('invalid_json');
});
