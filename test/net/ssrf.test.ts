/**
 * The SSRF rule (src/net/ssrf.ts) form by form: every IPv6 form that embeds or maps an IPv4 and
 * every IANA special-purpose range is refused at registration (HTTP 400 through the API, for
 * webhook endpoints and integrations) and at connect time (the guarded lookup refusing a resolved
 * address, IP literals refused before dialling, for webhook deliveries and notifications).
 */
import type dns from 'node:dns';
import { guardedPost } from '../../src/net/post.js';
import { addressProblem, assertTarget, guardedLookup, rangeProblem, type Resolver, SsrfError } from '../../src/net/ssrf.js';
import { postOutbound } from '../../src/notify/outbound.js';
import { createLocation, mintKey, request, startTestApi, type TestApi } from '../support/harness.js';
import { makePki, startHttpsReceiver, type HttpsReceiver, type TestPki } from '../support/https.js';

interface Form {
  /** The address as written in a URL (without brackets). */
  ip: string;
  /** What the refusal reason must name (range, and the embedded IPv4 where there is one). */
  names: RegExp;
}

const refused: Form[] = [
  // IPv6 forms that embed or map an IPv4.
  { ip: '::127.0.0.1', names: /IPv4-compatible.*::\/96.*embeds 127\.0\.0\.1/ },
  { ip: '::10.0.0.1', names: /IPv4-compatible.*embeds 10\.0\.0\.1/ },
  { ip: '::169.254.169.254', names: /IPv4-compatible.*embeds 169\.254\.169\.254/ },
  { ip: '::8.8.8.8', names: /IPv4-compatible.*embeds 8\.8\.8\.8/ }, // refused whatever it embeds
  { ip: '::ffff:127.0.0.1', names: /IPv4-mapped.*embeds 127\.0\.0\.1.*loopback/ },
  { ip: '::ffff:10.0.0.1', names: /IPv4-mapped.*embeds 10\.0\.0\.1.*private-use/ },
  { ip: '::ffff:169.254.169.254', names: /IPv4-mapped.*embeds 169\.254\.169\.254.*link-local/ },
  { ip: '::ffff:7f00:1', names: /IPv4-mapped.*embeds 127\.0\.0\.1/ },
  { ip: '64:ff9b::127.0.0.1', names: /NAT64.*64:ff9b::\/96.*embeds 127\.0\.0\.1/ },
  { ip: '64:ff9b::192.168.1.1', names: /NAT64.*embeds 192\.168\.1\.1/ },
  { ip: '64:ff9b:1:7f00:0:100::', names: /64:ff9b:1::\/48.*embeds 127\.0\.0\.1/ },
  { ip: '64:ff9b:1::808:808', names: /64:ff9b:1::\/48/ },
  { ip: '2002:7f00:1::1', names: /6to4.*2002::\/16.*embeds 127\.0\.0\.1/ },
  { ip: '2002:a9fe:a9fe::1', names: /6to4.*embeds 169\.254\.169\.254/ },
  { ip: '2002:808:808::1', names: /6to4.*embeds 8\.8\.8\.8/ },
  // Teredo: client IPv4 = last 32 bits XOR ffff:ffff.
  { ip: '2001:0:4136:e378:8000:63bf:80ff:fffe', names: /Teredo.*2001::\/32.*embeds 127\.0\.0\.1/ },
  { ip: '2001:0:4136:e378:8000:63bf:f5ff:fffe', names: /Teredo.*embeds 10\.0\.0\.1/ },
  // IANA IPv4 special-purpose registry, multicast, reserved.
  { ip: '0.0.0.0', names: /0\.0\.0\.0\/8/ },
  { ip: '0.1.2.3', names: /0\.0\.0\.0\/8/ },
  { ip: '10.1.2.3', names: /10\.0\.0\.0\/8/ },
  { ip: '100.64.0.1', names: /100\.64\.0\.0\/10/ },
  { ip: '100.100.100.200', names: /100\.64\.0\.0\/10/ },
  { ip: '127.0.0.1', names: /loopback, 127\.0\.0\.0\/8/ },
  { ip: '127.255.1.2', names: /127\.0\.0\.0\/8/ },
  { ip: '169.254.169.254', names: /169\.254\.0\.0\/16/ },
  { ip: '172.16.0.1', names: /172\.16\.0\.0\/12/ },
  { ip: '172.31.255.254', names: /172\.16\.0\.0\/12/ },
  { ip: '192.0.0.1', names: /192\.0\.0\.0\/24/ },
  { ip: '192.0.2.10', names: /192\.0\.2\.0\/24/ },
  { ip: '192.31.196.1', names: /192\.31\.196\.0\/24/ },
  { ip: '192.52.193.1', names: /192\.52\.193\.0\/24/ },
  { ip: '192.88.99.1', names: /192\.88\.99\.0\/24/ },
  { ip: '192.168.1.1', names: /192\.168\.0\.0\/16/ },
  { ip: '192.175.48.1', names: /192\.175\.48\.0\/24/ },
  { ip: '198.18.0.1', names: /198\.18\.0\.0\/15/ },
  { ip: '198.19.255.1', names: /198\.18\.0\.0\/15/ },
  { ip: '198.51.100.7', names: /198\.51\.100\.0\/24/ },
  { ip: '203.0.113.9', names: /203\.0\.113\.0\/24/ },
  { ip: '224.0.0.1', names: /multicast, 224\.0\.0\.0\/4/ },
  { ip: '239.255.255.250', names: /224\.0\.0\.0\/4/ },
  { ip: '240.0.0.1', names: /reserved, 240\.0\.0\.0\/4/ },
  { ip: '255.255.255.255', names: /limited broadcast, 255\.255\.255\.255\/32/ },
  // IANA IPv6 special-purpose registry and the rest outside 2000::/3.
  { ip: '::', names: /unspecified, ::\/128/ },
  { ip: '::1', names: /loopback, ::1\/128/ },
  { ip: '100::1', names: /discard-only, 100::\/64/ },
  { ip: '2001::1', names: /Teredo, 2001::\/32/ },
  { ip: '2001:2::1', names: /2001::\/23/ },
  { ip: '2001:20::1', names: /2001::\/23/ },
  { ip: '2001:db8::1', names: /documentation, 2001:db8::\/32/ },
  { ip: '2620:4f:8000::1', names: /2620:4f:8000::\/48/ },
  { ip: '3fff::1', names: /documentation, 3fff::\/20/ },
  { ip: '5f00::1', names: /5f00::\/16/ },
  { ip: 'fc00::1', names: /unique-local, fc00::\/7/ },
  { ip: 'fd00:ec2::254', names: /unique-local, fc00::\/7/ },
  { ip: 'fe80::1', names: /link-local, fe80::\/10/ },
  { ip: 'fec0::1', names: /site-local, fec0::\/10/ },
  { ip: 'ff02::1', names: /multicast, ff00::\/8/ },
  { ip: '4000::1', names: /outside global unicast 2000::\/3/ },
];

