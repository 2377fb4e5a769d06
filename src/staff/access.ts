/**
 * Staff access to the staff GraphQL (docs/staff.md): every request to /graphql carries
 * `Authorization: Bearer <staff token>` or is answered 401 before PostGraphile sees it; the
 * member's role becomes the PostgreSQL role of the request's transaction (pgSettings), with the
 * member's id and the staff statement timeout; every authenticated request leaves one row in
 * staff.audit when its response has ended, whatever the outcome.
 */
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { NextFunction, Request, Response } from 'express';
import type { DocumentNode } from 'graphql';
import type pg from 'pg';
import { bearerToken, hashToken } from '../auth/tokens.js';
import { createOwnerPool } from '../db/pools.js';
import { ApiError, sendError, toApiError } from '../http/errors.js';
import type { Logger } from '../log.js';
import { StaffAuthCache, type StaffMember } from './cache.js';
import { sha256Hex, summarizeOperation, type OperationSummary } from './operation.js';
import type { StaffPluginHooks } from './plugin.js';

export interface StaffLimits {
  /** statement_timeout of every staff transaction (STAFF_STATEMENT_TIMEOUT_MS). */
  statementTimeoutMs: number;
  /** Deepest selection a document may have (STAFF_MAX_DEPTH). */
  maxDepth: number;
  /** Highest graphql-armor cost a document may have (STAFF_MAX_COST). */
  maxCost: number;
}

export const DEFAULT_STAFF_LIMITS: StaffLimits = { statementTimeoutMs: 15000, maxDepth: 10, maxCost: 5000 };

/** Paths of the GraphQL endpoint (and its event stream); everything else on the listener is open. */
const GRAPHQL_PATH = /^\/graphql(\/|$)/;

interface StaffRequest {
  member: StaffMember;
  at: Date;
  started: number;
  documentSha256: string | null;
  operationName: string | null;
  summary: OperationSummary | null;
  executed: boolean;
  errors: number;
}

export interface StaffAccess {
  /** Express middleware in front of PostGraphile. */
  guard(req: Request, res: Response, next: NextFunction): void;
  /** pgSettings of a request: its member's role, id and statement timeout. */
  pgSettings(req: IncomingMessage | undefined): Record<string, string>;
  /** For src/staff/plugin.ts. */
  hooks: StaffPluginHooks;
  /** Resolves once every authenticated request so far has its audit row written (or failed). */
  flush(): Promise<void>;
  close(): Promise<void>;
}

export interface StaffAccessOptions {
  log: Logger;
  limits?: Partial<StaffLimits>;
  /** Off only for the bench's comparison (bench/staff.ts); never configurable in the service. */
  audit?: boolean;
}

const unauthorized = () =>
  new ApiError(401, 'unauthorized', 'Missing, malformed, unknown or revoked staff token', {}, { 'www-authenticate': 'Bearer realm="switchboard-staff"' });

const INSERT_AUDIT = `insert into staff.audit
  (at, member_id, role, operation_name, operation_type, document_sha256, root_fields, location_ids, outcome, http_status, error_count, duration_ms)
  values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`;

