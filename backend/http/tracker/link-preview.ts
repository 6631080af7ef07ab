/**
 * Requests that look at a click link without being a click: `HEAD`, and the fetchers that build
 * link previews or review ad destinations (Telegram's own preview bot among them). They must not
 * record a visit, send a PageView or take a single-use invite link from the channel's pool: an
 * advertiser who pastes an `/r/…` link into a chat would otherwise spend a link and count a
 * visit each time a preview is drawn.
 *
 * Only dedicated fetchers are listed. In-app browsers of the same companies (Facebook's
 * `FBAN/FBAV`, Instagram, TikTok's) are people and stay clicks.
 */
const PREVIEW_FETCHERS = new RegExp(
  [
    'facebookexternalhit',
    'Facebot',
    'meta-externalagent',
    'TelegramBot',
    'Twitterbot',
    'Slackbot',
    'Slack-ImgProxy',
    'LinkedInBot',
    'Discordbot',
    'WhatsApp/',
    'SkypeUriPreview',
    'redditbot',
    'Pinterestbot',
    'Snap URL Preview',
    'vkShare',
    'Googlebot',
    'AdsBot-Google',
    'Google-InspectionTool',
    'bingbot',
    'Applebot',
    'TikTokBot',
    'Bytespider',
  ]
    .map((name) => name.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'))
    .join('|'),
  'i',
);

/** True when the request only looks at the link: it is answered without recording anything. */
export function isLinkLookup(method: string, userAgent: string | undefined): boolean {
  return method === 'HEAD' || (userAgent !== undefined && PREVIEW_FETCHERS.test(userAgent));
}
