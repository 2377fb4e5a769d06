import { assertTarget, isPublicAddress } from '../../src/net/ssrf.js';
import { clip, renderMessage, slackPayload, SMS_MAX } from '../../src/notify/messages.js';
import { postOutbound } from '../../src/notify/outbound.js';

const strict = { WEBHOOK_ALLOW_PRIVATE_TARGETS: false };
const lax = { WEBHOOK_ALLOW_PRIVATE_TARGETS: true };
const send = (url: string, cfg = strict) => postOutbound(url, { headers: {}, body: '{}' }, cfg, { timeoutMs: 5000 });

describe('SSRF guard (the shared assertion, as notifications meet it)', () => {
  test.each([
    'http://93.184.216.34/hook', 'ftp://93.184.216.34/', 'https://127.0.0.1/x', 'https://10.1.2.3/', 'https://192.168.0.10/',
    'https://172.16.5.4/', 'https://169.254.169.254/latest/meta-data', 'https://100.64.0.1/', 'https://[::1]/',
    'https://[fd00::1]/', 'https://[::ffff:127.0.0.1]/', 'https://0.0.0.0/', 'https://224.0.0.1/', 'https://localhost/',
    'https://user:pw@93.184.216.34/', 'not a url',
  ])('refuses %s before anything is sent, as a target never worth retrying', async (u) => {
    await expect(send(u)).rejects.toMatchObject({ code: 'EBLOCKEDTARGET' });
  });

  test('accepts a public https address', async () => {
    await expect(assertTarget('https://93.184.216.34/services/T/B/X', { allowPrivate: false })).resolves.toBeInstanceOf(URL);
    expect(isPublicAddress('2606:4700::1111')).toBe(true);
  });

  test('WEBHOOK_ALLOW_PRIVATE_TARGETS lifts the address rule but never the https rule', async () => {
    await expect(assertTarget('https://127.0.0.1:8443/x', { allowPrivate: true })).resolves.toBeInstanceOf(URL);
    await expect(send('http://127.0.0.1:8443/x', lax)).rejects.toMatchObject({ code: 'EBLOCKEDTARGET' });
  });
});

describe('messages', () => {
  const base = { location_id: 'l', created_at: '2026-11-21T15:04:05.123Z' };

  test('SMS stays under 320 characters however long the details', () => {
    const m = renderMessage({
      event: { ...base, event: 'call.emergency', data: { caller_name: 'A'.repeat(200), issue_summary: 'water '.repeat(100), urgency_level: 5 } },
      business: 'B'.repeat(150), callbackPhone: '+12125550142',
    });
    expect(m.sms.length).toBeLessThanOrEqual(SMS_MAX);
    expect(m.sms.length).toBeLessThan(320 + 1);
    expect(clip('one two three', 8)).toBe('one two…');
  });

  test('an SMS clipped for length keeps whom to call back, and a summary that ends a sentence gets no second full stop', () => {
    const lead = renderMessage({
      event: { ...base, event: 'lead.created', data: { name: 'Alexander '.repeat(19), service_type: 'furnace '.repeat(20) } },
      business: 'Acme', callbackPhone: '+12125550142',
    });
    expect(lead.sms.length).toBeLessThanOrEqual(SMS_MAX);
    expect(lead.sms).toMatch(/… Call back \+12125550142$/);
    const emergency = renderMessage({
      event: { ...base, event: 'call.emergency', data: { caller_name: 'Marcus Lee', issue_summary: 'Gas smell near furnace, CO alarm sounding.', reason: 'warm_transfer' } },
      business: 'Acme', callbackPhone: '+15125550177',
    });
    expect(emergency.sms).toBe('EMERGENCY Acme: Marcus Lee - Gas smell near furnace, CO alarm sounding. Transferring to you now. Call back +15125550177');
    const plain = renderMessage({ event: { ...base, event: 'call.emergency', data: { caller_name: 'Dana', issue_summary: 'No heat' } }, business: 'Acme', callbackPhone: null });
    expect(plain.sms).toBe('EMERGENCY Acme: Dana - No heat.');
  });

  test('Slack text escapes markup so caller-supplied text cannot become a link or mention', () => {
    const m = renderMessage({
      event: { ...base, event: 'lead.created', data: { name: '<https://evil.test|click> <!channel>', service_type: 'drain', phone: '+13125550177' } },
      business: 'Acme', callbackPhone: null,
    });
    const p = slackPayload(m);
    expect(p.text).not.toContain('<');
    expect(JSON.stringify(p.blocks)).not.toContain('<!channel>');
    expect(p.text).toContain('+13125550177');
  });

  test('each event type reads as a sentence', () => {
    const cases: Array<[string, Record<string, unknown>, RegExp]> = [
      ['lead.updated', { name: 'Jo', status: 'contacted', previous_status: 'new' }, /Lead new → contacted/],
      ['booking.created', { service_type: 'AC install', scheduled_date: '2026-12-01', scheduled_time: '09:30', status: 'scheduled' }, /New booking/],
      ['booking.updated', { status: 'cancelled', scheduled_date: '2026-12-01' }, /Booking cancelled/],
      ['call.ended', { caller_name: 'Sam', outcome: 'booked' }, /Call ended/],
      ['spam.blocked', { caller_phone: '***-***-0000', reason: 'blocklist' }, /Spam call blocked/],
    ];
    for (const [event, data, title] of cases) {
      const m = renderMessage({ event: { ...base, event, data }, business: 'Acme', callbackPhone: null });
      expect(m.title).toMatch(title);
      expect(m.sms.length).toBeLessThanOrEqual(SMS_MAX);
    }
  });

  test('an estimated value reads as US dollars, at most two decimals; a non-number is left out', () => {
    const value = (estimated_value: unknown) => renderMessage({
      event: { ...base, event: 'lead.created', data: { name: 'Jo', estimated_value } }, business: 'Acme', callbackPhone: null,
    }).facts.find(([label]) => label === 'Estimated value')?.[1];
    expect(value(1250.5)).toBe('$1,250.5');
    expect(value('350')).toBe('$350');
    expect(value(1234567.891)).toBe('$1,234,567.89');
    expect(value('n/a')).toBeUndefined();
  });
});

describe('postOutbound', () => {
  test('a receiver that never answers fails the try at the deadline', async () => {
    const { makePki, silence, startHttpsReceiver } = await import('../support/https.js');
    const pki = makePki();
    const rx = await startHttpsReceiver(pki);
    rx.respond(silence);
    try {
      await expect(postOutbound(rx.url, { headers: {}, body: '{}' }, lax, { timeoutMs: 200, ca: pki.caPem }))
        .rejects.toMatchObject({ code: 'ETIMEDOUT' });
    } finally {
      await rx.close();
    }
  });
});
