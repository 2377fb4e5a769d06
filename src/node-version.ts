/**
 * Imported first by the entry points (the service and the operator scripts), before any module
 * that needs a newer Node: undici 8 (Node ≥ 22.19), graphile-worker 0.18 (≥ 22.18) and
 * PostGraphile v5 (≥ 22). The npm scripts run on the Node 24 the `node` dev dependency installs;
 * `node dist/src/main.js` run by hand (a systemd unit), or an install with `--omit=dev`, uses the
 * machine's own, and on Node 20 the service died at import with undici's
 * "Cannot read properties of undefined (reading 'bind')". It now ends with one line saying so.
 */
import { writeSync } from 'node:fs';

export const MIN_NODE = [22, 19] as const;

export function nodeTooOld(version: string = process.versions.node): boolean {
  const [major, minor] = version.split('.').map(Number);
  return major < MIN_NODE[0] || (major === MIN_NODE[0] && minor < MIN_NODE[1]);
}

if (nodeTooOld()) {
  const message = `Switchboard needs Node ≥ ${MIN_NODE.join('.')}; this is Node ${process.versions.node}. `
    + 'The npm scripts (npm start, npm run cli) run on the Node 24 installed as a dev dependency; '
    + 'to run dist/src/main.js yourself, use Node 22.19 or later (README, "Quick start").';
  // The shape of the service's log lines (src/log.ts), which cannot load on this Node.
  writeSync(2, `${JSON.stringify({ level: 60, time: new Date().toISOString(), service: 'switchboard', msg: message })}\n`);
  process.exit(1);
}
