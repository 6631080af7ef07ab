import { recordAudit } from '../domain/admin/audit.js';
import { addUser, listUsers, removeUser, ROLES } from '../domain/admin/users.js';
import { defineCommand } from './command.js';
import { table } from './table.js';

/** The dashboard's people (docs/teams.md): invite, list, remove. Each change goes to the audit log as `cli`. */
export const userCommands = [
  defineCommand({
    group: 'user',
    name: 'add',
    summary:
      'Invites a dashboard user: prints the invitation link (valid 7 days, once) that sets their password.',
    flags: {
      email: { type: 'string', required: true, placeholder: 'E', help: 'the e-mail the user signs in with' },
      role: {
        type: 'string',
        required: true,
        placeholder: ROLES.join('|'),
        help: 'owner: everything in the scope and its audit log; admin: the dashboard actions; viewer: reads only',
      },
      account: {
        type: 'string',
        placeholder: 'ACCOUNT_ID',
        field: 'accountId',
        help: 'limit the user to one account (without --account and --site: every account)',
      },
      site: {
        type: 'string',
        placeholder: 'SITE',
        field: 'siteId',
        help: 'limit the user to one site (siteId or websiteId)',
      },
    },
    async run({ deps }, v) {
      const out = await addUser(
        deps.pool,
        { email: v.email, role: v.role as (typeof ROLES)[number], accountId: v.account, siteId: v.site },
        { publicUrl: deps.config.PUBLIC_URL, now: deps.now() },
      );
      await recordAudit(deps.pool, {
        actor: 'cli',
        action: 'user.add',
        target: out.user.email,
        accountId: out.user.accountId,
        siteId: out.user.siteId,
        detail: { userId: out.userId, role: out.user.role },
      });
      return {
        json: { userId: out.userId, inviteUrl: out.inviteUrl },
        human: [
          `User invited: ${out.userId} (${out.user.role})`,
          '',
          `  ${out.inviteUrl}`,
          '',
          'Send this link to the user: it sets their password, works once and expires in 7 days.',
        ].join('\n'),
      };
    },
  }),

  defineCommand({
    group: 'user',
    name: 'list',
    summary: 'Lists the dashboard users, their role, scope and whether they have set a password.',
    flags: {},
    async run({ deps }) {
      const out = await listUsers(deps.pool);
      const human =
        out.users.length === 0
          ? 'No users.'
          : table(
              ['userId', 'email', 'role', 'scope', 'status', 'created'],
              out.users.map((u) => [
                u.userId,
                u.email,
                u.role,
                u.siteId ? `site ${u.siteId}` : u.accountId ? `account ${u.accountId}` : 'every account',
                u.status,
                u.createdAt,
              ]),
            );
      return { json: out, human };
    },
  }),

  defineCommand({
    group: 'user',
    name: 'remove',
    summary: 'Removes a dashboard user: their sessions end at once and their invitation stops working.',
    flags: {
      user: { type: 'string', required: true, placeholder: 'USER_ID', field: 'userId', help: 'the userId' },
    },
    async run({ deps }, v) {
      const out = await removeUser(deps.pool, v.user);
      await recordAudit(deps.pool, {
        actor: 'cli',
        action: 'user.remove',
        target: out.user.email,
        accountId: out.user.accountId,
        siteId: out.user.siteId,
        detail: { userId: out.userId },
      });
      return { json: { userId: out.userId, removed: true }, human: `User removed: ${out.userId}` };
    },
  }),
];
