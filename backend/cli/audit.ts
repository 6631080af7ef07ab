import type { Deps } from '../deps.js';
import { recordAudit } from '../domain/admin/audit.js';
import { Uuid } from '../domain/admin/schemas.js';
import { findSite } from '../domain/admin/sites.js';
import type { Command } from './command.js';

/**
 * Each CLI command that changes something goes to the audit log as `cli`, by its name
 * (`site.create`, `pixel.update`): every command is a change unless it is one of the reads below,
 * so a command added later is recorded without being named here. Only the ids it was given and the
 * one it printed are kept: never a token, secret or key, and never a lead's Telegram id.
 */
const READS = new Set(['list', 'requests', 'test', 'deliveries']);
const READ_GROUPS = new Set(['report', 'help', 'export']);
/** Commands that write their own, richer entries. */
const SELF_AUDITED = new Set(['user']);
const ID_FLAGS = ['send', 'pixel', 'channel', 'entry', 'bot', 'key', 'site', 'account'];

export function isChange(cmd: Pick<Command, 'group' | 'name'>): boolean {
  return !READS.has(cmd.name) && !READ_GROUPS.has(cmd.group) && !SELF_AUDITED.has(cmd.group);
}

export async function recordCliChange(
  deps: Pick<Deps, 'pool'>,
  cmd: Pick<Command, 'group' | 'name'>,
  values: Record<string, unknown>,
  printed: Record<string, unknown>,
): Promise<void> {
  if (!isChange(cmd)) return;
  const given: Record<string, string> = {};
  for (const flag of ID_FLAGS) if (typeof values[flag] === 'string') given[flag] = values[flag] as string;
  // The thing the command made, when it printed an id (`site create` → siteId), else the one it was given.
  const made = Object.entries(printed).find(
    ([k, v]) => k.endsWith('Id') && !/user/i.test(k) && typeof v === 'string',
  );
  const first = ID_FLAGS.find((f) => given[f] !== undefined);
  const target = made ? `${made[0]} ${made[1]}` : first ? `${first} ${given[first]}` : 'instance';
  const site = given.site !== undefined ? await findSite(deps.pool, given.site) : null;
  const account = given.account !== undefined && Uuid.safeParse(given.account).success ? given.account : null;
  await recordAudit(deps.pool, {
    actor: 'cli',
    action: `${cmd.group}.${cmd.name}`,
    target,
    accountId: site?.account_id ?? account ?? (made?.[0] === 'accountId' ? String(made[1]) : null),
    siteId: site?.id ?? (made?.[0] === 'siteId' ? String(made[1]) : null),
    detail: given,
  });
}
