/**
 * The prose of the OpenAPI document: `info`, the tags (one per area, each described) and the
 * security schemes. A route's `tag` must be one of TAGS (test/rest/openapi.test.ts), which its route
 * module's `area` describes.
 */
import { GENERAL_RULES, RULES } from './rules.js';
import { routeTags } from './routes/index.js';

type Json = Record<string, any>;

/** The version of the document; bumped on every change of the contract (docs/api-contract.md "Compatibility"). */
export const API_VERSION = '1.1.0';

export const INFO: Json = {
  title: 'Switchboard API',
  version: API_VERSION,
  summary: 'Location-scoped token API of the Switchboard AI receptionist for home-services contractors.',
  description: 'Location-scoped token API of the Switchboard AI receptionist. Also served without the /api/v1 prefix.\n\n'
    + 'Request bodies follow their JSON Schema exactly; rules a schema cannot state are listed in each operation\'s description '
    + '(ids in `x-rules-not-in-schema`), each one stated here:\n' + Object.entries(RULES).map(([id, text]) => `- \`${id}\`: ${text}`).join('\n')
    + '\n\nEvery body also obeys:\n' + GENERAL_RULES.map((r) => `- ${r}`).join('\n')
    + '\n\nCompatibility: within a major version nothing breaks without notice. A deprecated operation or field is marked '
    + '`deprecated: true` here and answers with `Deprecation` (RFC 9745) and `Sunset` (RFC 8594) headers for at least 6 months '
    + 'before it goes (docs/api-contract.md "Compatibility and deprecation").',
  contact: { name: 'Switchboard API support', email: 'api@switchboard.invalid', url: 'https://switchboard.invalid/support' },
  license: { name: 'Proprietary', url: 'https://switchboard.invalid/terms' },
};

/**
 * Every tag in documentation order, with its description: the route modules' tags (each module's
 * `area`, src/http/routes/index.ts) and the two sections that are not token endpoints.
 */
export const TAGS: Record<string, string> = {
  ...routeTags,
  'Voice platform': 'Webhooks the voice platform (Retell-compatible) calls: signed with x-retell-signature, not with an API key.',
  'Webhook events': 'Events Switchboard POSTs to your webhook endpoints (the `webhooks` section): one operation per event type. An example body of each type is in GET /event-types.',
};

export const SECURITY_SCHEMES: Json = {
  bearerAuth: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'UUIDv4',
    description: 'An API key token (UUIDv4) minted for one location with a set of scopes. Each operation lists the scope it needs '
      + 'in its security requirement (empty: any valid token); a token without it gets 403 forbidden with details.required_scope. '
      + 'Every answer to an authenticated request carries the key\'s rate limit: `RateLimit-Policy: "default";q=<requests>;w=60` (its budget) '
      + 'and `RateLimit: "default";r=<remaining>;t=<seconds until the window resets>`; a 429 adds `Retry-After`.',
  },
  voiceSignature: {
    type: 'apiKey',
    in: 'header',
    name: 'x-retell-signature',
    description: '`v=<unix ms>,d=<hex HMAC-SHA256>` of the raw body with VOICE_WEBHOOK_SECRET (the retell-sdk `verify` format), 5-minute window.',
  },
};
