/**
 * Staff access to the staff GraphQL (docs/staff.md): every request to /graphql carries
 * `Authorization: Bearer <staff token>` or is answered 401 before PostGraphile sees it; the
 * member's role becomes the PostgreSQL role of the request's transaction (pgSettings), with the
 * member's id and the staff statement timeout; every authenticated request leaves one row in
 * staff.audit when its response has ended, whatever the outcome (rows are written in batches, one
 * INSERT at most every 100 ms).
 */
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { NextFunction, Request, Response } from 'express';
import type { DocumentNode } from 'graphql';
import pg from 'pg';
import { bearerToken, hashToken } from '../auth/tokens.js';
import { lowerPoolPriority } from '../db/backend-priority.js';
import { createOwnerPool, REQUEST_BOUND, type ConnectionTarget, type StatementBound } from '../db/pools.js';
import { ApiError, sendError, toApiError } from '../http/errors.js';
import type { Logger } from '../log.js';
import { DEFAULT_ADMISSION, showAdmission, StaffAdmission, staffRefusals, type AdmissionStats } from './admission.js';
import { StaffAuthCache, type StaffMember } from './cache.js';
import { sha256Hex, summarizeOperation, type OperationSummary } from './operation.js';
import type { Settled, StaffPluginHooks } from './plugin.js';
import { DEFAULT_STAFF_BOUNDS, type StaffLimits } from './config.js';

export type { StaffLimits };

export const DEFAULT_STAFF_LIMITS: StaffLimits = { statementTimeoutMs: 15000, ...DEFAULT_STAFF_BOUNDS, ...DEFAULT_ADMISSION };

/** Connections of the staff GraphQL's own pool: staff queries never hold more (docs/staff.md). */
export const STAFF_POOL_SIZE = 4;
/** Audit rows are written in one statement per batch: at most this many rows, this long after the first. */
const AUDIT_BATCH_ROWS = 200;
const AUDIT_BATCH_MS = 100;

/**
 * A request holds its turn at most STAFF_STATEMENT_TIMEOUT_MS plus this (planning, building and
 * delivering the answer); past it its connection is closed and the turn given back (docs/staff.md
 * "Admission"), so no request, whatever befalls it, keeps the staff GraphQL from answering.
 */
export const TURN_MARGIN_MS = 30_000;

/** Paths of the GraphQL endpoint (and its event stream); everything else on the listener is open. */
const GRAPHQL_PATH = /^\/graphql(\/|$)/i;

interface StaffRequest {
  member: StaffMember;
  at: Date;
  started: number;
  documentSha256: string | null;
  summary: OperationSummary | null;
  /** grafserv has the body (a response without execution after it is a refusal). */
  bodySeen: boolean;
  /** Set when execution begins; resolves when it has ended. */
  execution: Promise<Settled> | null;
  /** The answer was past a bound (answered 400). */
  refused: boolean;
  /** The response's connection closed (finished or not). */
  closed: boolean;
}

/**
 * The audit outcome (docs/staff.md "Audit"): refused before execution, executed and delivered
 * without errors (a mutation's transaction committed), executed with errors, or executed while
 * the client went away before the answer was delivered (a write in it committed all the same).
 */
export type AuditOutcome = 'rejected' | 'ok' | 'error' | 'client_gone';

export function auditOutcome(settled: Settled | null, delivered: boolean): AuditOutcome {
  if (!settled || !settled.ran) return 'rejected';
  if (!delivered) return 'client_gone';
  return settled.errors > 0 ? 'error' : 'ok';
}

export interface StaffAccess {
  /** Express middleware in front of PostGraphile. */
  guard(req: Request, res: Response, next: NextFunction): void;
  /** pgSettings of a request: its member's role, id and statement timeout. */
  pgSettings(req: IncomingMessage | undefined): Record<string, string>;
  /** For src/staff/plugin.ts. */
  hooks: StaffPluginHooks;
  /** The pool PostGraphile runs staff requests on (STAFF_POOL_SIZE connections). */
  graphqlPool: pg.Pool;
  /** Resolves once every authenticated request so far has its audit row written (or failed). */
  flush(): Promise<void>;
  close(): Promise<void>;
}

