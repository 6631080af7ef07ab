// my_chat_member: the bot's own status per channel, as `channel list` shows it, and the warning
// when the bot loses the right to invite.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { listChannels } from '../../backend/domain/admin/channels.js';
import { createLogger } from '../../backend/log.js';
import { DEFAULT_BOT } from '../fakes/index.js';
import { CHATS, startWorld, type World } from './world.js';

let w: World;
const logLines: { level: number; msg: string; channelId?: string; status?: string }[] = [];

beforeAll(async () => {
  w = await startWorld({ worker: false });
  // The app reads its logger from its deps on every request: capture warnings in memory.
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logLines.push(JSON.parse(chunk.toString()));
      done();
    },
  });
  w.app.deps.log = createLogger('warn', sink);
});
afterAll(async () => {
  await w.close();
});
beforeEach(() => {
  logLines.length = 0;
});

const owner = { id: 5000, first_name: 'Owner' };

async function statusOf(key: keyof typeof CHATS) {
  const { channels } = await listChannels(w.db.pool, w.siteId);
  const c = channels.find((x) => x.channelId === w.channels[key]);
  return c && { botStatus: c.botStatus, botIsAdmin: c.botIsAdmin, botCanInvite: c.botCanInvite };
}

const lostRights = () => logLines.filter((l) => l.level === 40 && /lost its admin rights/.test(l.msg));

describe('my_chat_member', () => {
  it('channel add recorded the bot as an admin that may invite', async () => {
    expect(await statusOf('main')).toEqual({
      botStatus: 'administrator',
      botIsAdmin: true,
      botCanInvite: true,
    });
  });

  it('a demotion to member is stored and logged as a warning', async () => {
    const res = await w.deliver(
      w.fakes.telegram.myChatMember({
        chatId: CHATS.main.id,
        from: owner,
        oldStatus: 'administrator',
        newStatus: 'member',
      }),
    );
    expect(res.status).toBe(200);
    expect(await statusOf('main')).toEqual({ botStatus: 'member', botIsAdmin: false, botCanInvite: false });
    expect(lostRights()).toEqual([expect.objectContaining({ channelId: w.channels.main, status: 'member' })]);
  });

  it('a promotion back to admin with the invite right is stored, without a warning', async () => {
    await w.deliver(
      w.fakes.telegram.myChatMember({
        chatId: CHATS.main.id,
        from: owner,
        oldStatus: 'member',
        newStatus: 'administrator',
        canInviteUsers: true,
      }),
    );
    expect(await statusOf('main')).toEqual({
      botStatus: 'administrator',
      botIsAdmin: true,
      botCanInvite: true,
    });
    expect(lostRights()).toEqual([]);
  });

  it('an admin without the invite right counts as having lost its rights', async () => {
    await w.deliver(
      w.fakes.telegram.myChatMember({
        chatId: CHATS.priced.id,
        from: owner,
        oldStatus: 'administrator',
        newStatus: 'administrator',
        canInviteUsers: false,
      }),
    );
    expect(await statusOf('priced')).toEqual({
      botStatus: 'administrator',
      botIsAdmin: true,
      botCanInvite: false,
    });
    expect(lostRights()).toHaveLength(1);
  });

  it('being removed from the channel is stored as its status', async () => {
    await w.deliver(
      w.fakes.telegram.myChatMember({
        chatId: CHATS.manual.id,
        from: owner,
        oldStatus: 'administrator',
        newStatus: 'kicked',
      }),
    );
    expect(await statusOf('manual')).toEqual({ botStatus: 'kicked', botIsAdmin: false, botCanInvite: false });
  });

  it('news older than the stored status is not applied', async () => {
    const before = await statusOf('custom');
    const old = Math.floor(Date.now() / 1000) - 3600;
    await w.deliver(
      w.fakes.telegram.myChatMember({
        chatId: CHATS.custom.id,
        from: owner,
        oldStatus: 'administrator',
        newStatus: 'left',
        date: old,
      }),
    );
    expect(await statusOf('custom')).toEqual(before);
    expect(lostRights()).toEqual([]);
  });

  it('an update about another user than this bot changes nothing', async () => {
    const update = w.fakes.telegram.myChatMember({
      chatId: CHATS.requests.id,
      from: owner,
      oldStatus: 'administrator',
      newStatus: 'left',
    });
    if ('my_chat_member' in update) update.my_chat_member.new_chat_member.user.id = DEFAULT_BOT.id + 1;
    await w.deliver(update);
    expect(await statusOf('requests')).toEqual({
      botStatus: 'administrator',
      botIsAdmin: true,
      botCanInvite: true,
    });
  });

  it('the same update twice is applied once', async () => {
    const demote = w.fakes.telegram.myChatMember({
      chatId: CHATS.requests.id,
      from: owner,
      oldStatus: 'administrator',
      newStatus: 'member',
    });
    await w.deliver(demote);
    await w.deliver(
      w.fakes.telegram.myChatMember({
        chatId: CHATS.requests.id,
        from: owner,
        oldStatus: 'member',
        newStatus: 'administrator',
      }),
    );
    // A resend of the demotion must not undo the later promotion.
    await w.fakes.telegram.sendUpdate(w.webhookUrl, w.secret, demote);
    expect(await statusOf('requests')).toEqual({
      botStatus: 'administrator',
      botIsAdmin: true,
      botCanInvite: true,
    });
    expect(lostRights()).toHaveLength(1);
  });
});
