/**
 * The one guarded request (src/net/post.ts) against a real HTTPS receiver with a CA made here:
 * connections kept and reused, a kept connection closed under a request retried on a fresh one,
 * the deadline, the caller's abort, no redirects, and the response read whole but kept to 16 KiB.
 */
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { guardedPost, MAX_RESPONSE_BYTES, type PostOptions } from '../../src/net/post.js';
import { makePki, reply, startHttpsReceiver, type HttpsReceiver, type Responder } from '../support/https.js';

const pki = makePki();
let rx: HttpsReceiver;
/** The connection each request came on, in order. */
const sockets: Socket[] = [];
const noting = (r: Responder): Responder => (req, res) => {
  sockets.push(res.socket as Socket);
  r(req, res);
};

beforeAll(async () => {
  rx = await startHttpsReceiver(pki);
});
afterAll(() => rx.close());
beforeEach(() => {
  sockets.length = 0;
  rx.received.length = 0;
});

/** Answers after 1.5 s; the timer does not hold the process open once the tests are done. */
const late: Responder = (_r, res) => {
  setTimeout(() => res.end('late'), 1500).unref();
};

const post = (o: Partial<PostOptions> = {}) => guardedPost({
  url: rx.url, body: '{"n":1}', headers: { 'content-type': 'application/json' }, timeoutMs: 3000, allowPrivate: true, ca: pki.caPem, ...o,
});

test('requests in turn share kept-alive connections', async () => {
  rx.respond(noting(reply(200, 'ok')));
  for (let i = 0; i < 10; i++) expect(await post()).toMatchObject({ ok: true, complete: true, response_status: 200, response_body: 'ok' });
  expect(rx.received).toHaveLength(10);
  expect(rx.received[0]).toMatchObject({ method: 'POST', body: '{"n":1}' });
  // One request at a time: the pool may open a second connection while the first is being
  // handed back, never one per request.
  expect(new Set(sockets).size).toBeLessThanOrEqual(2);
});

test('a kept connection the receiver closes under a request: sent again on a fresh one, answered', async () => {
  const drop: Responder = (_r, res: ServerResponse) => res.socket?.destroy();
  rx.respond(noting(reply(200, 'first')), noting(drop), noting(reply(200, 'again')));
  expect(await post()).toMatchObject({ ok: true, response_body: 'first' });
  expect(sockets[0]).toBeDefined();
  expect(await post()).toMatchObject({ ok: true, response_status: 200, response_body: 'again', error: null });
  expect(rx.received).toHaveLength(3);
  expect(sockets[2]).not.toBe(sockets[1]);
});

test('no complete answer within the deadline: ETIMEDOUT, sent once', async () => {
  rx.respond(late);
  const r = await post({ timeoutMs: 300 });
  expect(r).toMatchObject({ ok: false, complete: false, aborted: false, error_code: 'ETIMEDOUT', error: 'No complete response within 300 ms' });
  expect(r.duration_ms).toBeGreaterThanOrEqual(300);
  expect(rx.received).toHaveLength(1);
});

test('cut short by the caller: aborted, not an outcome', async () => {
  rx.respond(late);
  const stop = new AbortController();
  setTimeout(() => stop.abort(), 100);
  expect(await post({ signal: stop.signal })).toMatchObject({ ok: false, aborted: true, error_code: 'ABORT_ERR' });
  stop.abort();
  expect(await post({ signal: stop.signal })).toMatchObject({ aborted: true });
  expect(rx.received).toHaveLength(1);
});

test('a redirect is not followed', async () => {
  rx.respond(reply(302, '', { location: 'https://127.0.0.1:1/elsewhere' }));
  expect(await post()).toMatchObject({ ok: false, complete: true, response_status: 302, error: 'Redirect (302) not followed' });
  expect(rx.received).toHaveLength(1);
});

test('a large answer is read to its end and kept to 16 KiB; Retry-After is kept', async () => {
  rx.respond(reply(503, 'x'.repeat(200_000), { 'retry-after': '7' }), reply(200, 'ok'));
  const r = await post();
  expect(r).toMatchObject({ ok: false, complete: true, response_status: 503, response_headers: { 'retry-after': '7' }, error: 'Non-2xx response (503)' });
  expect(r.response_body).toHaveLength(MAX_RESPONSE_BYTES);
  expect(await post()).toMatchObject({ ok: true, response_body: 'ok' });
});

test('GET with no body sends none', async () => {
  rx.respond(reply(200, 'ok'));
  expect(await post({ method: 'GET', body: '' })).toMatchObject({ ok: true });
  expect(rx.received[0]).toMatchObject({ method: 'GET', body: '' });
  expect(rx.received[0].headers['content-length']).toBeUndefined();
});
