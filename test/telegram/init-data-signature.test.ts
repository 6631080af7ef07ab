// Mini App initData's Ed25519 `signature` (Bot API, Mini Apps, "Validating data for Third-Party
// Use"): the sandbox Telegram signs as Telegram does, with a key pair of its own, and Capigram's
// verifier takes it only when configured with that key, as the demo alone does; by default it
// holds Telegram's production key, so sandbox-signed data is refused there.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addEntry } from '../../backend/domain/admin/entries.js';
import { parseInitData, signedBy } from '../../backend/domain/entries/init-data.js';
import {
  signedByTelegram,
  TELEGRAM_INIT_DATA_KEY,
  thirdPartyCheckString,
} from '../../backend/domain/entries/init-data-signature.js';
import { SandboxInitDataSigner } from '../../backend/sandbox/telegram-init-data.js';
import { DEFAULT_BOT } from '../fakes/index.js';
import { landAndEnter, newVisitor, payloadOf, startEntryWorld, type EntryWorld } from '../entries/world.js';

const signer = new SandboxInitDataSigner();
const BOT = { id: DEFAULT_BOT.id, token: DEFAULT_BOT.token };
const FIELDS = {
  query_id: 'AAHdF6IQAAAAAN0XohDhrOrc',
  user: JSON.stringify({ id: 777_330_901, first_name: 'Ann' }),
  auth_date: '1764300000',
  start_param: 'abc_DEF-1',
};
const signed = (fields = FIELDS) => parseInitData(signer.sign(fields, BOT))!;

describe('the signature rule', () => {
  it('signs <bot_id>:WebAppData and the sorted fields but hash and signature', () => {
    expect(
      thirdPartyCheckString(new Map(Object.entries({ b: '2', a: '1', hash: 'h', signature: 's' })), 42),
    ).toBe('42:WebAppData\na=1\nb=2');
  });

  it.each<[string, (f: Map<string, string>) => void, number, string, boolean]>([
    ['as signed, with the sandbox key', () => {}, DEFAULT_BOT.id, 'sandbox', true],
    ["with Telegram's production key", () => {}, DEFAULT_BOT.id, TELEGRAM_INIT_DATA_KEY, false],
    ['for another bot', () => {}, DEFAULT_BOT.id + 1, 'sandbox', false],
    ['a field changed', (f) => f.set('start_param', 'other'), DEFAULT_BOT.id, 'sandbox', false],
    ['a field added', (f) => f.set('chat_type', 'sender'), DEFAULT_BOT.id, 'sandbox', false],
    ['no signature', (f) => f.delete('signature'), DEFAULT_BOT.id, 'sandbox', false],
    ['a signature of the wrong shape', (f) => f.set('signature', 'abc'), DEFAULT_BOT.id, 'sandbox', false],
    ['a key of the wrong shape', () => {}, DEFAULT_BOT.id, 'not-a-key', false],
  ])('%s', (_what, change, botId, key, expected) => {
    const fields = signed();
    change(fields);
    expect(signedByTelegram(fields, botId, key === 'sandbox' ? signer.publicKeyHex : key)).toBe(expected);
  });

  it("the bot token's hash covers the signature too", () => {
    const fields = signed();
    expect(signedBy(fields, DEFAULT_BOT.token)).toBe(true);
    const signature = fields.get('signature')!;
    fields.set('signature', `${signature.startsWith('A') ? 'B' : 'A'}${signature.slice(1)}`);
    expect(signedBy(fields, DEFAULT_BOT.token)).toBe(false);
  });
});

describe('track/app', () => {
  let w: EntryWorld;
  let appEntry: string;
  beforeAll(async () => {
    w = await startEntryWorld();
    appEntry = (await addEntry(w.db.pool, { siteId: w.siteId, botId: w.botId, kind: 'app', app: 'shopapp' }))
      .entryId;
  });
  afterAll(async () => {
    await w.close();
  });
  const post = (initData: string) =>
    fetch(`${w.app.url}/backend/track/app`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ initData }),
    });
  const opened = async (userId: number) => {
    const { location } = await landAndEnter(w, newVisitor(), appEntry);
    return {
      ...FIELDS,
      user: JSON.stringify({ id: userId, first_name: 'Ann' }),
      auth_date: String(Math.floor(Date.now() / 1000)),
      start_param: payloadOf(location),
    };
  };

  it("refuses a signature that is not Telegram's, takes it with the key the demo configures", async () => {
    const fields = await opened(777_330_902);
    const refused = await post(signer.sign(fields, BOT));
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({
      code: 'INIT_DATA_INVALID',
      detail: "initData's signature is not Telegram's",
    });
    w.app.deps.config.TELEGRAM_INIT_DATA_KEY = signer.publicKeyHex;
    try {
      const res = await post(signer.sign(fields, BOT));
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ attributed: true });
    } finally {
      w.app.deps.config.TELEGRAM_INIT_DATA_KEY = TELEGRAM_INIT_DATA_KEY;
    }
  });
});
