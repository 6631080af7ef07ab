import { eraseLeadInAccount } from '../domain/erasure/erase-lead.js';
import { defineCommand } from './command.js';

export const leadCommands = [
  defineCommand({
    group: 'lead',
    name: 'erase',
    summary:
      "Erases a person's data (GDPR erasure): their lead's identifiers and PII digests, their visits' IP, User-Agent, URLs and click ids, " +
      "and their conversions' PII, on every site of the account they are known on (or only --site). Counts and reports stay, anonymised; " +
      'sends not delivered yet are cancelled; an audit row records the erasure without the person. Erasing again is refused (not found).',
    flags: {
      account: {
        type: 'string',
        required: true,
        placeholder: 'ACCOUNT_ID',
        field: 'accountId',
        help: 'the account whose data is erased',
      },
      'telegram-user-id': {
        type: 'string',
        kind: 'int',
        required: true,
        placeholder: 'USER_ID',
        field: 'telegramUserId',
        help: 'the Telegram user id of the person',
      },
      site: {
        type: 'string',
        placeholder: 'SITE',
        field: 'site',
        help: 'only this site (siteId or websiteId)',
      },
    },
    async run({ deps }, v) {
      const out = await eraseLeadInAccount(
        deps.pool,
        { accountId: v.account, telegramUserId: v['telegram-user-id'], site: v.site },
        'cli',
      );
      const lines = out.erasures.map(
        (e) =>
          `site ${e.siteId}: ${e.conversions} conversion(s), ${e.visits} visit(s), ${e.memberships} join(s) erased; ${e.sendsCancelled} send(s) cancelled (erasure ${e.erasureId})`,
      );
      return { json: out, human: lines.join('\n') };
    },
  }),
];
