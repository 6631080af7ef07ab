import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * AES-256-GCM for secrets at rest (bot tokens, platform access tokens).
 * Format: `v1.<iv>.<tag>.<ciphertext>`, each part base64url. The version prefix lets the key or
 * algorithm change later without guessing what an old row holds.
 */
export interface SecretBox {
  seal(plain: string): string;
  open(sealed: string): string;
}

export function parseSecretKey(text: string): Buffer {
  const key = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64url');
  if (key.length !== 32) throw new Error('SECRET_KEY must be 32 bytes');
  return key;
}

export function createSecretBox(key: Buffer): SecretBox {
  return {
    seal(plain) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const ct = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return ['v1', iv, cipher.getAuthTag(), ct]
        .map((p) => (typeof p === 'string' ? p : p.toString('base64url')))
        .join('.');
    },
    open(sealed) {
      const [v, iv, tag, ct] = sealed.split('.');
      if (v !== 'v1' || !iv || !tag || ct === undefined) throw new Error('not a sealed secret');
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString(
        'utf8',
      );
    },
  };
}
