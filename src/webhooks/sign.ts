/**
 * Everything a webhook delivery carries besides its body: the svc-* headers (signature over the
 * raw body, keyed with the whole secret string) and the Standard Webhooks headers (signature over
 * "{id}.{timestamp}.{body}", keyed with the secret's decoded bytes). See docs/webhooks.md.
 */
import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';

export const USER_AGENT = 'Service-Webhooks/1.0';

const PREFIX = 'whsec_';

/** Lowercase hex HMAC-SHA256 of the raw body bytes, keyed with the endpoint secret (the whole `whsec_…` string). */
export function signBody(body: string | Buffer, secret: string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

/** `v1=<sig>` per secret, space-separated: the current secret first, the previous one during the 24 h after a rotation. */
export function signatureHeader(body: string | Buffer, secrets: string[]): string {
  return secrets.map((s) => `v1=${signBody(body, s)}`).join(' ');
}

/**
 * The HMAC key the Standard Webhooks libraries derive from a secret: the base64 text after
 * `whsec_`, decoded. Current secrets are standard base64 with padding (what every library's
 * decoder accepts); secrets issued before that are base64url without padding, and decode here to
 * the same 32 random bytes (Node's base64 decoder reads both alphabets, padding optional).
 */
export function secretKeyBytes(secret: string): Buffer {
  const key = Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64');
  if (key.length === 0) throw new Error('webhook secret decodes to no bytes');
  return key;
}

/**
 * Standard Webhooks keys, made once per secret. Given a Buffer, createHmac checks on every call
 * whether it is a KeyObject or a CryptoKey, and on Node 24 those checks cost several times the
 * MAC of a delivery's body (docs/performance.md, "The drain's own CPU"); a KeyObject passes them
 * at once. Bounded, oldest first out: a worker signs with as many secrets as endpoints it serves.
 */
const standardKeys = new Map<string, KeyObject>();
const STANDARD_KEYS_MAX = 1024;

/** The secret's Standard Webhooks key (secretKeyBytes) as a KeyObject, from the cache when there. */
export function standardKey(secret: string): KeyObject {
  let key = standardKeys.get(secret);
  if (!key) {
    key = createSecretKey(secretKeyBytes(secret));
    if (standardKeys.size >= STANDARD_KEYS_MAX) standardKeys.delete(standardKeys.keys().next().value as string);
    standardKeys.set(secret, key);
  }
  return key;
}

/** `v1,<base64 HMAC-SHA256("{id}.{timestamp}.{body}")>` of one secret (Standard Webhooks). */
export function standardSignature(id: string, timestamp: number, body: string | Buffer, secret: string): string {
  const mac = createHmac('sha256', standardKey(secret));
  mac.update(`${id}.${timestamp}.`);
  mac.update(body);
  return `v1,${mac.digest('base64')}`;
}

export interface DeliveryHeaderInput {
  /** Event type (svc-event). */
  event: string;
  /** Event id: svc-event-id and webhook-id; the same on every attempt. */
  eventId: string;
  /** Attempt id: svc-delivery-id. */
  deliveryId: string;
  /** Unix seconds of this attempt: svc-timestamp and webhook-timestamp. */
  timestamp: number;
  /** The exact body bytes sent. */
  body: string | Buffer;
  /** Current secret first, then the previous one while the rotation overlap lasts. */
  secrets: string[];
  /** A test send (POST webhook-endpoints/{id}/test): adds `svc-test: true`. */
  test?: boolean;
}

/** Every header of one delivery attempt, in one place. */
export function deliveryHeaders(i: DeliveryHeaderInput): Record<string, string> {
  const ts = Math.floor(i.timestamp);
  return {
    'content-type': 'application/json',
    'user-agent': USER_AGENT,
    'svc-event': i.event,
    'svc-event-id': i.eventId,
    'svc-delivery-id': i.deliveryId,
    'svc-timestamp': String(ts),
    'svc-signature': signatureHeader(i.body, i.secrets),
    ...(i.test ? { 'svc-test': 'true' } : {}),
    'webhook-id': i.eventId,
    'webhook-timestamp': String(ts),
    'webhook-signature': i.secrets.map((s) => standardSignature(i.eventId, ts, i.body, s)).join(' '),
  };
}