export interface StaffAccessOptions {
  log: Logger;
  limits?: Partial<StaffLimits>;
  /** Off only for the bench's comparison (bench/staff.ts); never configurable in the service. */
  audit?: boolean;
  /** On the embedded cluster: the CPU priority (nice) of the staff GraphQL's backends (STAFF_DB_NICE). */
  lowerPriority?: { postmasterPid: () => number | null; nice: number };
  /** Behind the main thread's admin listener (src/admin/graphql-thread.ts): the peer is its X-Forwarded-For. */
  forwarded?: boolean;
  /**
   * A request refused for want of a turn (src/staff/admission.ts): counted in
   * switchboard_staff_requests_refused_total, by default in this thread's registry; the staff
   * thread sends it to the main thread, whose /metrics is the one scraped.
   */
  onRefused?: (reason: 'busy') => void;
  /** The running and queued counts after each change: switchboard_staff_requests, likewise. */
  onAdmission?: (stats: AdmissionStats) => void;
  /** How long a request may hold its turn (default: the statement timeout + TURN_MARGIN_MS); for tests. */
  turnLimitMs?: number;
  /** Bound of the token look-ups and audit writes (REQUEST_BOUND unless a test gives a shorter one). */
  lookupBound?: StatementBound;
}

const busy = (retryAfter: number, limits: { maxRunning: number; maxQueued: number }) =>
  new ApiError(503, 'staff_busy', `The staff GraphQL is answering ${limits.maxRunning} request(s) with ${limits.maxQueued} waiting `
    + '(STAFF_MAX_RUNNING, STAFF_MAX_QUEUED); nothing was run: retry after the time in Retry-After', { retry_after_seconds: retryAfter },
  { 'retry-after': String(retryAfter) });

const unauthorized = () =>
  new ApiError(401, 'unauthorized', 'Missing, malformed, unknown or revoked staff token', {}, { 'www-authenticate': 'Bearer realm="switchboard-staff"' });

/** One statement per batch of rows (JSON array of objects with the columns' names). */
const INSERT_AUDIT = `insert into staff.audit
  (at, member_id, role, operation_name, operation_type, document_sha256, root_fields, location_ids, outcome, http_status, error_count, duration_ms)
  select r.at, r.member_id, r.role, r.operation_name, r.operation_type, r.document_sha256, r.root_fields, r.location_ids,
         r.outcome, r.http_status, r.error_count, r.duration_ms
    from jsonb_to_recordset($1::jsonb) as r(at timestamptz, member_id uuid, role text, operation_name text, operation_type text,
         document_sha256 text, root_fields text[], location_ids uuid[], outcome text, http_status int, error_count int, duration_ms int)`;

/**
 * Staff queries run without parallel workers: PostgreSQL forks those from the postmaster, so they
 * would not share the staff connection's lower CPU priority, and an aggregate over a million
 * calls would take both cores from the API (docs/staff.md "Bounds").
 */
const SERIAL = { max_parallel_workers_per_gather: '0' } as const;

