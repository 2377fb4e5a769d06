/** Scraping a `/metrics` endpoint in tests: the Prometheus text parsed into samples. */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the Prometheus text exposition format (what prom-client writes). */
export function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

/** The samples of one scrape, with a lookup by name and (a subset of) labels. */
export async function scrape(baseUrl: string): Promise<Scrape> {
  const res = await fetch(`${baseUrl}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return new Scrape(parseMetrics(await res.text()), res.headers.get('content-type') ?? '');
}

export class Scrape {
  constructor(
    readonly samples: Sample[],
    readonly contentType: string,
  ) {}

  /** Every sample of `name` whose labels include `labels`. */
  all(name: string, labels: Record<string, string> = {}): Sample[] {
    return this.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  }

  /** The value of the one sample matching, or undefined when there is none; throws when several match. */
  value(name: string, labels: Record<string, string> = {}): number | undefined {
    const hits = this.all(name, labels);
    if (hits.length > 1) throw new Error(`${hits.length} samples of ${name} match ${JSON.stringify(labels)}`);
    return hits[0]?.value;
  }

  /** The sum over every sample matching (0 when none). */
  sum(name: string, labels: Record<string, string> = {}): number {
    return this.all(name, labels).reduce((a, s) => a + s.value, 0);
  }
}
