/**
 * What people read: one event rendered for Slack (text + blocks), SMS (one short line) and e-mail
 * (subject, plain text, simple HTML). Link-free on purpose: a notification says who called, what
 * for, how urgent and the number to call back; the dashboard is where details live.
 */

export interface EventBody {
  event: string;
  location_id: string;
  created_at: string;
  data: Record<string, unknown>;
}

export interface MessageInput {
  event: EventBody;
  business: string;
  /** Unmasked number to call back (event data masks caller phones). */
  callbackPhone: string | null;
}

export interface Message {
  /** One-line headline, e.g. "Emergency call — Acme Heating". */
  title: string;
  /** Label/value facts in reading order. */
  facts: Array<[string, string]>;
  /** Shortest form: the SMS text (≤ 320 characters). */
  sms: string;
}

const str = (v: unknown): string | null => (typeof v === 'string' && v.trim() !== '' ? v.trim() : typeof v === 'number' ? String(v) : null);

/** One formatter for every message: `toLocaleString` with options builds a new one per call. */
const dollars = new Intl.NumberFormat('en-US', { maximumFractionDigits: 2 });

function money(v: unknown): string | null {
  const n = typeof v === 'number' ? v : typeof v === 'string' && v !== '' ? Number(v) : NaN;
  return Number.isFinite(n) ? `$${dollars.format(n)}` : null;
}

function urgency(v: unknown): string | null {
  const n = typeof v === 'number' ? v : Number(v);
  if (!Number.isInteger(n)) return null;
  const word = n >= 5 ? 'emergency' : n >= 4 ? 'high' : n >= 2 ? 'medium' : 'routine';
  return `${n}/5 (${word})`;
}

const humanize = (s: string) => s.replace(/_/g, ' ');

/** An API timestamp as "2026-11-20 08:00 UTC" (null when absent). */
function utcMinute(v: unknown): string | null {
  const t = str(v);
  const m = t && /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})/.exec(t);
  return m ? `${m[1]} ${m[2]} UTC` : t;
}

/** Seconds as the largest whole unit: "3 days", "1 hour", "90 seconds". */
export function duration(secs: number): string {
  const units: Array<[number, string]> = [[86400, 'day'], [3600, 'hour'], [60, 'minute'], [1, 'second']];
  const [size, name] = units.find(([u]) => secs % u === 0 && secs >= u) ?? [1, 'second'];
  const n = secs / size;
  return `${n} ${name}${n === 1 ? '' : 's'}`;
}

/**
 * The receiver's host only: a webhook URL's path or query often carries a token, and these
 * messages go to chat rooms. The label, host and endpoint id identify it.
 */
function host(v: unknown): string | null {
  try {
    return new URL(String(v)).host || null;
  } catch {
    return null;
  }
}

/** The facts both endpoint-health notices share. */
function endpointFacts(d: Record<string, unknown>): Array<[string, string | null]> {
  const status = typeof d.last_response_status === 'number' ? `HTTP ${d.last_response_status}` : null;
  return [
    ['Endpoint', str(d.label) ?? host(d.url)],
    ['Host', str(d.label) ? host(d.url) : null],
    ['Consecutive failures', str(d.failure_count)],
    ['Failing since', utcMinute(d.failing_since)],
    ['Last error', [status, str(d.last_error)].filter(Boolean).join(' — ') || null],
  ];
}

/** The name a one-line text uses for an endpoint. */
const endpointName = (d: Record<string, unknown>) => str(d.label) ?? host(d.url) ?? 'a webhook endpoint';

export const SMS_MAX = 320;

/** Cuts to `max` characters on a word boundary where possible, marking the cut with "…". */
export function clip(text: string, max: number): string {
  const t = text.replace(/\s+/g, ' ').trim();
  if (t.length <= max) return t;
  const cut = t.slice(0, max - 1);
  const space = cut.lastIndexOf(' ');
  return `${space > max * 0.6 ? cut.slice(0, space) : cut}…`;
}

/** Ends text with a full stop unless it already ends a sentence (an issue summary often does). */
const sentence = (text: string) => (/[.!?…]$/.test(text.trim()) ? text.trim() : `${text.trim()}.`);

