/**
 * Admission of staff GraphQL requests (docs/staff.md "Admission"): at most STAFF_MAX_RUNNING run
 * at once (from the guard letting them through to their response closing, serialisation and
 * delivery included), at most STAFF_MAX_QUEUED wait behind them in arrival order, and any more are
 * refused at once with 503 and Retry-After. Staff tools can wait; the API's requests share the
 * CPU with every staff answer being built, so the number being built is what this bounds. Turns are
 * also paced (STAFF_TIME_SHARE): after a turn held d ms the next starts no sooner than
 * d × (1 / share − 1) ms later (at most MAX_PAUSE_MS), so back-to-back staff requests take at most that share of the time
 * (on two cores even a low-priority process slows the API beside it: docs/staff.md).
 */
import { performance } from 'node:perf_hooks';
import { Counter, Gauge } from 'prom-client';
import { registry } from '../metrics/registry.js';

/** Requests refused for want of a turn (in the process whose /metrics is scraped: see StaffAccessOptions.onRefused). */
export const staffRefusals = new Counter({
  name: 'switchboard_staff_requests_refused_total',
  help: 'Staff GraphQL requests refused with 503 before running because STAFF_MAX_RUNNING were running and STAFF_MAX_QUEUED waiting, by reason (busy).',
  labelNames: ['reason'] as const,
  registers: [registry],
});

/** Requests holding a turn and waiting for one (set in the process whose /metrics is scraped). */
export const staffAdmitted = new Gauge({
  name: 'switchboard_staff_requests',
  help: 'Staff GraphQL requests by state: running (holding one of STAFF_MAX_RUNNING turns, answer delivery included), queued (waiting for a turn).',
  labelNames: ['state'] as const,
  registers: [registry],
});

export type AdmissionStats = { running: number; queued: number };

/** Sets switchboard_staff_requests (the default of StaffAccessOptions.onAdmission). */
export function showAdmission(stats: AdmissionStats): void {
  staffAdmitted.set({ state: 'running' }, stats.running);
  staffAdmitted.set({ state: 'queued' }, stats.queued);
}

export interface AdmissionLimits {
  /** Requests running at once (STAFF_MAX_RUNNING). */
  maxRunning: number;
  /** Requests waiting for a turn (STAFF_MAX_QUEUED); 0: refuse whenever all turns are taken. */
  maxQueued: number;
  /** Share of the time turns may be held, back to back (STAFF_TIME_SHARE, 0 < share ≤ 1; 1: no pacing). */
  timeShare: number;
}

export const DEFAULT_ADMISSION: AdmissionLimits = { maxRunning: 1, maxQueued: 8, timeShare: 0.25 };

/** A request's place: `ready` resolves when it may run; `leave` gives its turn back (or its place in the queue). */
export interface Ticket {
  ready: Promise<void>;
  /** Whether it had to wait behind others. */
  queued: boolean;
  leave(): void;
}

/**
 * The longest pause after a turn: a rare long turn (the first request builds the schema, seconds)
 * does not hold the next request for three times as long.
 */
export const MAX_PAUSE_MS = 2000;

/** Weight of the newest duration in the running mean that Retry-After is estimated from. */
const EWMA = 0.2;

export class StaffAdmission {
  private running = 0;
  private readonly waiting: { start: () => void }[] = [];
  /** Mean time a request holds its turn (ms), for Retry-After. */
  private meanMs = 1000;
  /** No turn starts before this (performance.now() ms): the pace after the last turn. */
  private notBefore = 0;
  private paceTimer: NodeJS.Timeout | null = null;

  /** `changed` is told the counts after every change. */
  constructor(
    readonly limits: AdmissionLimits,
    private readonly changed: (stats: AdmissionStats) => void = () => undefined,
    /** The clock (milliseconds): performance.now, or a test's. */
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** STAFF_TIME_SHARE kept within (0.01, 1]. */
  private get share(): number {
    return Math.min(1, Math.max(this.limits.timeShare, 0.01));
  }

  get stats(): AdmissionStats {
    return { running: this.running, queued: this.waiting.length };
  }

  /** Seconds after which a refused request may expect a turn: the queue ahead drained at the mean pace. */
  retryAfterSeconds(): number {
    const ahead = this.running + this.waiting.length;
    const perTurn = this.meanMs / this.share;
    return Math.min(60, Math.max(1, Math.ceil((perTurn * ahead) / Math.max(1, this.limits.maxRunning) / 1000)));
  }

  /** A turn now, a place in the queue, or null when the queue is full (refuse with 503). */
  enter(): Ticket | null {
    if (this.running < this.limits.maxRunning && this.now() >= this.notBefore && this.waiting.length === 0) {
      const t = this.ticket(false, Promise.resolve());
      this.changed(this.stats);
      return t;
    }
    // A free turn that is only paused is this request's: it waits for the pause, whatever the queue's size.
    const pausedTurn = this.running < this.limits.maxRunning && this.waiting.length === 0;
    if (!pausedTurn && this.waiting.length >= this.limits.maxQueued) return null;
    let started = false;
    const entry = { start: () => undefined as void };
    const ready = new Promise<void>((resolve) => {
      entry.start = () => {
        started = true;
        resolve();
      };
    });
    this.waiting.push(entry);
    this.changed(this.stats);
    this.next();
    const ticket = this.ticket(true, ready, () => started);
    const leave = ticket.leave;
    ticket.leave = () => {
      if (started) return leave();
      // Left while waiting: give up the place; it never held a turn.
      const i = this.waiting.indexOf(entry);
      if (i >= 0) {
        this.waiting.splice(i, 1);
        this.changed(this.stats);
      }
    };
    return ticket;
  }

  private ticket(queued: boolean, ready: Promise<void>, holds: () => boolean = () => true): Ticket {
    let since = 0;
    let left = false;
    if (!queued) {
      this.running += 1;
      since = this.now();
    } else {
      void ready.then(() => {
        since = this.now();
      });
    }
    return {
      ready,
      queued,
      leave: () => {
        if (left || !holds()) return;
        left = true;
        const now = this.now();
        const held = now - since;
        this.meanMs += EWMA * (held - this.meanMs);
        this.notBefore = Math.max(this.notBefore, now + Math.min(held * (1 / this.share - 1), MAX_PAUSE_MS));
        this.running -= 1;
        this.next();
        this.changed(this.stats);
      },
    };
  }

  private next(): void {
    if (this.paceTimer) return; // a start is already scheduled for the end of the pause
    const wait = this.notBefore - this.now();
    if (wait > 0 && this.waiting.length && this.running < this.limits.maxRunning) {
      this.paceTimer = setTimeout(() => {
        this.paceTimer = null;
        this.next();
        this.changed(this.stats);
      }, Math.ceil(wait));
      this.paceTimer.unref();
      return;
    }
    while (this.running < this.limits.maxRunning && this.waiting.length) {
      this.running += 1;
      this.waiting.shift()!.start();
    }
  }
}
