import type { Actor } from '../../domain/admin/roles.js';
import type { AppEnv } from '../env.js';

/** Hono variables of the dashboard: the app's, plus the signed-in session and its form token. */
export type DashEnv = AppEnv & {
  Variables: AppEnv['Variables'] & { formToken: string; session: string | null; actor: Actor };
};
