import {
  removeAccount,
  removeChannel,
  removeEntry,
  removePixel,
  removeSite,
} from '../domain/admin/removal.js';
import { removeSpendSource } from '../domain/spend/sources.js';
import type { Deps } from '../deps.js';
import { defineCommand, type Command } from './command.js';

/** One `… remove` command: the flag naming what goes, and the removal it runs. */
interface Removal {
  group: 'site' | 'channel' | 'entry' | 'pixel' | 'account' | 'spend';
  /** The flag naming what goes, when it is not the group's name. */
  flag?: string;
  placeholder: string;
  field: string;
  help: string;
  summary: string;
  remove(deps: Deps, id: string): Promise<unknown>;
}

const REMOVALS: Removal[] = [
  {
    group: 'site',
    placeholder: 'SITE',
    field: 'siteId',
    help: 'the site (siteId or websiteId)',
    summary:
      'Removes a site: its channels, entries and pixels stop, its site keys are revoked; its visits and conversions stay in reports.',
    remove: (deps, id) => removeSite(deps.pool, id),
  },
  {
    group: 'channel',
    placeholder: 'CHANNEL_ID',
    field: 'channelId',
    help: 'the channel',
    summary: 'Removes a channel: no more invite links; its joins and conversions stay in reports.',
    remove: (deps, id) => removeChannel(deps.pool, id),
  },
  {
    group: 'entry',
    placeholder: 'ENTRY_ID',
    field: 'entryId',
    help: 'the entry',
    summary: 'Removes an entry: its links stop handing out payloads; its clicks stay in reports.',
    remove: (deps, id) => removeEntry(deps.pool, id),
  },
  {
    group: 'pixel',
    placeholder: 'PIXEL_ID',
    field: 'pixelId',
    help: 'the pixel',
    summary:
      'Removes a pixel: nothing more is sent to it and its waiting sends are skipped; its sends stay on record.',
    remove: (deps, id) => removePixel(deps.pool, id),
  },
  {
    group: 'account',
    placeholder: 'ACCOUNT_ID',
    field: 'accountId',
    help: 'the account',
    summary: 'Removes an account without sites: its bots are removed and its API keys revoked.',
    remove: (deps, id) => removeAccount(deps, id),
  },
  {
    group: 'spend',
    flag: 'source',
    placeholder: 'SPEND_SOURCE_ID',
    field: 'spendSourceId',
    help: 'the spend source',
    summary: 'Removes a spend source: no more imports; the spend it read stays in reports.',
    remove: (deps, id) => removeSpendSource(deps.pool, id),
  },
];

/** `… remove`: history stays for reports and erasure (docs/cli.md, "Removing things"). */
export const removalCommands: Command[] = REMOVALS.map((r) =>
  defineCommand({
    group: r.group,
    name: 'remove',
    summary: r.summary,
    flags: {
      [r.flag ?? r.group]: {
        type: 'string',
        required: true,
        placeholder: r.placeholder,
        field: r.field,
        help: r.help,
      },
    },
    async run({ deps }, v) {
      const id = v[r.flag ?? r.group] as string;
      await r.remove(deps, id);
      return {
        json: { removed: true },
        human: `Removed ${r.group === 'spend' ? 'spend source' : r.group} ${id}`,
      };
    },
  }),
);
