// setWebhook's refusals, as Telegram words them (Client::do_set_webhook, WebhookActor::start_up):
// one rule for the demo's sandbox and the tests' fake.
import { describe, expect, it } from 'vitest';
import { secretTokenRefusal, webhookUrlRefusal } from '../../backend/sandbox/telegram-webhook-rules.js';

const HTTPS = 'Bad Request: bad webhook: An HTTPS URL must be provided for webhook';
const PORT = 'Bad Request: bad webhook: Webhook can be set up only on ports 80, 88, 443 or 8443';

describe('webhookUrlRefusal', () => {
  it.each([
    ['https://track.example.com/backend/telegram/x', null],
    ['https://track.example.com:8443/h', null],
    ['https://track.example.com:88/h', null],
    ['https://track.example.com:80/h', null],
    ['https://track.example.com:8080/h', PORT],
    ['http://track.example.com/h', HTTPS],
    ['ftp://track.example.com/h', 'Bad Request: invalid webhook URL specified'],
    ['track.example.com/h', null],
    ['track.example.com:8080/h', PORT],
    ['not a url', 'Bad Request: invalid webhook URL specified'],
    ['http://127.0.0.1:4000/backend/telegram/x', null],
    ['http://localhost:9/h', null],
    ['http://[::1]:5000/h', null],
  ])('%s', (url, expected) => {
    expect(webhookUrlRefusal(url)).toBe(expected);
  });
});

describe('secretTokenRefusal', () => {
  it.each([
    [undefined, null],
    ['', null],
    ['abc_DEF-123', null],
    ['a'.repeat(256), null],
    ['a'.repeat(257), 'Bad Request: secret token is too long'],
    ['a+b', 'Bad Request: secret token contains unallowed characters'],
    ['a b', 'Bad Request: secret token contains unallowed characters'],
    ['секрет', 'Bad Request: secret token contains unallowed characters'],
  ])('%s', (secret, expected) => {
    expect(secretTokenRefusal(secret)).toBe(expected);
  });
});
