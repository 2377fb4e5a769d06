/**
 * Adding a resource edits no central list (migrations/CONVENTIONS.md, "Worked example"): route
 * modules are found in their folder by their `area` export (src/http/routes/index.ts), the OpenAPI
 * tags come from those areas, and the event type lists from the event catalog. This file proves
 * the discovery on a fixture folder, and that nothing escapes or duplicates the registry: every
 * route a module of src/http/routes exports is registered, and nothing else imports a module's
 * route list to build a list of its own.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { RouteSpec } from '../../src/http/route.js';
import { TAGS } from '../../src/http/openapi-info.js';
import { areas, discoverAreas, routes, routeTags } from '../../src/http/routes/index.js';
import { projectRoot } from '../../src/db/migrate.js';
import { eventCatalog, eventTypes } from '../../src/webhooks/events.js';

const ROUTES_DIR = path.join(projectRoot, 'src/http/routes');
const isRoute = (v: unknown): v is RouteSpec =>
  !!v && typeof v === 'object' && typeof (v as RouteSpec).path === 'string' && typeof (v as RouteSpec).handler === 'function';

test('a module is registered by its area alone, in the order it gives; one without an area is skipped', async () => {
  const found = await discoverAreas(new URL('../fixtures/routes/', import.meta.url));
  expect(found.map((a) => [a.module, a.order])).toEqual([['gadgets', 10], ['widgets', 20]]);
  expect(found[1].routes.map((r) => r.operationId)).toEqual(['listWidgets']);
});

test('every route a module of src/http/routes exports is registered, once', async () => {
  const registered = new Set(routes);
  expect(registered.size).toBe(routes.length);
  const unregistered: string[] = [];
  const seen = new Set<RouteSpec>();
  for (const file of fs.readdirSync(ROUTES_DIR).filter((f) => f.endsWith('.ts') && f !== 'index.ts')) {
    const mod = (await import(path.join(ROUTES_DIR, file))) as Record<string, unknown>;
    for (const [name, value] of Object.entries(mod)) {
      const listed = name === 'area' ? (value as { routes: unknown[] }).routes : Array.isArray(value) ? value : [value];
      for (const r of listed.filter(isRoute)) {
        seen.add(r);
        if (!registered.has(r)) unregistered.push(`${file} ${name}: ${r.method.toUpperCase()} ${r.path}`);
      }
    }
  }
  expect(unregistered).toEqual([]);
  // Not vacuous: the sweep saw each registered route through its module.
  expect(seen.size).toBe(routes.length);
  expect(areas.length).toBeGreaterThan(10);
});

test('no module builds a list of its own from a route module\'s routes', () => {
  const offenders: string[] = [];
  const walk = (dir: string): string[] => fs.readdirSync(path.join(projectRoot, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts')).map((f) => path.posix.join(dir, f.split(path.sep).join('/')));
  for (const file of [...walk('src'), ...walk('scripts'), ...walk('test'), ...walk('bench')]) {
    if (file === 'src/http/routes/index.ts') continue;
    const text = fs.readFileSync(path.join(projectRoot, file), 'utf8');
    for (const m of text.matchAll(/import\s*\{([^}]*)\}\s*from\s*'[^']*routes\/[a-z-]+\.js'/g)) {
      const lists = m[1].split(',').map((s) => s.trim()).filter((s) => /Routes$/.test(s) || s === 'area');
      if (lists.length) offenders.push(`${file}: ${lists.join(', ')}`);
    }
  }
  expect(offenders).toEqual([]);
});

test('tags and event types are derived, not listed', () => {
  // Every tag of a route is described by its module; the document's only other tags are its two sections.
  for (const r of routes) expect([r.operationId, r.tag in routeTags]).toEqual([r.operationId, true]);
  expect(Object.keys(TAGS)).toEqual([...Object.keys(routeTags), 'Voice platform', 'Webhook events']);
  expect(eventTypes).toEqual(eventCatalog.map((e) => e.type));
});
