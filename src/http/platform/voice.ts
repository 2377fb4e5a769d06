/**
 * Voice platform webhooks (Retell-compatible, docs/api-contract.md §6). Order per request: secret set (503),
 * raw body read, signature verified (401), JSON parsed and validated (400), then ONE SQL function
 * that routes the call to its location and does all the work in one transaction.
 *
 * Redaction at ingestion (docs/privacy.md): the post-call route scans the call for card numbers,
 * security codes, expiry dates and SSNs here, in the same pass as validation, and sends the
 * redacted copy beside the received call only when it found any; the SQL function keeps the copy
 * when the location redacts (its setting is only known once the call is routed, in that function).
 */
import { Router, type Request } from 'express';
import { verify } from 'retell-sdk';
import { callFn } from '../../db/pools.js';
import { redactCall } from '../../privacy/call.js';
import { markVoice } from '../../metrics/http.js';
import type { AppDeps } from '../deps.js';
import { bodyBytes, invalidSignature, notConfigured, onlyPost, parseSigned, rawBody } from './raw.js';
import { InboundWebhook, POST_CALL_EVENTS, PostCallWebhook } from './voice-payloads.js';

/** Long calls carry word-level transcripts twice over; 5 MiB leaves room for an hour. */
export const VOICE_BODY_LIMIT = 5 * 1024 * 1024;
export const VOICE_SIGNATURE_HEADER = 'x-retell-signature';

/** Verifies x-retell-signature (v=<ms>,d=<hex>, 5-minute window, constant time) and returns the body text. */
export async function verifiedBody(req: Request, secret: string | undefined): Promise<string> {
  if (!secret) throw notConfigured('VOICE_WEBHOOK_SECRET');
  const signature = req.header(VOICE_SIGNATURE_HEADER);
  const body = bodyBytes(req).toString('utf8');
  if (!signature || !(await verify(body, secret, signature))) throw invalidSignature(VOICE_SIGNATURE_HEADER);
  return body;
}

export function voiceRouter(deps: AppDeps): Router {
  const router = Router();
  const raw = rawBody(VOICE_BODY_LIMIT);

  router.post('/voice/inbound', raw, async (req, res) => {
    const payload = parseSigned(InboundWebhook, await verifiedBody(req, deps.cfg.VOICE_WEBHOOK_SECRET));
    markVoice(res, { type: 'inbound', ignored: false });
    // The platform reads this shape as is, so it is not wrapped in { data }.
    res.json(await callFn(deps.ownerPool, 'app.voice_inbound', [payload]));
  });

  router.post('/voice/post-call', raw, async (req, res) => {
    const payload = parseSigned(PostCallWebhook, await verifiedBody(req, deps.cfg.VOICE_WEBHOOK_SECRET));
    const mark = { type: payload.event, ignored: false };
    markVoice(res, mark);
    if (!(POST_CALL_EVENTS as readonly string[]).includes(payload.event)) {
      mark.ignored = true;
      res.json({ data: { status: 'ignored', event: payload.event } });
      return;
    }
    // Deferred wake-ups: the transaction sends no NOTIFY (see src/db/wakeups.ts); once it has
    // committed, a flush shared with concurrent requests hands its jobs to the workers.
    const redacted = redactCall(payload.call);
    const data = await callFn<{ status?: string }>(deps.ownerPool, 'app.voice_post_call', [payload, true, redacted]);
    mark.ignored = data?.status === 'ignored';
    await deps.wakeups!.flush();
    res.json({ data });
  });

  router.all(['/voice/inbound', '/voice/post-call'], onlyPost());
  return router;
}
