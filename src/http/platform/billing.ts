/**
 * Stripe billing webhook (docs/api-contract.md §7): the stripe library verifies Stripe-Signature on
 * the raw bytes before anything is parsed; the route parses them itself, and one SQL function
 * applies the event once. The signed timestamp must be within 5 minutes of now either way: the
 * library only refuses old ones, and a signature dated in the future would otherwise stay
 * replayable for as long as its date is ahead.
 */
import { Router } from 'express';
import { z } from 'zod';
import { callFn } from '../../db/pools.js';
import type { AppDeps } from '../deps.js';
import { bodyBytes, invalidSignature, notConfigured, onlyPost, parseSigned, rawBody, validate } from './raw.js';

export const BILLING_BODY_LIMIT = 1024 * 1024;
export const BILLING_TOLERANCE_SEC = 300;

export const HANDLED_BILLING_EVENTS = [
  'customer.subscription.created', 'customer.subscription.updated', 'customer.subscription.deleted',
  'invoice.paid', 'invoice.payment_failed',
] as const;

const ref = z.union([z.string().max(255), z.looseObject({ id: z.string().max(255) })]).nullish();
const metadata = z.record(z.string(), z.unknown()).nullish();
const unix = z.number().int().nullish();

const Subscription = z.looseObject({
  id: z.string().min(1).max(255),
  customer: ref,
  status: z.string().max(50).nullish(),
  metadata,
  cancel_at_period_end: z.boolean().nullish(),
  canceled_at: unix,
  items: z.looseObject({
    data: z.array(z.looseObject({
      price: z.looseObject({ id: z.string().max(255) }).nullish(),
      quantity: z.number().int().nullish(),
      current_period_end: unix,
    })),
  }).nullish(),
});

const Invoice = z.looseObject({
  id: z.string().min(1).max(255),
  customer: ref,
  status: z.string().max(50).nullish(),
  amount_due: z.number().int().nullish(),
  amount_paid: z.number().int().nullish(),
  currency: z.string().max(10).nullish(),
  hosted_invoice_url: z.string().max(4096).nullish(),
  metadata,
  subscription: ref,
  parent: z.looseObject({
    subscription_details: z.looseObject({ subscription: ref, metadata }).nullish(),
  }).nullish(),
  status_transitions: z.looseObject({ paid_at: unix }).nullish(),
});

/** What every signed payload must have; the rest is examined only for the types we apply. */
const StripeEvent = z.looseObject({
  id: z.string().min(1).max(255),
  type: z.string().min(1).max(255),
});

const eventOf = (object: z.ZodType) => StripeEvent.extend({ created: unix, data: z.looseObject({ object }) });
const SubscriptionEvent = eventOf(Subscription);
const InvoiceEvent = eventOf(Invoice);

const isHandled = (type: string) => (HANDLED_BILLING_EVENTS as readonly string[]).includes(type);

/**
 * The `t=` of a Stripe-Signature header read exactly as the stripe library reads it (the last `t`,
 * parseInt), so the time checked is the time the verified HMAC covers. NaN when absent.
 */
export function signedAt(header: string): number {
  let t = NaN;
  for (const item of header.split(',')) {
    const kv = item.split('=');
    if (kv[0] === 't') t = parseInt(kv[1], 10);
  }
  return t;
}

/** At most BILLING_TOLERANCE_SEC between the signed time (seconds) and now, in either direction. */
export const withinTolerance = (t: number, nowMs: number) =>
  Number.isFinite(t) && Math.abs(Math.floor(nowMs / 1000) - t) <= BILLING_TOLERANCE_SEC;

export function billingRouter(deps: AppDeps): Router {
  const router = Router();

  router.post('/billing/webhook', rawBody(BILLING_BODY_LIMIT), async (req, res) => {
    const secret = deps.cfg.BILLING_WEBHOOK_SECRET;
    if (!secret) throw notConfigured('BILLING_WEBHOOK_SECRET');
    const header = req.header('stripe-signature');
    if (!header) throw invalidSignature('Stripe-Signature');
    if (!withinTolerance(signedAt(header), Date.now())) throw invalidSignature('Stripe-Signature');
    // Loaded on the first billing webhook, not at start: the library holds ~11 MB a process that
    // never sees one would carry (docs/performance.md, "The process").
    const { default: Stripe } = await import('stripe');
    const bytes = bodyBytes(req);
    try {
      // Only the signature: constructEvent would also parse, and refuses kinds a webhook may
      // legitimately carry (a thin v2 event throws a plain Error after the signature verified).
      Stripe.webhooks.signature!.verifyHeader(bytes, header, secret, BILLING_TOLERANCE_SEC);
    } catch (err) {
      if (err instanceof Stripe.errors.StripeSignatureVerificationError) throw invalidSignature('Stripe-Signature');
      throw err;
    }
    // The text the HMAC covered: the library decodes the bytes so (a BOM dropped, bad UTF-8 as
    // U+FFFD). Parsed as the voice routes parse theirs: NULs dropped, lone surrogates as U+FFFD
    // (docs/voice.md §21), or PostgreSQL would refuse the event for good.
    const evt = parseSigned(StripeEvent, new TextDecoder().decode(bytes));
    // Any other kind is acknowledged whatever its shape (docs/api-contract.md §7): Stripe would
    // retry a 4xx for days.
    if (!isHandled(evt.type)) {
      res.json({ data: { status: 'ignored', event_id: evt.id, type: evt.type } });
      return;
    }
    const handled = validate(evt.type.startsWith('invoice.') ? InvoiceEvent : SubscriptionEvent, evt);
    res.json({ data: await callFn(deps.ownerPool, 'billing.apply_event', [handled]) });
  });

  router.all('/billing/webhook', onlyPost());
  return router;
}
