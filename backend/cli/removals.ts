import {
  removeAccount,
  removeChannel,
  removeEntry,
  removePixel,
  removeSite,
} from '../domain/admin/removal.js';
import { defineCommand, type Command } from './command.js';

const removed = (what: string, id: string) => ({ json: { removed: true }, human: `Removed ${what} ${id}` });

/** `… remove`: history stays for reports and erasure (docs/cli.md, "Removing things"). */
export const removalCommands: Command[] = [
  defineCommand({
    group: 'site',
    name: 'remove',
    summary:
      'Removes a site: its channels, entries and pixels stop, its site keys are revoked; its visits and conversions stay in reports.',
    flags: {
      site: {
        type: 'string',
        required: true,
        placeholder: 'SITE',
        field: 'siteId',
        help: 'the site (siteId or websiteId)',
      },
    },
    async run({ deps }, v) {
      await removeSite(deps.pool, v.site);
      return removed('site', v.site);
    },
  }),
  defineCommand({
    group: 'channel',
    name: 'remove',
    summary: 'Removes a channel: no more invite links; its joins and conversions stay in reports.',
    flags: {
      channel: {
        type: 'string',
        required: true,
        placeholder: 'CHANNEL_ID',
        field: 'channelId',
        help: 'the channel',
      },
    },
    async run({ deps }, v) {
      await removeChannel(deps.pool, v.channel);
      return removed('channel', v.channel);
    },
  }),
  defineCommand({
    group: 'entry',
    name: 'remove',
    summary: 'Removes an entry: its links stop handing out payloads; its clicks stay in reports.',
    flags: {
      entry: { type: 'string', required: true, placeholder: 'ENTRY_ID', field: 'entryId', help: 'the entry' },
    },
    async run({ deps }, v) {
      await removeEntry(deps.pool, v.entry);
      return removed('entry', v.entry);
    },
  }),
  defineCommand({
    group: 'pixel',
    name: 'remove',
    summary:
      'Removes a pixel: nothing more is sent to it and its waiting sends are skipped; its sends stay on record.',
    flags: {
      pixel: { type: 'string', required: true, placeholder: 'PIXEL_ID', field: 'pixelId', help: 'the pixel' },
    },
    async run({ deps }, v) {
      await removePixel(deps.pool, v.pixel);
      return removed('pixel', v.pixel);
    },
  }),
  defineCommand({
    group: 'account',
    name: 'remove',
    summary: 'Removes an account without sites: its bots are removed and its API keys revoked.',
    flags: {
      account: {
        type: 'string',
        required: true,
        placeholder: 'ACCOUNT_ID',
        field: 'accountId',
        help: 'the account',
      },
    },
    async run({ deps }, v) {
      await removeAccount(deps, v.account);
      return removed('account', v.account);
    },
  }),
];
