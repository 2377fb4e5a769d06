/**
 * Shared zod building blocks. Each states in the published JSON Schema (pattern, enum, lengths)
 * the rule it validates with, so a client generated from the OpenAPI document sends bodies the
 * server accepts; what JSON Schema cannot say is listed in src/http/rules.ts.
 */
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { z, type ZodRawShape } from 'zod';
import { industries } from '../allowed-values.js';
import { TIME_ZONES } from './timezones.js';

/** A PATCH body: strict (unknown fields are a 400), every field optional, at least one present. */
export function patchOf<S extends ZodRawShape>(shape: S) {
  return z
    .strictObject(shape)
    .partial()
    .refine((o) => Object.keys(o).length > 0, 'Provide at least one field')
    .meta({ minProperties: 1 });
}

/** Trimmed text with at least one non-blank character (published as minLength 1 + pattern \S). */
export const text = (max: number) => z.string().trim().min(1).max(max).meta({ pattern: '\\S' });

/** The E.164 shape: + then 7 to 15 digits, the first not 0. */
export const E164_PATTERN = '^\\+[1-9][0-9]{6,14}$';

/**
 * What a phone number may be written with: digits, one leading +, and the separators of national
 * formats. libphonenumber also finds a number inside free text ("call +1312… now", an extension,
 * full-width digits), which would store a number the client did not quite send.
 */
