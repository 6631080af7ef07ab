import { createAccount } from '../domain/admin/accounts.js';
import { defineCommand } from './command.js';

export const accountCommands = [
  defineCommand({
    group: 'account',
    name: 'create',
    summary: 'Creates an account: the tenant that owns sites, bots and API keys.',
    flags: {
      name: { type: 'string', required: true, placeholder: 'NAME', help: 'a name for the account (1–200 characters)' },
    },
    async run({ deps }, v) {
      const out = await createAccount(deps.pool, { name: v.name });
      return { json: out, human: `Account created: ${out.accountId}` };
    },
  }),
];
