/**
 * State and province names as Meta documents `st`: the two-letter ANSI code, lowercase, for the
 * United States (Canada's provinces likewise); elsewhere the name lowercase without spaces or
 * punctuation. Meta's parameter builder cuts every state to two letters, which turns `Bavaria`
 * into `ba`; the documentation does not, and is followed here.
 */
const US_STATES: Readonly<Record<string, string>> = {
  alabama: 'al',
  alaska: 'ak',
  arizona: 'az',
  arkansas: 'ar',
  california: 'ca',
  colorado: 'co',
  connecticut: 'ct',
  delaware: 'de',
  districtofcolumbia: 'dc',
  florida: 'fl',
  georgia: 'ga',
  hawaii: 'hi',
  idaho: 'id',
  illinois: 'il',
  indiana: 'in',
  iowa: 'ia',
  kansas: 'ks',
  kentucky: 'ky',
  louisiana: 'la',
  maine: 'me',
  maryland: 'md',
  massachusetts: 'ma',
  michigan: 'mi',
  minnesota: 'mn',
  mississippi: 'ms',
  missouri: 'mo',
  montana: 'mt',
  nebraska: 'ne',
  nevada: 'nv',
  newhampshire: 'nh',
  newjersey: 'nj',
  newmexico: 'nm',
  newyork: 'ny',
  northcarolina: 'nc',
  northdakota: 'nd',
  ohio: 'oh',
  oklahoma: 'ok',
  oregon: 'or',
  pennsylvania: 'pa',
  rhodeisland: 'ri',
  southcarolina: 'sc',
  southdakota: 'sd',
  tennessee: 'tn',
  texas: 'tx',
  utah: 'ut',
  vermont: 'vt',
  virginia: 'va',
  washington: 'wa',
  westvirginia: 'wv',
  wisconsin: 'wi',
  wyoming: 'wy',
  puertorico: 'pr',
};

const CA_PROVINCES: Readonly<Record<string, string>> = {
  alberta: 'ab',
  britishcolumbia: 'bc',
  manitoba: 'mb',
  newbrunswick: 'nb',
  newfoundlandandlabrador: 'nl',
  northwestterritories: 'nt',
  novascotia: 'ns',
  nunavut: 'nu',
  ontario: 'on',
  princeedwardisland: 'pe',
  quebec: 'qc',
  saskatchewan: 'sk',
  yukon: 'yt',
};

const CODES: ReadonlySet<string> = new Set([...Object.values(US_STATES), ...Object.values(CA_PROVINCES)]);

/** `country` (alpha-2, any case) decides whether a two-letter value is a US/CA code; unknown: both are tried. */
export function normalizeState(raw: string | null | undefined, country?: string | null): string | undefined {
  const compact = raw
    ?.trim()
    .toLowerCase()
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '');
  if (!compact) return undefined;
  const key = compact.replace(/[^\p{L}\p{N}]/gu, '');
  if (key === '') return undefined;
  const c = country?.trim().toLowerCase();
  const table = c === 'us' ? US_STATES : c === 'ca' ? CA_PROVINCES : { ...US_STATES, ...CA_PROVINCES };
  const mapped = table[key];
  if (mapped !== undefined) return mapped;
  if ((c === 'us' || c === 'ca' || c === undefined || c === '') && key.length === 2 && CODES.has(key))
    return key;
  // Outside the US and Canada: the name as written (accents kept), lowercase, no spaces or punctuation.
  const name = raw!
    .trim()
    .toLowerCase()
    .normalize('NFC')
    .replace(/[^\p{L}\p{M}\p{N}]/gu, '');
  return name === '' ? undefined : name;
}