export async function startStaffAccess(connectionString: ConnectionTarget, opts: StaffAccessOptions): Promise<StaffAccess> {
  const limits = { ...DEFAULT_STAFF_LIMITS, ...opts.limits };
  const turnLimitMs = opts.turnLimitMs ?? limits.statementTimeoutMs + TURN_MARGIN_MS;
  const log = opts.log.child({ component: 'staff-access' });
  const auditOn = opts.audit !== false;
  // Token look-ups and audit writes: a small pool of its own, so neither waits behind the API. Both
  // pools give up on a database that does not answer (src/db/pools.ts, StatementBound): the
  // look-ups at the API's bound, the staff statements ANSWER_MARGIN_MS past their own timeout.
  const pool: pg.Pool = createOwnerPool(connectionString, 2, 'switchboard-staff', opts.lookupBound ?? REQUEST_BOUND);
  // PostGraphile's pool, owned here: bounded, named, and on our own cluster at a lower CPU priority
  // than the API's connections, so a heavy staff aggregate gives way to API requests.
  // Its statement_timeout is set per request (pgSettings below), not on the connection, where it
  // would also cut PostGraphile's introspection and leave the schema unbuilt.
  const graphqlPool = createOwnerPool(connectionString, STAFF_POOL_SIZE, 'switchboard-staff-graphql',
    { statementTimeoutMs: limits.statementTimeoutMs, setPerTransaction: true });
  if (opts.lowerPriority) lowerPoolPriority(graphqlPool, opts.lowerPriority.postmasterPid, opts.lowerPriority.nice, log);
  const admission = new StaffAdmission({ maxRunning: limits.maxRunning, maxQueued: limits.maxQueued, timeShare: limits.timeShare }, opts.onAdmission ?? showAdmission);
  const onRefused = opts.onRefused ?? ((reason: 'busy') => staffRefusals.inc({ reason }));
  const cache = new StaffAuthCache({ connectionString, log });
  await cache.start();
  const requests = new WeakMap<IncomingMessage, StaffRequest>();
  // Authenticated requests whose audit row is not queued yet, and rows not written yet.
  let open = 0;
  const idle: (() => void)[] = [];
  let queue: unknown[] = [];
  let timer: NodeJS.Timeout | undefined;
  let writing: Promise<void> = Promise.resolve();
  const settle = () => {
    open -= 1;
    if (open === 0) for (const f of idle.splice(0)) f();
  };
  /**
   * Writes what is queued, after the write in progress: one INSERT per batch. A batch the database
   * refuses or does not answer within the pool's bound is logged with its rows, not tried again
   * (docs/staff.md "Decisions"): the server may still run an INSERT it had received.
   */
  const write = (): Promise<void> => {
    clearTimeout(timer);
    timer = undefined;
    if (!queue.length) return writing;
    const rows = queue;
    queue = [];
    writing = writing.then(() => pool.query({ name: 'sb:staff.audit', text: INSERT_AUDIT, values: [JSON.stringify(rows)] })).then(
      () => undefined,
      (err: unknown) => log.error({ err, rows: rows.length, audit_rows: rows }, 'staff audit rows not written'),
    );
    return writing;
  };

  const load = async (hash: string): Promise<StaffMember | null> => {
    const { rows } = await pool.query({ name: 'sb:staff.member_by_token', text: 'select staff.member_by_token($1) as m', values: [hash] });
    return (rows[0]?.m as StaffMember | null) ?? null;
  };

  const record = (req: IncomingMessage, res: Response, s: StaffRequest, settled: Settled | null, delivered: boolean) => {
    requests.delete(req);
    if (auditOn) {
      const outcome = auditOutcome(settled, delivered);
      queue.push({
        at: s.at.toISOString(), member_id: s.member.id, role: s.member.role,
        operation_name: s.summary?.operationName?.slice(0, 200) ?? null,
        operation_type: s.summary?.operationType ?? null, document_sha256: s.documentSha256,
        // A refused document ran nothing: no root fields (the name and type say what it was).
        root_fields: settled?.ran ? s.summary?.rootFields ?? [] : [], location_ids: s.summary?.locationIds ?? [],
        outcome, http_status: res.headersSent ? res.statusCode : null, error_count: settled?.errors ?? 0,
        duration_ms: Math.round(performance.now() - s.started),
      });
      if (queue.length >= AUDIT_BATCH_ROWS) void write();
      else if (!timer) {
        timer = setTimeout(() => void write(), AUDIT_BATCH_MS);
        timer.unref();
      }
    }
    settle();
  };

  const peer = (req: Request) => {
    const f = req.headers['x-forwarded-for'];
    return opts.forwarded && typeof f === 'string' && f ? f : req.socket.remoteAddress;
  };
  const guard = (req: Request, res: Response, next: NextFunction): void => {
    if (!GRAPHQL_PATH.test(req.path)) return next();
    const started = performance.now();
    const at = new Date();
    const token = bearerToken(req.headers.authorization);
    if (!token) {
      log.warn({ reason: 'missing or malformed', ip: peer(req) }, 'staff request refused');
      return sendError(res, unauthorized());
    }
    // Listened for from the start: 'close' is emitted once, and a client that leaves while its
    // token is looked up would otherwise never be seen to leave (it would take a turn and hold it).
    let gone = false;
    let onGone: (() => void) | null = null;
    res.once('close', () => {
      gone = true;
      onGone?.();
    });
    const left = () => gone || res.closed || res.destroyed || req.socket.destroyed;
    const hash = hashToken(token);
    cache.member(hash, () => load(hash)).then(
      (member) => {
        if (!member) {
          log.warn({ reason: 'unknown or revoked', ip: peer(req) }, 'staff request refused');
          return sendError(res, unauthorized());
        }
        const s: StaffRequest = { member, at, started, documentSha256: null, summary: null, bodySeen: false, execution: null, refused: false, closed: false };
        requests.set(req, s);
        open += 1;
        // A document refused before it ran (grafserv answers validation errors 200 to
        // application/json clients) and an answer past a bound are 400s.
        const writeHead = res.writeHead;
        res.writeHead = function (this: Response, code: number, ...rest: unknown[]) {
          const refused = code === 200 && ((s.bodySeen && !s.execution) || s.refused);
          return (writeHead as (...a: unknown[]) => Response).call(this, refused ? 400 : code, ...rest);
        } as typeof res.writeHead;
        // One turn per request (src/staff/admission.ts), held until its response has closed
        // (answer built, serialised and delivered); past the queue, 503 and nothing runs. A client
        // already gone takes none: its row says rejected.
        const ticket = left() ? null : admission.enter();
        let watchdog: NodeJS.Timeout | undefined;
        // Recorded once the response's connection has closed and any execution has ended: a
        // request whose client left mid-execution is recorded with what it did.
        const closed = () => {
          if (s.closed) return;
          s.closed = true;
          clearTimeout(watchdog);
          const delivered = res.writableFinished;
          // The turn is given back once the execution has ended too (a client that left does not
          // stop its query at once).
          const done = (settled: Settled | null) => {
            ticket?.leave();
            record(req, res, s, settled, delivered);
          };
          if (s.execution) void s.execution.then(done);
          else done(null);
        };
        onGone = closed;
        if (left()) return closed();
        if (!ticket) {
          onRefused('busy');
          log.warn({ reason: 'busy', member: member.id, ...admission.stats }, 'staff request refused');
          return sendError(res, busy(admission.retryAfterSeconds(), admission.limits));
        }
        const run = () => {
          // Waiting: a client that leaves gives its place up (its row says rejected; nothing ran).
          if (left()) return closed();
          // Whatever happens to the request, its turn comes back once its time bound has passed:
          // its connection is closed and the turn given back, the row written when it has ended.
          watchdog = setTimeout(() => {
            log.warn({ member: member.id, turn_limit_ms: turnLimitMs }, 'staff request held its turn past its time bound; its connection is closed');
            res.destroy();
            closed();
            ticket.leave();
          }, turnLimitMs);
          watchdog.unref();
          next();
        };
        if (!ticket.queued) return run();
        void ticket.ready.then(() => {
          if (!s.closed) run();
        });
      },
      (err: unknown) => sendError(res, toApiError(err)),
    );
  };

  const { statementTimeoutMs: _timeout, maxRunning: _running, maxQueued: _queued, timeShare: _share, ...bounds } = limits;
  const hooks: StaffPluginHooks = {
    bounds,
    log,
    onBody(req, query, operationName, variables, document: DocumentNode | null) {
      const s = req && requests.get(req);
      if (!s) return;
      s.bodySeen = true;
      s.documentSha256 = typeof query === 'string' ? sha256Hex(query) : null;
      s.summary = document ? summarizeOperation(document, typeof operationName === 'string' ? operationName : null, variables) : null;
    },
    readOnlyRole(req) {
      const s = req && requests.get(req);
      return s && s.member.role !== 'admin' ? s.member.role : null;
    },
    onExecute(req) {
      const s = req && requests.get(req);
      if (!s) return undefined;
      // The client left before execution began: its row is written (rejected); nothing runs.
      if (s.closed) return false;
      // No operation of the document is the one asked for: GraphQL answers that and runs nothing.
      if (s.summary && s.summary.operationType === null) return undefined;
      let settle!: (r: Settled) => void;
      s.execution = new Promise<Settled>((r) => (settle = r));
      return (r) => {
        s.refused = r.refused;
        settle(r);
      };
    },
  };

  return {
    guard,
    hooks,
    graphqlPool,
    pgSettings(req): Record<string, string> {
      const s = req && requests.get(req);
      // No member (cannot happen behind the guard): the group role, which may read nothing.
      if (!s) return { role: 'switchboard_staff', statement_timeout: String(limits.statementTimeoutMs), ...SERIAL };
      return {
        role: `switchboard_staff_${s.member.role}`,
        'app.staff_member_id': s.member.id,
        statement_timeout: String(limits.statementTimeoutMs),
        ...SERIAL,
      };
    },
    async flush() {
      if (open > 0) await new Promise<void>((r) => idle.push(r));
      await write();
    },
    async close() {
      await write();
      await cache.stop();
      await graphqlPool.end();
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
