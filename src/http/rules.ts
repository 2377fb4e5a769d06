/**
 * Rules the server enforces (400) that JSON Schema cannot state. Each route lists the ones its body
 * is subject to (`RouteSpec.rules`); the OpenAPI document repeats them in the operation's
 * description and, by id, in `x-rules-not-in-schema`, so a client (and test/rest/schema-fuzz.test.ts)
 * knows exactly what the schema leaves out. docs/rest-api.md lists them all.
 */
export const RULES = {
  phone_valid:
    'Phone numbers must be valid, dialable numbers for their country (libphonenumber metadata); the pattern only checks the E.164 shape.',
  emails_distinct: 'E-mail addresses in one list must differ ignoring letter case (uniqueItems compares them exactly).',
  hours_consistent: 'Each interval opens before it closes, and the intervals of one day do not overlap.',
  member_reference: '`assigned_to` must name a member of this location.',
  ipv6_literal: 'A URL whose host is an IPv6 literal must hold a valid IPv6 address.',
  public_target:
    'The URL host must be, or resolve to, a public address (no loopback, private, link-local, special-purpose ranges or IPv6 forms embedding them; see docs/webhooks.md). Checked with DNS at registration.',
  timezone_known:
    'The time zone must be a name of the IANA time-zone database (Area/Location, or UTC) known to the server: those of PostgreSQL 17\'s '
    + 'time-zone data, backward-compatible aliases included; the pattern only checks the shape. An unknown name is a 400.',
} as const;

export type RuleId = keyof typeof RULES;

/** Rules of every request body (no schema keyword states them). */
export const GENERAL_RULES = [
  'Strings must not contain the NUL character (U+0000) or unpaired surrogates (PostgreSQL text cannot hold them).',
  'String lengths (minLength/maxLength) count characters (Unicode code points), as JSON Schema and PostgreSQL do: an emoji counts once.',
  'Dates and instants have a year from 0001, and an instant\'s offset is within ±15:59 (PostgreSQL holds no more).',
  'JSON nests at most 32 levels.',
  'A body is at most 64 KiB (413 above).',
];
