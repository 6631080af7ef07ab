import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/**
 * SECRET_KEY and ADMIN_TOKEN, when not given in the environment, are generated once into
 * $DATA_DIR (mode 0600) so that restarts keep decrypting the same tokens.
 */
export interface LocalSecrets {
  secretKey: string;
  adminToken: string;
  generatedAdminToken: boolean;
}

function readOrCreate(file: string, make: () => string): { value: string; created: boolean } {
  if (existsSync(file)) return { value: readFileSync(file, 'utf8').trim(), created: false };
  const value = make();
  // 'wx' fails if another process created it first; then read theirs.
  try {
    writeFileSync(file, `${value}\n`, { mode: 0o600, flag: 'wx' });
    return { value, created: true };
  } catch {
    return { value: readFileSync(file, 'utf8').trim(), created: false };
  }
}

export function loadLocalSecrets(
  dataDir: string,
  env: { SECRET_KEY?: string; ADMIN_TOKEN?: string },
): LocalSecrets {
  const dir = resolve(dataDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const secretKey =
    env.SECRET_KEY ?? readOrCreate(join(dir, 'secret-key'), () => randomBytes(32).toString('hex')).value;
  if (env.ADMIN_TOKEN) return { secretKey, adminToken: env.ADMIN_TOKEN, generatedAdminToken: false };
  const admin = readOrCreate(join(dir, 'admin-token'), () => randomBytes(24).toString('base64url'));
  return { secretKey, adminToken: admin.value, generatedAdminToken: admin.created };
}

/**
 * What the first start prints of an admin token it generated: the token, as the start promises;
 * where the output is a kept log (`ADMIN_TOKEN_OUTPUT=file`: the container image, a service
 * manager) only its file, as logs are kept, shipped and read by others. A terminal is never a log.
 */
export function adminTokenLine(
  token: string,
  dataDir: string,
  where: { output: 'token' | 'file'; terminal: boolean },
): string {
  const file = `${dataDir}/admin-token`;
  return where.terminal || where.output === 'token'
    ? `${token} (generated into ${file})`
    : `generated into ${file} (read it there)`;
}
