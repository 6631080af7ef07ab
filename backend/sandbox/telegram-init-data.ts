import { createHmac, generateKeyPairSync, sign } from 'node:crypto';

/**
 * `Telegram.WebApp.initData` as Telegram's apps hand it to a Mini App, made by the sandbox's own
 * hand (not Capigram's verifier code, so the demo checks one against the other):
 * - `signature`: Ed25519 over `<bot_id>:WebAppData\n` + every other field but `hash` as sorted
 *   `key=value` lines, base64url without padding (Bot API, Mini Apps, "Validating data for
 *   Third-Party Use"). Telegram signs with its own key; the sandbox with a key pair of its own,
 *   made at start, whose public half the demo alone gives Capigram's verifier;
 * - `hash`: hex HMAC-SHA256 of every field but `hash` (`signature` included) as sorted `key=value`
 *   lines, under HMAC-SHA256("WebAppData", bot token) ("Validating data received via the Mini App").
 */
export class SandboxInitDataSigner {
  private readonly keys = generateKeyPairSync('ed25519');

  /** The public key as Telegram publishes its own: the raw 32 bytes in hex. */
  get publicKeyHex(): string {
    // SPKI DER of an Ed25519 key is a 12-byte header and the 32 raw bytes (RFC 8410).
    return this.keys.publicKey.export({ format: 'der', type: 'spki' }).subarray(12).toString('hex');
  }

  sign(fields: Record<string, string>, bot: { id: number; token: string }): string {
    const lines = (skip: string[]) =>
      Object.keys(fields)
        .filter((k) => !skip.includes(k))
        .sort()
        .map((k) => `${k}=${fields[k]}`);
    const signature = sign(
      null,
      Buffer.from([`${bot.id}:WebAppData`, ...lines(['hash', 'signature'])].join('\n')),
      this.keys.privateKey,
    ).toString('base64url');
    const signed = { ...fields, signature };
    const checkString = Object.keys(signed)
      .sort()
      .map((k) => `${k}=${signed[k as keyof typeof signed]}`)
      .join('\n');
    const secret = createHmac('sha256', 'WebAppData').update(bot.token).digest();
    const hash = createHmac('sha256', secret).update(checkString).digest('hex');
    return new URLSearchParams({ ...signed, hash }).toString();
  }
}
