import { createAccount, listAccounts } from '../domain/admin/accounts.js';
import { defineCommand } from './command.js';
import { table } from './table.js';

export const accountCommands = [
  defineCommand({
    group: 'account',
    name: 'create',
    summary: 'Creates an account: the tenant that owns sites, bots and API keys.',
    flags: {
      name: {
        type: 'string',
        required: true,
        placeholder: 'NAME',
        help: 'a name for the account (1–200 characters)',
      },
    },
    async run({ deps }, v) {
      const out = await createAccount(deps.pool, { name: v.name });
      return { json: out, human: `Account created: ${out.accountId}` };
    },
  }),

  defineCommand({
    group: 'account',
    name: 'list',
    summary: 'Lists every account, with how many sites and bots it has.',
    flags: {},
    async run({ deps }) {
      const out = await listAccounts(deps.pool);
      const human =
        out.accounts.length === 0
          ? 'No accounts yet: npm run admin -- account create --name NAME'
          : table(
              ['accountId', 'name', 'sites', 'bots', 'created'],
              out.accounts.map((a) => [a.accountId, a.name, String(a.sites), String(a.bots), a.createdAt]),
            );
      return { json: out, human };
    },
  }),
];
