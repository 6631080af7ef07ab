// Why a join was not credited, as the user page says it: the first fact that explains it wins.
import { describe, expect, it } from 'vitest';
import { organicReason, type OrganicFacts } from '../../backend/domain/dashboard/organic-reason.js';

const none: OrganicFacts = {
  throughOurLink: false,
  fallbackLink: false,
  visitWithoutConsent: false,
  viaJoinRequest: false,
  chatIsPublic: false,
};

describe('organic join reasons', () => {
  it.each([
    [{}, /not through a Capigram link/],
    [{ viaJoinRequest: true }, /not through a Capigram link/],
    [{ viaJoinRequest: true, chatIsPublic: true }, /public chat: Telegram does not say which link/],
    [{ throughOurLink: true }, /a Capigram link no visit had taken/],
    [{ throughOurLink: true, fallbackLink: true }, /public link handed out/],
    [{ throughOurLink: true, visitWithoutConsent: true }, /gave no consent/],
    [{ viaJoinRequest: true, chatIsPublic: true, visitWithoutConsent: true }, /gave no consent/],
  ] as const)('%j', (facts, want) => {
    expect(organicReason({ ...none, ...facts })).toMatch(want);
  });
});
