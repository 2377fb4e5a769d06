/** Failures of the embedded PostgreSQL, each naming the cause and the fix. */

/** Any failure of the embedded cluster: what went wrong and what the operator can do about it. */
export class EmbeddedPostgresError extends Error {
  constructor(
    readonly problem: string,
    readonly fix: string,
    /** A Node error code when the failure is the database being unreachable (ETIMEDOUT): callers answer `unavailable`. */
    readonly code?: string,
  ) {
    super(`embedded PostgreSQL: ${problem}. Fix: ${fix}`);
    this.name = 'EmbeddedPostgresError';
  }
}

/** An error's code and message, for a problem sentence. */
export const errText = (err: unknown) => {
  const e = err as NodeJS.ErrnoException;
  return e?.code ? `${e.code} (${e.message})` : String((err as Error)?.message ?? err);
};