export function renderMessage({ event, business, callbackPhone }: MessageInput): Message {
  const d = event.data;
  const who = str(d.caller_name) ?? str(d.name) ?? 'Unknown caller';
  const what = str(d.issue_summary) ?? str(d.service_type);
  const service = str(d.service_type);
  const callback = callbackPhone ?? (str(d.phone) as string | null);
  let title: string;
  const facts: Array<[string, string | null]> = [];
  let sms: string;
  // What an SMS must keep whole when it is clipped: whom to call back (and a transfer under way).
  let smsTail = '';

  switch (event.event) {
    case 'call.emergency': {
      const transfer = d.reason === 'warm_transfer';
      // A warm transfer fires before the call is analysed: urgency is still the unrated default 0, not "routine".
      const rated = transfer && !(Number(d.urgency_level) > 0) ? null : urgency(d.urgency_level);
      title = `Emergency call — ${business}`;
      facts.push(['Caller', who], ['Issue', what], ['Urgency', rated],
        ['Why flagged', transfer ? 'caller is being transferred to you now' : 'rated urgent by the agent'],
        ['Address', str(d.caller_address)], ['Call back', callback]);
      sms = `EMERGENCY ${business}: ${sentence(`${who}${what ? ` - ${what}` : ''}`)}`;
      smsTail = `${transfer ? ' Transferring to you now.' : ''}${callback ? ` Call back ${callback}` : ''}`;
      break;
    }
    case 'lead.created':
      title = `New lead — ${business}`;
      facts.push(['Name', who], ['Service', service], ['Urgency', urgency(d.urgency_level)],
        ['Estimated value', money(d.estimated_value)], ['Address', str(d.address)], ['Call back', callback]);
      sms = `New lead ${business}: ${sentence(`${who}${service ? ` - ${service}` : ''}`)}`;
      smsTail = callback ? ` Call back ${callback}` : '';
      break;
    case 'lead.updated':
      title = `Lead ${humanize(String(d.previous_status ?? '?'))} → ${humanize(String(d.status ?? '?'))} — ${business}`;
      facts.push(['Name', who], ['Service', service], ['Call back', callback]);
      sms = `${business}: lead ${who} is now ${humanize(String(d.status ?? ''))}.`;
      break;
    case 'booking.created':
    case 'booking.updated': {
      const when = [str(d.scheduled_date), str(d.scheduled_time)].filter(Boolean).join(' ');
      const created = event.event === 'booking.created';
      title = `${created ? 'New booking' : `Booking ${humanize(String(d.status ?? 'updated'))}`} — ${business}`;
      facts.push(['When', when || null], ['Service', service], ['Status', str(d.status) && humanize(String(d.status))],
        ['Address', str(d.address)], ['Call back', callback]);
      sms = `${created ? 'New booking' : 'Booking update'} ${business}: ${service ?? 'service visit'}${when ? ` on ${when}` : ''} (${humanize(String(d.status ?? ''))}).`;
      smsTail = callback ? ` Customer ${callback}` : '';
      break;
    }
    case 'call.ended':
      title = `Call ended — ${business}`;
      facts.push(['Caller', who], ['Outcome', str(d.outcome) && humanize(String(d.outcome))], ['Issue', what],
        ['Urgency', urgency(d.urgency_level)], ['Call back', callback]);
      sms = `${business}: call from ${who} ended (${humanize(String(d.outcome ?? 'other'))}).`;
      smsTail = callback ? ` Call back ${callback}` : '';
      break;
    case 'spam.blocked':
      title = `Spam call blocked — ${business}`;
      facts.push(['Caller', str(d.caller_phone)], ['Reason', str(d.reason) && humanize(String(d.reason))]);
      sms = `${business}: blocked a spam call from ${str(d.caller_phone) ?? 'an unknown number'}.`;
      break;
    case 'customer.erased': {
      const calls = Array.isArray(d.call_ids) ? d.call_ids.length : 0;
      title = `Caller data erased — ${business}`;
      facts.push(['Erasure id', str(d.erasure_id)], ['Calls cleared', String(calls)]);
      sms = `${business}: a caller's personal data was erased (${calls} call${calls === 1 ? '' : 's'}).`;
      break;
    }
    case 'webhook_endpoint.failing': {
      const name = endpointName(d);
      const limit = Number(d.disable_after_failures);
      const secs = Number(d.disable_after_seconds);
      const rule = Number.isFinite(limit) && Number.isFinite(secs)
        ? `disabled once it has failed ${limit} times in a row${secs > 0 ? ` over at least ${duration(secs)}` : ''}`
        : null;
      title = `Webhook endpoint failing — ${business}`;
      facts.push(...endpointFacts(d),
        ['What happens next', rule && `Deliveries keep retrying; it will be ${rule}, unless a delivery succeeds first`],
        ['Endpoint id', str(d.endpoint_id)]);
      sms = `${business}: webhook endpoint ${name} has failed ${str(d.failure_count) ?? 'several'} times in a row${d.failing_since ? ` since ${utcMinute(d.failing_since)}` : ''}.${rule ? ` It will be ${rule}.` : ''}`;
      break;
    }
    case 'webhook_endpoint.disabled': {
      const name = endpointName(d);
      title = `Webhook endpoint disabled — ${business}`;
      facts.push(['Reason', str(d.disabled_reason)], ...endpointFacts(d),
        ['What happens now', 'No deliveries are sent to it; its pending retries are held and new events are not queued for it'],
        ['To re-enable', 'Fix the receiver, set active=true on the endpoint (PATCH webhook-endpoints/{id}), then re-send what it missed with POST webhook-endpoints/{id}/recover'],
        ['Endpoint id', str(d.endpoint_id)]);
      sms = `${business}: webhook endpoint ${name} was disabled${d.disabled_reason ? ` (${str(d.disabled_reason)})` : ''}. Nothing is sent to it until it is re-enabled (active=true).`;
      break;
    }
    case 'integration.expired': {
      const provider = FIELD_SERVICE_NAMES[String(d.provider)] ?? str(d.provider) ?? 'A field-service system';
      title = `${provider} needs to be reconnected — ${business}`;
      facts.push(['Reason', str(d.last_error)], ['Waiting to sync', str(d.pending_syncs)],
        ['What happens now', `Leads and bookings are kept and wait; nothing is written to ${provider} until it is reconnected`],
        ['To reconnect', `Connect ${provider} again from the app (POST integrations/${str(d.provider)}/authorize, or PUT the ServiceTitan credentials)`]);
      sms = `${business}: ${provider} was disconnected (${str(d.last_error) ?? 'access refused'}). Reconnect it so leads and bookings sync again.`;
      break;
    }
    default:
      title = `${event.event} — ${business}`;
      sms = `${business}: ${event.event}`;
  }
  return {
    title,
    facts: facts.filter((f): f is [string, string] => f[1] !== null && f[1] !== ''),
    sms: clip(sms, SMS_MAX - smsTail.length) + smsTail,
  };
}