/** Public addresses the rule must keep allowing (NAT64/mapped forms of a public IPv4 included). */
const allowed = ['8.8.8.8', '93.184.215.14', '::ffff:8.8.8.8', '64:ff9b::8.8.8.8', '2606:4700::1111', '2001:4860:4860::8888'];

const bracket = (ip: string) => (ip.includes(':') ? `[${ip}]` : ip);
/** A resolver that answers every name with `ip` (the "resolved address" of the connect-time check). */
const answering = (ip: string): Resolver => (_host, _opts, cb) => cb(null, [{ address: ip, family: ip.includes(':') ? 6 : 4 }]);
/** The registration-time refusal reason (null when allowed), from the shared assertion. */
const refusal = (url: string, resolve?: Resolver) =>
  assertTarget(url, { allowPrivate: false, resolve }).then(() => null, (e: SsrfError) => {
    expect(e).toBeInstanceOf(SsrfError);
    return e.message;
  });
const normalised = (ip: string) => new URL(`https://${bracket(ip)}/`).hostname.replace(/^\[|\]$/g, '');

describe('the rule', () => {
  test.each(refused)('refuses $ip', ({ ip, names }) => {
    expect(addressProblem(ip)).toMatch(names);
    // The same address as the URL parser normalises it (what the checks actually see).
    expect(addressProblem(normalised(ip))).toMatch(names);
  });

  test.each(allowed)('allows %s', (ip) => {
    expect(addressProblem(ip)).toBeNull();
    expect(addressProblem(normalised(ip))).toBeNull();
  });

  test('IPv4 literal spellings the URL parser accepts are normalised before the check', async () => {
    for (const u of ['https://2130706433/', 'https://0x7f.1/', 'https://127.1/', 'https://0177.0.0.1/']) {
      expect(await refusal(u)).toMatch(/127\.0\.0\.1 is not public \(loopback/);
    }
  });
});

describe('at registration', () => {
  let t: TestApi;
  let loc: { id: string };
  let token: string;
  let endpointId: string;

  beforeAll(async () => {
    t = await startTestApi({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
    loc = await createLocation(t.owner);
    ({ token } = await mintKey(t.owner, loc.id));
    const ep = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/webhook-endpoints`, {
      token, body: { url: 'https://93.184.215.14/hooks', events: ['lead.created'] },
    });
    expect(ep.status).toBe(201);
    endpointId = ep.body.data.id;
  });
  afterAll(() => t.close());

  test.each(refused)('$ip → 400 for webhook create, webhook patch and integration create', async ({ ip, names }) => {
    const url = `https://${bracket(ip)}/hook`;
    const create = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/webhook-endpoints`, { token, body: { url, events: ['lead.created'] } });
    const patch = await request(t.baseUrl, 'PATCH', `/api/v1/webhook-endpoints/${endpointId}`, { token, body: { url } });
    const integ = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/integrations`, { token, body: { provider: 'n8n', webhook_url: url } });
    for (const [res, path] of [[create, 'url'], [patch, 'url'], [integ, 'webhook_url']] as const) {
      expect([url, res.status, res.body.error?.code]).toEqual([url, 400, 'validation_error']);
      expect(res.body.error.details.issues[0]).toEqual({ path, message: expect.stringMatching(names) });
    }
  });

  test('a host name is judged by every address it resolves to; its refusal names the range, never the address', async () => {
    const CIDR = /[\da-f:.]+\/\d+/gi;
    for (const { ip } of refused) {
      const message = (await refusal('https://hooks.example.com/x', answering(ip)))!;
      expect(message).toMatch(/^Host hooks\.example\.com resolves to a non-public address \(.+\)$/);
      // Every range the literal's refusal names, and no address (an internal name's would be a probe's answer).
      for (const range of addressProblem(ip)!.match(CIDR)!) expect([ip, message]).toEqual([ip, expect.stringContaining(range)]);
      const rest = message.replace(CIDR, '');
      expect([ip, rest]).toEqual([ip, expect.not.stringMatching(/\d+\.\d+\.\d+\.\d+/)]);
      expect([ip, rest.includes(normalised(ip)) || rest.includes(ip)]).toEqual([ip, false]);
    }
    for (const ip of allowed) expect(await refusal('https://hooks.example.com/x', answering(ip))).toBeNull();
    const mixed: Resolver = (_h, _o, cb) => cb(null, [{ address: '8.8.8.8', family: 4 }, { address: '::ffff:10.0.0.1', family: 6 }]);
    expect(await refusal('https://hooks.example.com/x', mixed)).toBe('Host hooks.example.com resolves to a non-public address (IPv4-mapped, ::ffff:0:0/96: private-use, 10.0.0.0/8)');
  });

  test('public forms are accepted (201)', async () => {
    for (const ip of allowed) {
      const url = `https://${bracket(ip)}/hook`;
      const res = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/webhook-endpoints`, { token, body: { url, events: ['lead.created'] } });
      expect([url, res.status]).toEqual([url, 201]);
    }
    const integ = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/integrations`, {
      token, body: { provider: 'zapier', webhook_url: 'https://[64:ff9b::808:808]/hook' },
    });
    expect(integ.status).toBe(201);
  });
});

describe('at connect time', () => {
  let pki: TestPki;
  let rx: HttpsReceiver;

  beforeAll(async () => {
    pki = makePki();
    rx = await startHttpsReceiver(pki);
  });
  afterAll(() => rx.close());

  const post = (url: string, resolve: Resolver, allowPrivate = false) =>
    guardedPost({ url, body: '{}', headers: { 'content-type': 'application/json' }, timeoutMs: 5000, allowPrivate, ca: pki.caPem, resolve });

  test('control: with the injected resolver answering the receiver address, the POST arrives', async () => {
    const r = await post(`https://localhost:${rx.port}/hook`, answering('127.0.0.1'), true);
    expect(r).toMatchObject({ ok: true, blocked: false, response_status: 200 });
    expect(rx.received).toHaveLength(1);
  });

  test.each(refused)('a name resolving to $ip is refused by the guarded lookup, naming the range and not the address; nothing is sent', async ({ ip }) => {
    // The range as the registration-time check words it (tested above to name no address).
    const names = `resolves to a non-public address (${rangeProblem(ip)})`;
    const before = rx.received.length;
    const r = await post(`https://localhost:${rx.port}/hook`, answering(ip));
    expect(r).toMatchObject({ ok: false, blocked: true, response_status: null });
    expect(r.error).toContain(`localhost ${names}`);
    expect(rx.received.length).toBe(before);

    // The lookup on its own, as node:net calls it (both single-address and `all` forms).
    const lookup = guardedLookup(false, answering(ip));
    for (const all of [false, true]) {
      const err = await new Promise<Error | null>((done) => lookup('hooks.example.com', { all } as dns.LookupOptions, (e) => done(e)));
      expect(err).toBeInstanceOf(SsrfError);
      expect(err!.message).toBe(`Refused to connect: hooks.example.com ${names}`);
    }
  });

  test.each(allowed)('the guarded lookup hands %s to the socket', async (ip) => {
    const got = await new Promise<unknown>((done, fail) =>
      guardedLookup(false, answering(ip))('hooks.example.com', {}, (e, address) => (e ? fail(e) : done(address))));
    expect(got).toBe(ip);
  });

  test.each(refused)('the IP literal $ip is refused before dialling (webhooks and notifications)', async ({ ip, names }) => {
    const url = `https://${bracket(ip)}:${rx.port}/hook`;
    const r = await post(url, answering('127.0.0.1'));
    expect(r).toMatchObject({ ok: false, blocked: true });
    expect(r.error).toMatch(names);
    await expect(postOutbound(url, { headers: {}, body: '{}' }, { WEBHOOK_ALLOW_PRIVATE_TARGETS: false }, { timeoutMs: 5000, ca: pki.caPem }))
      .rejects.toMatchObject({ code: 'EBLOCKEDTARGET', message: expect.stringMatching(names) });
  });
});
