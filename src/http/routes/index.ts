/**
 * The route registry: every module of this folder that exports an `area` (src/http/route.ts,
 * `defineArea`) is registered, in the documentation order its `order` gives. No list names the
 * modules, so a new resource is a new file here and nothing else in TypeScript's HTTP layer
 * (migrations/CONVENTIONS.md, "Worked example"). Modules without an `area` (shared schemas such as
 * records.ts) are loaded and skipped; test/repo/registry.test.ts fails a module that defines
 * routes without exporting them as its `area`.
 */
import { readdirSync } from 'node:fs';
import type { ApiArea, RouteSpec } from '../route.js';

/** The module files of a folder, by name: sources under tsx and Jest, compiled files under dist/. */
function moduleFiles(dir: URL): string[] {
  return readdirSync(dir).filter((f) => /\.(ts|js)$/.test(f) && !f.endsWith('.d.ts') && !/^index\.(ts|js)$/.test(f)).sort();
}

/** Every `area` the modules of `dir` export, in documentation order; throws on a clash of order or tag. */
export async function discoverAreas(dir: URL): Promise<Array<ApiArea & { module: string }>> {
  const found: Array<ApiArea & { module: string }> = [];
  for (const file of moduleFiles(dir)) {
    const mod = (await import(new URL(file, dir).href)) as { area?: ApiArea };
    if (mod.area) found.push({ ...mod.area, module: file.replace(/\.(ts|js)$/, '') });
  }
  found.sort((a, b) => a.order - b.order);
  const problems: string[] = [];
  for (let i = 1; i < found.length; i++) {
    if (found[i].order === found[i - 1].order) problems.push(`${found[i - 1].module} and ${found[i].module} both have order ${found[i].order}`);
  }
  const owner = new Map<string, string>();
  for (const a of found) {
    for (const tag of Object.keys(a.tags)) {
      if (owner.has(tag)) problems.push(`tag ${tag} is described by both ${owner.get(tag)} and ${a.module}`);
      owner.set(tag, a.module);
    }
  }
  if (problems.length) throw new Error(`${dir.pathname}: ${problems.join('; ')}`);
  return found;
}

/** The route modules' areas, in documentation order. */
export const areas: ApiArea[] = await discoverAreas(new URL('.', import.meta.url));

/** Every token endpoint, in documentation order. */
export const routes: RouteSpec[] = areas.flatMap((a) => a.routes);

/** Every tag the token endpoints use, with its description, in documentation order. */
export const routeTags: Record<string, string> = Object.fromEntries(areas.flatMap((a) => Object.entries(a.tags)));
