/**
 * The form of INTEGRATION_ENCRYPTION_KEY: 32 bytes, as 64 hex digits or base64. Read by the
 * start-up check (src/config.ts) and by the sealing of tokens (src/integrations/crypto.ts).
 */
export function parseKey(text: string): Buffer {
  const t = text.trim();
  const k = /^[0-9a-f]{64}$/i.test(t) ? Buffer.from(t, 'hex') : Buffer.from(t, 'base64');
  if (k.length !== 32) throw new Error('INTEGRATION_ENCRYPTION_KEY must be 32 bytes, as base64 or 64 hex digits');
  return k;
}
