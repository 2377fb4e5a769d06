// Jest loads global setup with Node's own loader; tsx lets it run the TypeScript setup.
import { tsImport } from 'tsx/esm/api';

export default async function globalSetup() {
  const { default: setup } = await tsImport('./cluster.ts', import.meta.url);
  await setup();
}
