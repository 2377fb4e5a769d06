import { createHmac } from 'node:crypto';

/** Lowercase hex HMAC-SHA256 of the raw body bytes, keyed with the endpoint secret (the whole `whsec_…` string). */
export function signBody(body: string | Buffer, secret: string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

/** `v1=<sig>` per secret, space-separated: the current secret first, the previous one during the 24 h after a rotation. */
export function signatureHeader(body: string | Buffer, secrets: string[]): string {
  return secrets.map((s) => `v1=${signBody(body, s)}`).join(' ');
}
