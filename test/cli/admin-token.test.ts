// The contract has the admin token generated into DATA_DIR and printed on first start. When an
// operator's first command on a fresh DATA_DIR is the CLI, the CLI generates it: it says where
// (never the token itself, and never on stdout, which stays the one JSON object).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { cliWorld, type CliWorld } from './harness.js';

let world: CliWorld;
beforeAll(async () => {
  world = await cliWorld();
});
afterAll(async () => {
  await world.close();
});

it('the first command on a fresh DATA_DIR says on stderr where it generated the admin token; later ones do not', async () => {
  const first = await world.run('account', 'create', '--name', 'First', '--json');
  expect(first.code).toBe(0);
  expect(first.json()).toHaveProperty('accountId');
  expect(first.stderr).toContain(`generated the admin token into ${world.dataDir}/admin-token`);
  const token = readFileSync(join(world.dataDir, 'admin-token'), 'utf8').trim();
  expect(token.length).toBeGreaterThanOrEqual(20);
  expect(first.stderr).not.toContain(token);

  const second = await world.run('account', 'create', '--name', 'Second', '--json');
  expect(second.code).toBe(0);
  expect(second.stderr).toBe('');
});
