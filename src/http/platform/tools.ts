/**
 * The agent's tools during a call (docs/voice-integration.md, "Tools"): Retell's custom-function
 * requests, `POST /api/voice/tools/{name}` with `{ name, call, args }`, verified by
 * x-retell-signature exactly as the post-call route (same secret, same 5-minute window). Order:
 * signature (401), tool name (404), envelope (400: a malformed platform request), then the
 * arguments: an LLM's mistake is answered 200 `{ ok: false, message }` naming the field, so the
 * agent can ask the caller again. One SQL function does the work (app.voice_tool).
 *
 * Card numbers, security codes and SSNs in the free-text arguments are replaced before that call
 * when the location redacts (src/privacy/tool.ts). The scan is local; only a tool call in which it
 * found something asks the database for the dialled location's setting (app.voice_redacts), so
 * the usual tool call makes one round trip as before.
 */
import { Router, type Request } from 'express';
import { callFn } from '../../db/pools.js';
import { redactToolArgs } from '../../privacy/tool.js';
import type { AppDeps } from '../deps.js';
import { ApiError } from '../errors.js';
import { onlyPost, parseSigned, rawBody } from './raw.js';
import { argsProblem, isToolName, ToolRequest, toolDefinitions, toolPhone, TOOLS } from './tool-schemas.js';
import { VOICE_BODY_LIMIT, verifiedBody } from './voice.js';

/** The service's own origin as the request reached it (the URL the agent should call). */
const originOf = (req: Request) => `${req.protocol}://${req.get('host') ?? 'localhost'}`;

export function toolsRouter(deps: AppDeps): Router {
  const router = Router();
  const raw = rawBody(VOICE_BODY_LIMIT);

  router.get('/voice/tools', (req, res) => {
    res.json({ data: toolDefinitions(originOf(req)) });
  });

  router.post('/voice/tools/:name', raw, async (req, res) => {
    const text = await verifiedBody(req, deps.cfg.VOICE_WEBHOOK_SECRET);
    const name = String(req.params.name);
    if (!isToolName(name)) throw new ApiError(404, 'not_found', 'Unknown tool');
    const payload = parseSigned(ToolRequest, text);
    const parsed = TOOLS[name].args.safeParse(payload.args ?? {});
    if (!parsed.success) {
      res.json({ ok: false, ...argsProblem(parsed.error) });
      return;
    }
    let args: Record<string, unknown> = { ...parsed.data };
    const redacted = redactToolArgs(args);
    if (redacted && await callFn<boolean>(deps.ownerPool, 'app.voice_redacts', [payload.call.to_number])) args = redacted;
    if (name === 'book_appointment') {
      const given = args.phone as string | undefined;
      const phone = given !== undefined ? toolPhone(given) : payload.call.from_number;
      if (!phone) {
        res.json({
          ok: false, field: 'phone',
          message: given !== undefined
            ? 'Invalid phone: not a valid phone number. Ask the caller again.'
            : 'Invalid phone: the caller\'s number is withheld. Ask the caller for a callback number.',
        });
        return;
      }
      args.phone = phone;
    }
    const answer = await callFn(deps.ownerPool, 'app.voice_tool', [{ name, call: payload.call, args }]);
    res.json(answer);
  });

  router.all('/voice/tools/:name', onlyPost());
  router.all('/voice/tools', (_req, res) => {
    res.setHeader('allow', 'GET, HEAD');
    throw new ApiError(405, 'method_not_allowed', 'Method not allowed; use GET');
  });
  return router;
}