export async function startStaffAccess(connectionString: string, opts: StaffAccessOptions): Promise<StaffAccess> {
  const limits = { ...DEFAULT_STAFF_LIMITS, ...opts.limits };
  const log = opts.log.child({ component: 'staff-access' });
  const auditOn = opts.audit !== false;
  // Token look-ups and audit writes: a small pool of its own, so neither waits behind the API.
  const pool: pg.Pool = createOwnerPool(connectionString, 3, 'switchboard-staff');
  const cache = new StaffAuthCache({ connectionString, log });
  await cache.start();
  const requests = new WeakMap<IncomingMessage, StaffRequest>();
  const pending = new Set<Promise<void>>();
  // Authenticated requests whose audit row is not written yet (flush waits for them).
  let open = 0;
  const idle: (() => void)[] = [];
  const settle = () => {
    open -= 1;
    if (open === 0) for (const f of idle.splice(0)) f();
  };

  const load = async (hash: string): Promise<StaffMember | null> => {
    const { rows } = await pool.query({ name: 'sb:staff.member_by_token', text: 'select staff.member_by_token($1) as m', values: [hash] });
    return (rows[0]?.m as StaffMember | null) ?? null;
  };

  const record = (req: IncomingMessage, res: Response, s: StaffRequest) => {
    requests.delete(req);
    if (!auditOn) return settle();
    const outcome = !s.executed ? 'rejected' : s.errors ? 'error' : 'ok';
    const values = [
      s.at, s.member.id, s.member.role,
      (s.summary?.operationName ?? s.operationName)?.slice(0, 200) ?? null,
      s.summary?.operationType ?? null, s.documentSha256,
      s.summary?.rootFields ?? [], s.summary?.locationIds ?? [],
      outcome, res.headersSent ? res.statusCode : null, s.executed ? s.errors : 0,
      Math.round(performance.now() - s.started),
    ];
    const p = pool.query({ name: 'sb:staff.audit', text: INSERT_AUDIT, values }).then(
      () => undefined,
      (err: unknown) => log.error({ err, member_id: s.member.id }, 'staff audit row not written'),
    );
    pending.add(p);
    void p.finally(() => {
      pending.delete(p);
      settle();
    });
  };

  const guard = (req: Request, res: Response, next: NextFunction): void => {
    if (!GRAPHQL_PATH.test(req.path)) return next();
    const started = performance.now();
    const at = new Date();
    const token = bearerToken(req.headers.authorization);
    if (!token) {
      log.warn({ reason: 'missing or malformed', ip: req.socket.remoteAddress }, 'staff request refused');
      return sendError(res, unauthorized());
    }
    cache.member(hashToken(token), () => load(hashToken(token))).then(
      (member) => {
        if (!member) {
          log.warn({ reason: 'unknown or revoked', ip: req.socket.remoteAddress }, 'staff request refused');
          return sendError(res, unauthorized());
        }
        const s: StaffRequest = { member, at, started, documentSha256: null, operationName: null, summary: null, executed: false, errors: 0 };
        requests.set(req, s);
        open += 1;
        res.once('close', () => record(req, res, s));
        next();
      },
      (err: unknown) => sendError(res, toApiError(err)),
    );
  };

  const hooks: StaffPluginHooks = {
    maxDepth: limits.maxDepth,
    maxCost: limits.maxCost,
    onBody(req, query, operationName) {
      const s = req && requests.get(req);
      if (!s) return;
      s.documentSha256 = typeof query === 'string' ? sha256Hex(query) : null;
      s.operationName = typeof operationName === 'string' ? operationName : null;
    },
    onExecute(req, document: DocumentNode, operationName, variables) {
      const s = req && requests.get(req);
      if (!s) return undefined;
      s.summary = summarizeOperation(document, operationName, variables);
      return (errors) => {
        s.executed = true;
        s.errors = errors;
      };
    },
  };

  return {
    guard,
    hooks,
    pgSettings(req): Record<string, string> {
      const s = req && requests.get(req);
      // No member (cannot happen behind the guard): the group role, which may read nothing.
      if (!s) return { role: 'switchboard_staff', statement_timeout: String(limits.statementTimeoutMs) };
      return {
        role: `switchboard_staff_${s.member.role}`,
        'app.staff_member_id': s.member.id,
        statement_timeout: String(limits.statementTimeoutMs),
      };
    },
    flush() {
      return open === 0 ? Promise.resolve() : new Promise<void>((r) => idle.push(r));
    },
    async close() {
      await Promise.all([...pending]);
      await cache.stop();
      await pool.end();
    },
  };
}

/** Whether a listen address is reachable only from this host. */
export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  if (isIP(host) === 6) return host === '::1' || /^::ffff:127\./i.test(host);
  return false;
}

/** The start-up warning when the admin listener is bound beyond loopback (docs/staff.md "Binding"). */
export function warnIfExposed(host: string, log: Logger): boolean {
  if (isLoopback(host)) return false;
  log.warn(
    { admin_host: host },
    `ADMIN_HOST=${host} is not a loopback address: the admin listener exposes the staff GraphQL (every location's data, behind staff tokens) and its health and metrics endpoints to the network. Put TLS in front of it (docs/staff.md "Binding").`,
  );
  return true;
}