const PHONE_CHARS = /^\+?[0-9(][0-9 ().-]*$/;

export const e164 = z
  .string()
  .trim()
  .max(40)
  .regex(PHONE_CHARS, 'Not a valid phone number: digits, a leading + and spaces, dots, dashes or parentheses only')
  .transform((v, ctx) => {
    const p = parsePhoneNumberFromString(v, 'US');
    if (!p || !p.isValid()) {
      ctx.addIssue({ code: 'custom', message: 'Not a valid phone number' });
      return z.NEVER;
    }
    return p.number as string;
  })
  .meta({
    id: 'PhoneNumber',
    pattern: E164_PATTERN,
    examples: ['+13125550100'],
    description: 'E.164 phone number, e.g. +13125550100; it must be a valid number for its country. US national formats such as (312) 555-0100 are also accepted and stored as E.164. Digits, a leading + and spaces, dots, dashes or parentheses only (no extension, no other text).',
  });

const OCTET = '(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])';
const LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
/**
 * Host: a DNS name whose last label starts with a letter (so no URL parser reads it as an IPv4
 * number), a dotted IPv4 address, or an IPv6 literal in brackets; optional port 0–65535; then any
 * printable ASCII path, query and fragment. Every string matching it parses as a WHATWG URL, except
 * an IPv6 literal that is not a valid address (checked separately: rule ipv6_literal).
 */
const URL_REST =
  `(?:(?:${LABEL}\\.)*[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?|${OCTET}(?:\\.${OCTET}){3}|\\[[0-9A-Fa-f:.]{2,45}\\])` +
  '(?::(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}|0))?' +
  '(?:[/?#][!-~]*)?$';
export const HTTPS_URL_PATTERN = `^https://${URL_REST}`;
export const HTTP_URL_PATTERN = `^https?://${URL_REST}`;


const urlOf = (id: string, pattern: string, message: string, description: string) =>
  z
    .string()
    .max(2048)
    .regex(new RegExp(pattern), message)
    .refine((u) => URL.canParse(u), 'Not a valid URL')
    .meta({ id, pattern, description });

/** A URL we POST to: https only (its host is checked against the SSRF rule by the route). */
export const httpsUrl = urlOf(
  'HttpsUrl',
  HTTPS_URL_PATTERN,
  'URL must start with https:// and name a host (DNS name, IPv4 or [IPv6]) with an optional port',
  'https:// URL (ASCII host: a DNS name in punycode, an IPv4 address or an [IPv6] literal)',
);

/** A URL we only display (the business website): http or https. */
export const webUrl = urlOf(
  'HttpUrl',
  HTTP_URL_PATTERN,
  'URL must start with http:// or https:// and name a host (DNS name, IPv4 or [IPv6]) with an optional port',
  'http(s):// URL (ASCII host: a DNS name in punycode, an IPv4 address or an [IPv6] literal)',
);

/** ISO 8601 has a year 0000; PostgreSQL (and the calendar) do not: a 400 naming its field, not a database refusal. */
const notYearZero = (v: string) => !v.startsWith('0000');
/** A calendar date, YYYY-MM-DD. */
export const isoDate = z.iso.date().refine(notYearZero, 'There is no year 0000');
/**
 * ISO 8601 allows any offset up to ±23:59; PostgreSQL holds up to ±15:59 (every zone in use is
 * within −12 and +14): beyond that, a 400 naming the field, not a database refusal.
 */
const offsetHeld = (v: string) => {
  const m = /([+-])(\d{2}):?\d{2}$/.exec(v);
  return !m || Number(m[2]) <= 15;
};
/** An instant with an offset (`2026-12-01T14:00:00.000Z`, `2026-12-01T08:00:00-06:00`), as PostgreSQL parses it. */
export const isoInstant = z.iso
  .datetime({ offset: true })
  .refine(notYearZero, 'There is no year 0000')
  .refine(offsetHeld, 'The offset must be within ±15:59');

export const timestamp = z.iso.datetime().meta({ id: 'Timestamp', description: 'ISO 8601 UTC with milliseconds' });

/**
 * An integer query parameter (`limit`, `days`, `range`): decimal digits only, then the range. A
 * query value is text, and Number() would also read `0x10`, `1e1`, ` 10`, `+10` or `10.0` as a
 * number the document (`type: integer`) does not describe; each is a 400 naming the parameter.
 * The document publishes the integer and its range, as before.
 */
export const queryInt = (min: number, max: number) =>
  z.preprocess((v, ctx) => {
    if (typeof v === 'string' && /^[0-9]{1,10}$/.test(v)) return Number(v);
    ctx.addIssue({ code: 'custom', message: 'Expected an integer written in decimal digits', input: v });
    return z.NEVER;
  }, z.number().int().min(min).max(max));

/** Every record id. */
export const uuid = z.string().uuid().meta({ id: 'Uuid' });

/** Area/Location names and UTC: the shape the document publishes for a time zone. */
const ZONE_AREAS = [...new Set(TIME_ZONES.filter((n) => n.includes('/')).map((n) => n.split('/')[0]))];
export const TIME_ZONE_PATTERN = `^(?:UTC|(?:${ZONE_AREAS.join('|')})/[A-Za-z0-9_+-]+(?:/[A-Za-z0-9_+-]+)?)$`;
const ZONES = new Set<string>(TIME_ZONES);

/**
 * An IANA time-zone name from the accepted list (src/http/timezones.ts). The document publishes its
 * shape (TIME_ZONE_PATTERN) and the rule `timezone_known`, not the 554 names: the enum was 10 KB of
 * the OpenAPI document for one request field.
 */
export const timezone = z
  .string()
  // One issue for an unknown zone: the name check runs only on what has the shape (abort).
  .regex(new RegExp(TIME_ZONE_PATTERN), { message: 'Unknown IANA time zone', abort: true })
  .refine((v) => ZONES.has(v), 'Unknown IANA time zone')
  .meta({ id: 'TimeZone', pattern: TIME_ZONE_PATTERN, description: 'IANA time-zone name (Area/Location, e.g. America/Chicago, or UTC); rule timezone_known' });

export const Location = z.object({
  id: uuid,
  slug: z.string(),
  name: z.string(),
  legal_name: z.string().nullable(),
  license_number: z.string().nullable(),
  industry: z.enum(industries),
  website_url: z.string().nullable(),
  timezone: z.string(),
  owner_cell: z.string().nullable(),
  service_areas: z.array(z.string()),
  zip_codes: z.array(z.string()),
  travel_radius_miles: z.number().nullable(),
  service_phone: z.string().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
}).meta({ id: 'Location' });

export const ApiKey = z.object({
  id: uuid,
  location_id: uuid,
  label: z.string(),
  key_prefix: z.string(),
  scopes: z.array(z.string()),
  created_at: timestamp,
  last_used_at: timestamp.nullable(),
  revoked_at: timestamp.nullable(),
}).meta({ id: 'ApiKey' });

export const LocationPatch = patchOf({
    name: text(200),
    slug: z.string().regex(/^[a-z0-9][a-z0-9-]{1,62}$/),
    legal_name: z.string().max(200).nullable(),
    license_number: z.string().max(100).nullable(),
    industry: z.enum(industries),
    website_url: webUrl.nullable(),
    timezone,
    owner_cell: e164.nullable(),
    service_areas: z.array(text(100)).max(100),
    zip_codes: z.array(z.string().regex(/^[0-9A-Za-z -]{3,10}$/)).max(500),
    travel_radius_miles: z.number().min(0).max(1000).nullable(),
  }).meta({ id: 'LocationUpdate' });
