/**
 * What every bench section shares: the row it prints, the knobs read from the environment, the
 * progress line on stderr, and the context bench/run.ts hands each section (the seeded cluster,
 * the service and the baseline it started, the receivers of the fan-out).
 */
import type pg from 'pg';
import type { CountingHttps, CountingSmtp } from './receivers.js';

/** One printed row. Other bench modules (bench/delivery.ts) return rows of the same shape. */
export interface BenchRow {
  name: string;
  value: number;
  unit: string;
  /** The same measurement on the baseline, in the same unit. */
  baseline?: number;
  /** value / baseline (or baseline / value for "lower is better" units such as ms and MB). */
  ratio?: number;
  /** What the issue asks for, as text. */
  target?: string;
  note?: string;
}

const env = process.env;
export const num = (k: string, d: number) => (env[k] ? Number(env[k]) : d);
export const SECONDS = num('BENCH_SECONDS', 8);
export const CONNECTIONS = num('BENCH_CONNECTIONS', 50);
export const BIG_CALLS = num('BENCH_BIG_CALLS', 1_000_000);
export const MID_CALLS = num('BENCH_MID_CALLS', 50_000);
export const SENDERS = num('BENCH_SENDERS', 20);
export const INGEST_SECONDS = num('BENCH_INGEST_SECONDS', 15);
export const WARMUP_SECONDS = num('BENCH_WARMUP_SECONDS', 3);
export const DRAIN_SECONDS = num('BENCH_DRAIN_SECONDS', 60);
export const VOICE_SECRET = 'bench_voice_secret';
export const SERVICE_PHONE = '+13125550100';

const t0 = Date.now();
/** Seconds since the bench started. */
export const elapsed = () => (Date.now() - t0) / 1000;
export const progress = (msg: string) => process.stderr.write(`[bench ${elapsed().toFixed(0).padStart(4)} s] ${msg}\n`);
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The middle value (the upper of the two middle ones for an even count); `xs` is left as it is. */
export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** A seeded location and its id (`fresh`: created by this run, not found in a kept cluster). */
export interface BenchLocation {
  id: string;
  fresh: boolean;
}

/** What bench/run.ts hands each section. */
export interface BenchContext {
  owner: pg.Pool;
  databaseUrl: string;
  dataDir: string;
  /** The service's API, its admin listener, and the bare baseline (bench/baseline.mjs). */
  base: string;
  adminUrl: string;
  bbase: string;
  servicePid: number;
  baselinePid: number;
  /** An API key per location slug, and its Authorization header. */
  tokens: Record<string, string>;
  auth(slug: string): Record<string, string>;
  /** Creates (or finds) a location by slug and mints a key for it. */
  location(slug: string, attrs: Record<string, unknown>): Promise<BenchLocation>;
  /** Seeds demo calls into a location up to `calls` (those a kept cluster has already count). */
  seed(slug: string, calls: number, days: number): Promise<void>;
  mid: BenchLocation;
  /** 1,000,000 calls over 90 days; seeded only when a section that needs it runs. */
  big: BenchLocation | null;
  ingest: BenchLocation;
  https: CountingHttps;
  smtp: CountingSmtp;
  /** RSS of the service's process tree once ready, in MB. */
  idleRss: number;
}

/**
 * One section of the table: BENCH_ONLY names sections; `big` sections run only with the big
 * location seeded; `named` sections run only when BENCH_ONLY names them.
 */
export interface Section {
  name: string;
  big?: boolean;
  named?: boolean;
  run(ctx: BenchContext): Promise<BenchRow[]>;
}
