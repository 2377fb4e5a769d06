/**
 * Reading a provider's success (docs/integrations.md "Answers we cannot read"). Ids and lists are
 * taken only in the shapes the providers document; anything else (no body, an id that is an object
 * or `true`, a list that is a string) is the provider not answering properly: retried on the
 * schedule like a 503, never recorded as an id, never logged as our own failure. A retry looks
 * before it creates, so a record the unreadable answer did create is found, not written twice.
 */
import { ProviderUnavailable } from './oauth.js';

export class ProviderUnreadable extends ProviderUnavailable {
  constructor(provider: string, what: string) {
    super(`${provider} answered ${what} in a shape we cannot read`);
  }
}

/** An id as the providers give them: a non-empty string (at most 255 characters) or a non-negative safe integer. */
export function idOf(v: unknown): string | null {
  if (typeof v === 'string') return v.length > 0 && v.length <= 255 ? v : null;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return String(v);
  return null;
}

/** The id a success must carry. */
export function requireId(v: unknown, provider: string, what: string): string {
  const id = idOf(v);
  if (id === null) throw new ProviderUnreadable(provider, what);
  return id;
}

/** A list a success must carry: an array of objects. */
export function listOf(v: unknown, provider: string, what: string): Record<string, any>[] {
  if (!Array.isArray(v) || v.some((x) => x === null || typeof x !== 'object' || Array.isArray(x))) throw new ProviderUnreadable(provider, what);
  return v;
}
