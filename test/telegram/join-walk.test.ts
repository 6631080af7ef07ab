// The walk of one attributed join: which functions of backend/domain/ and backend/telegram/ run,
// and how often, while the webhook takes one chat_member update through one of our links, read
// from V8's own call counts (precise coverage). A join's rules are decided in one step over facts
// read once; this keeps the path from the update to the conversion's write from spreading again.
import { Session } from 'node:inspector/promises';
import { fileURLToPath } from 'node:url';
import { relative, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHATS, newUser, startWorld, type World } from './world.js';

const ROOT = resolve(import.meta.dirname, '../..');

let w: World;
let session: Session;

beforeAll(async () => {
  w = await startWorld({ worker: false });
  session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: true });
});
afterAll(async () => {
  await session.post('Profiler.stopPreciseCoverage');
  session.disconnect();
  await w.close();
});

interface Stay {
  file: string;
  fn: string;
  calls: number;
}

/** Functions of `trees` entered since the last call, with their call counts (reading resets the counts). */
async function stays(trees: string[]): Promise<Stay[]> {
  const { result } = await session.post('Profiler.takePreciseCoverage');
  const found: Stay[] = [];
  for (const script of result) {
    if (!script.url.startsWith('file://')) continue;
    const file = relative(ROOT, fileURLToPath(script.url.split('?')[0]!));
    if (!trees.some((t) => file.startsWith(t))) continue;
    // Named functions only: the module's top level has no name, and neither have the getters the
    // test runner puts on a module's exports (each read of an imported name calls one).
    for (const f of script.functions) {
      const calls = f.ranges[0]?.count ?? 0;
      if (calls > 0 && f.functionName !== '') found.push({ file, fn: f.functionName, calls });
    }
  }
  return found;
}

/** Delivers one join through a fresh link of a fresh visit; returns the user and the walk of the delivery. */
async function oneJoin(): Promise<{ userId: number; walk: Stay[] }> {
  const inv = await w.invitation('main');
  const user = newUser();
  const update = w.fakes.telegram.chatMemberJoined({
    chatId: CHATS.main.id,
    user,
    inviteLink: inv.inviteLink,
  });
  await stays([]);
  const res = await w.deliver(update);
  const walk = await stays(['backend/domain/', 'backend/telegram/']);
  expect(res.status).toBe(200);
  return { userId: user.id, walk };
}

describe('the walk of an attributed join', () => {
  it('runs from the update to the conversion write through few functions of the domain', async () => {
    await oneJoin(); // every module loaded and warm
    const { userId, walk } = await oneJoin();
    expect(await w.count('conversions WHERE telegram_user_id = $1', [userId])).toBe(1);

    const calls = walk.reduce((n, s) => n + s.calls, 0);
    const rooms = new Set(walk.map((s) => s.file));
    console.log(
      `join walk: ${calls} calls of ${walk.length} functions in ${rooms.size} files\n` +
        walk.map((s) => `  ${s.calls} ${s.file} ${s.fn}`).join('\n'),
    );
    expect(walk.some((s) => s.fn === 'recordConversion' && s.calls === 1)).toBe(true);
  });
});
