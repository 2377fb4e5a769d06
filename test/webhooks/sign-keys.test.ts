/**
 * The Standard Webhooks keys are made once per secret (src/webhooks/sign.ts): the signatures stay
 * those of the secret's decoded bytes, the key object is reused, and the cache stays bounded.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { deliveryHeaders, secretKeyBytes, standardKey, standardSignature } from '../../src/webhooks/sign.js';

const secret = () => `whsec_${randomBytes(32).toString('base64')}`;
const reference = (id: string, ts: number, body: string, s: string) =>
  `v1,${createHmac('sha256', secretKeyBytes(s)).update(`${id}.${ts}.${body}`).digest('base64')}`;

test('a signature made with the kept key equals the one made from the decoded bytes, new secret or kept', () => {
  const s = secret();
  const body = JSON.stringify({ data: { name: 'Ana Díaz' } });
  for (let i = 0; i < 3; i++) expect(standardSignature(`evt_${i}`, 1_700_000_000 + i, body, s)).toBe(reference(`evt_${i}`, 1_700_000_000 + i, body, s));
  // The older base64url form decodes to the same bytes, so to the same key.
  const bytes = randomBytes(32);
  const url = `whsec_${bytes.toString('base64url')}`;
  expect(standardSignature('e', 1, body, url)).toBe(standardSignature('e', 1, body, `whsec_${bytes.toString('base64')}`));
});

test('each secret gets one key object, reused by every delivery signed with it', () => {
  const s = secret();
  const first = standardKey(s);
  expect(standardKey(s)).toBe(first);
  expect(first.export()).toEqual(secretKeyBytes(s));
  const h = deliveryHeaders({ event: 'lead.created', eventId: 'evt_1', deliveryId: 'dlv_1', timestamp: 1_700_000_000, body: '{}', secrets: [s] });
  expect(h['webhook-signature']).toBe(reference('evt_1', 1_700_000_000, '{}', s));
  expect(standardKey(s)).toBe(first);
});

test('the cache is bounded: after 1,024 other secrets the first one is made again, with the same signature', () => {
  const s = secret();
  const first = standardKey(s);
  const before = standardSignature('e', 1, 'b', s);
  for (let i = 0; i < 1024; i++) standardKey(secret());
  const again = standardKey(s);
  expect(again).not.toBe(first);
  expect(standardSignature('e', 1, 'b', s)).toBe(before);
});