const FIELD_SERVICE_NAMES: Record<string, string> = { jobber: 'Jobber', housecall_pro: 'Housecall Pro', servicetitan: 'ServiceTitan' };

/** Slack mrkdwn treats &, < and > as markup (links, mentions): escape them so text stays text. */
export function slackEscape(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

export function slackPayload(m: Message): { text: string; blocks: unknown[] } {
  const text = [m.title, ...m.facts.map(([k, v]) => `${k}: ${v}`)].join('\n');
  return {
    text: slackEscape(text),
    blocks: [
      { type: 'header', text: { type: 'plain_text', text: clip(m.title, 150), emoji: true } },
      ...(m.facts.length
        ? [{ type: 'section', fields: m.facts.slice(0, 10).map(([k, v]) => ({ type: 'mrkdwn', text: `*${k}*\n${slackEscape(clip(v, 1900))}` })) }]
        : []),
    ],
  };
}

const htmlEscape = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');

export function emailContent(m: Message): { subject: string; text: string; html: string } {
  const text = `${m.title}\n\n${m.facts.map(([k, v]) => `${k}: ${v}`).join('\n')}\n\n— Switchboard\n`;
  const rows = m.facts
    .map(([k, v]) => `<tr><th align="left" style="padding:2px 12px 2px 0">${htmlEscape(k)}</th><td>${htmlEscape(v)}</td></tr>`)
    .join('');
  const html = `<!doctype html><html><body style="font-family:sans-serif"><h2>${htmlEscape(m.title)}</h2><table>${rows}</table><p style="color:#666">— Switchboard</p></body></html>`;
  return { subject: clip(m.title.replace(/[\r\n]+/g, ' '), 200), text, html };
}
