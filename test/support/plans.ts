/**
 * Reading the plans the API's statements run with: auto_explain on one connection, reported to it
 * as notices (nested statements too, so the statements inside a function), then the API role.
 */
import type pg from 'pg';

export async function explainAsApi(c: pg.Client, opts: { buffers?: boolean; json?: boolean } = {}): Promise<void> {
  await c.query("load 'auto_explain'");
  const sets = ['log_min_duration = 0', 'log_nested_statements = on', 'log_analyze = on', 'log_level = notice'];
  if (opts.buffers) sets.push('log_buffers = on');
  if (opts.json) sets.push('log_format = json');
  for (const set of sets) await c.query(`set auto_explain.${set}`);
  await c.query('set role switchboard_api');
}

/** The plan nodes of an auto_explain notice in JSON format, depth first. */
export function planNodes(message: string): Record<string, any>[] {
  const out: Record<string, any>[] = [];
  const walk = (node: Record<string, any>) => { out.push(node); for (const child of node.Plans ?? []) walk(child); };
  walk(JSON.parse(message.slice(message.indexOf('{'))).Plan);
  return out;
}
