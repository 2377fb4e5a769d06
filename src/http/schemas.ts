/**
 * Shared zod building blocks. Phone numbers go through libphonenumber-js (normalised to E.164),
 * URLs must be https.
 */
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { z, type ZodRawShape } from 'zod';

/** A PATCH body: strict (unknown fields are a 400), every field optional, at least one present. */
export function patchOf<S extends ZodRawShape>(shape: S) {
  return z
    .strictObject(shape)
    .partial()
    .refine((o) => Object.keys(o).length > 0, 'Provide at least one field');
}

export const e164 = z.string().trim().max(40).transform((v, ctx) => {
  const p = parsePhoneNumberFromString(v, 'US');
  if (!p || !p.isValid()) {
    ctx.addIssue({ code: 'custom', message: 'Not a valid phone number' });
    return z.NEVER;
  }
  return p.number as string;
});

export const httpsUrl = z
  .string()
  .max(2048)
  .url()
  .refine((u) => u.startsWith('https://'), 'URL must start with https://');

export const timestamp = z.string().describe('ISO 8601 UTC with milliseconds');

export const timezone = z.string().max(64).refine((tz) => {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return tz.includes('/') || tz === 'UTC';
  } catch {
    return false;
  }
}, 'Unknown IANA time zone');

export const industries = [
  'hvac', 'plumbing', 'electrical', 'roofing', 'appliance_repair', 'garage_door', 'pest_control',
  'landscaping', 'cleaning', 'general_contractor', 'other',
] as const;

export const Location = z.object({
  id: z.string().uuid(),
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
});

export const ApiKey = z.object({
  id: z.string().uuid(),
  location_id: z.string().uuid(),
  label: z.string(),
  key_prefix: z.string(),
  scopes: z.array(z.string()),
  created_at: timestamp,
  last_used_at: timestamp.nullable(),
  revoked_at: timestamp.nullable(),
});

export const LocationPatch = patchOf({
    name: z.string().trim().min(1).max(200),
    slug: z.string().regex(/^[a-z0-9][a-z0-9-]{1,62}$/),
    legal_name: z.string().max(200).nullable(),
    license_number: z.string().max(100).nullable(),
    industry: z.enum(industries),
    website_url: z.string().url().max(2048).regex(/^https?:\/\//).nullable(),
    timezone,
    owner_cell: e164.nullable(),
    service_areas: z.array(z.string().trim().min(1).max(100)).max(100),
    zip_codes: z.array(z.string().regex(/^[0-9A-Za-z -]{3,10}$/)).max(500),
    travel_radius_miles: z.number().min(0).max(1000).nullable(),
  });
