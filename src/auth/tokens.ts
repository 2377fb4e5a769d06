/**
 * API tokens (docs/api-contract.md §5 "Tokens and scopes"). A token is a UUIDv4, shown once when
 * it is minted; the database keeps only its SHA-256 hex (`token_hash`, what `app.authorize`
 * looks up) and its first 8 characters (`key_prefix`, to recognise a key in a listing).
 *
 * Every place that mints or reads a token uses this module: the CLI's `key create`, the REST
 * routes' bearer check (src/http/route.ts) and the tests' key helper, so a token minted by one is
 * always found by the other.
 */
import { createHash, randomUUID } from 'node:crypto';

const BEARER = /^Bearer ([0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12})$/i;

/** SHA-256 hex of the token, lower-cased first (a UUID is the same token in either case). */
export function hashToken(token: string): string {
  return createHash('sha256').update(token.toLowerCase()).digest('hex');
}

export interface MintedToken {
  /** The plaintext token: shown to the operator once, never stored. */
  token: string;
  /** What the database stores and looks the token up by. */
  hash: string;
  /** The first 8 characters, stored for listings. */
  prefix: string;
}

/** A new token with its hash and prefix. */
export function mintToken(): MintedToken {
  const token = randomUUID();
  return { token, hash: hashToken(token), prefix: token.slice(0, 8) };
}

/** The token of an `Authorization: Bearer <UUIDv4>` header; null when absent or malformed. */
export function bearerToken(authorization: string | undefined): string | null {
  return BEARER.exec(authorization ?? '')?.[1] ?? null;
}
