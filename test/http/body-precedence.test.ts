/**
 * What is wrong with a body (415 not JSON, 400 invalid_json, 413 over 64 KiB) is answered only
 * after the token (401), the location (404) and the scope (403), with the rate-limit headers of any
 * answer to a bearer token (docs/api-contract.md §5, "Precedence"); a request without a token is
 * answered 401 before its body is read. Both sides of each status.
 */
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { createLocation, mintKey, request, startTestApi, type Res, type TestApi } from '../support/harness.js';

let t: TestApi;
let a: { id: string };
let b: { id: string };
let token: string;
let readOnly: string;

beforeAll(async () => {
  t = await startTestApi();
  a = await createLocation(t.owner);
  b = await createLocation(t.owner);
  ({ token } = await mintKey(t.owner, a.id));
  ({ token: readOnly } = await mintKey(t.owner, a.id, ['leads:read']));
});
afterAll(() => t.close());

const leads = (loc: { id: string }) => `/api/v1/locations/${loc.id}/leads`;
const malformed = { raw: '{bad', headers: { 'content-type': 'application/json' } };
const notJson = { raw: 'name=x', headers: { 'content-type': 'text/plain' } };
const tooLarge = { body: { name: 'x'.repeat(70 * 1024) } };
type Body = typeof malformed | typeof notJson | typeof tooLarge;

const codeOf = (res: Res) => [res.status, res.body.error?.code];
const limited = (res: Res) => [res.headers.get('ratelimit-policy') !== null, res.headers.get('ratelimit') !== null];

describe.each([
  ['malformed JSON', malformed, [400, 'invalid_json']],
  ['a body not JSON', notJson, [415, 'unsupported_media_type']],
  ['a body over 64 KiB', tooLarge, [413, 'payload_too_large']],
] as [string, Body, [number, string]][])('%s', (_name, body, answer) => {
  test('without a token: 401; with one: its own status', async () => {
    expect(codeOf(await request(t.baseUrl, 'POST', leads(a), { ...body }))).toEqual([401, 'unauthorized']);
    expect(codeOf(await request(t.baseUrl, 'POST', leads(a), { ...body, token: randomUUID() }))).toEqual([401, 'unauthorized']);
    expect(codeOf(await request(t.baseUrl, 'POST', leads(a), { ...body, token }))).toEqual(answer);
  });

  test("another location's path: 404; the token's own: its own status", async () => {
    const foreign = await request(t.baseUrl, 'POST', leads(b), { ...body, token });
    expect([...codeOf(foreign), ...limited(foreign)]).toEqual([404, 'not_found', true, true]);
    expect(codeOf(await request(t.baseUrl, 'POST', leads(a), { ...body, token }))).toEqual(answer);
  });

  test('a token without the scope: 403 with the rate-limit headers; with it: its own status, with them too', async () => {
    const narrow = await request(t.baseUrl, 'POST', leads(a), { ...body, token: readOnly });
    expect([...codeOf(narrow), ...limited(narrow)]).toEqual([403, 'forbidden', true, true]);
    const full = await request(t.baseUrl, 'POST', leads(a), { ...body, token });
    expect([...codeOf(full), ...limited(full)]).toEqual([...answer, true, true]);
  });
});

/** Sends the headers of a `bytes`-long body and its first 16 KiB only; resolves with the status if the server answers anyway. */
function answerBeforeBody(path: string, bytes: number, authorization?: string): Promise<number | 'waited'> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${t.baseUrl}${path}`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'content-length': bytes, ...(authorization ? { authorization } : {}) },
    }, (res) => {
      res.resume();
      clearTimeout(timer);
      req.destroy();
      resolve(res.statusCode ?? 0);
    });
    const timer = setTimeout(() => { req.destroy(); resolve('waited'); }, 2_000);
    req.on('error', (e) => { if (!req.destroyed) reject(e); });
    req.write(`{"name":"${'x'.repeat(16 * 1024)}`);
  });
}

test('a request without a token is answered 401 before its body arrives; one with a token waits for it (the 413 comes after the checks)', async () => {
  expect(await answerBeforeBody(leads(a), 10 * 1024 * 1024)).toBe(401);
  expect(await answerBeforeBody(leads(a), 10 * 1024 * 1024, 'Basic eDp5')).toBe(401);
  expect(await answerBeforeBody(leads(a), 10 * 1024 * 1024, `Bearer ${token}`)).toBe('waited');
});

test('an operation that takes no body refuses any other than {} with 400, whatever it is (413 and 415 are where there is a body)', async () => {
  const faq = `/api/v1/locations/${a.id}/faqs/${randomUUID()}`;
  for (const body of [malformed, notJson, tooLarge, { body: { x: 1 } }] as Body[]) {
    const res = await request(t.baseUrl, 'DELETE', faq, { ...body, token });
    expect([res.status, res.headers.get('ratelimit') !== null]).toEqual([400, true]);
  }
  // One answer for every body it does not take (malformed JSON stays invalid_json): the same code,
  // message and issue whether the body is too long, not JSON, or JSON other than {}.
  const noBody = { code: 'validation_error', message: 'Request validation failed', details: { issues: [{ path: '', message: 'This operation takes no body' }] } };
  for (const body of [notJson, tooLarge, { body: { x: 1 } }, { body: [] }, { body: [{}] }] as Body[]) {
    expect((await request(t.baseUrl, 'DELETE', faq, { ...body, token })).body.error).toEqual(noBody);
  }
  expect(codeOf(await request(t.baseUrl, 'DELETE', faq, { body: {}, token }))).toEqual([404, 'not_found']);
  expect(codeOf(await request(t.baseUrl, 'DELETE', faq, { token }))).toEqual([404, 'not_found']);
  expect(codeOf(await request(t.baseUrl, 'DELETE', faq, { ...notJson, token: readOnly }))).toEqual([403, 'forbidden']);
});
