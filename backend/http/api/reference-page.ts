/**
 * The business API's reference as one self-contained HTML page, rendered on the server from the
 * OpenAPI document: no script, no stylesheet or font from elsewhere (it must work offline and
 * behind a strict Content-Security-Policy).
 */
type Json = Record<string, unknown>;

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

function esc(v: unknown): string {
  return String(v ?? '').replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

/**
 * The documents' descriptions are written in the Markdown subset OpenAPI allows (CommonMark): this
 * page renders the part they use, inline code spans and paragraphs, and escapes everything else.
 */
export function prose(v: unknown): string {
  return String(v ?? '')
    .split(/\n{2,}/)
    .map((para) => esc(para).replace(/`([^`]+)`/g, '<code>$1</code>'))
    .join('</p><p>');
}

function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function refName(ref: string): string {
  return ref.split('/').pop() ?? ref;
}

/** A short, linked type expression: `string`, `Pii | null`, `array of Channel`, `"a" | "b"`. */
function typeOf(s: unknown): string {
  if (!isObj(s)) return 'any';
  if (typeof s.$ref === 'string')
    return `<a href="#schema-${esc(refName(s.$ref))}">${esc(refName(s.$ref))}</a>`;
  const union = (s.anyOf ?? s.oneOf) as unknown[] | undefined;
  if (Array.isArray(union)) return union.map(typeOf).join(' | ');
  if (Array.isArray(s.enum)) return s.enum.map((e) => `<code>${esc(JSON.stringify(e))}</code>`).join(' | ');
  const types = Array.isArray(s.type) ? (s.type as string[]) : typeof s.type === 'string' ? [s.type] : [];
  return (
    types
      .map((t) => {
        if (t === 'array') return `array of ${typeOf(s.items)}`;
        if (t === 'string' && typeof s.format === 'string') return `string (${esc(s.format)})`;
        return esc(t);
      })
      .join(' | ') || 'object'
  );
}

function constraints(s: Json): string {
  const out: string[] = [];
  for (const [k, label] of [
    ['minLength', 'min length'],
    ['maxLength', 'max length'],
    ['minimum', 'min'],
    ['maximum', 'max'],
    ['exclusiveMinimum', '&gt;'],
  ] as const) {
    if (s[k] !== undefined) out.push(`${label} ${esc(s[k])}`);
  }
  if (s.pattern !== undefined) out.push(`pattern <code>${esc(s.pattern)}</code>`);
  return out.join(', ');
}

function propertiesTable(schema: Json): string {
  const props = isObj(schema.properties) ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  const rows = Object.entries(props).map(([name, p]) => {
    const ps = isObj(p) ? p : {};
    const notes = [ps.description ? prose(ps.description) : '', constraints(ps)].filter(Boolean).join('; ');
    return `<tr><td><code>${esc(name)}</code></td><td>${typeOf(ps)}</td><td>${required.has(name) ? 'yes' : ''}</td><td>${notes}</td></tr>`;
  });
  if (rows.length === 0) return `<p>${typeOf(schema)}</p>`;
  return `<table><thead><tr><th>field</th><th>type</th><th>required</th><th>notes</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function schemaBlock(s: unknown): string {
  if (!isObj(s)) return '';
  return typeof s.$ref === 'string' ? `<p>${typeOf(s)}</p>` : propertiesTable(s);
}

/** A media type's named examples: each its summary and the body, pretty-printed. */
function examplesBlock(examples: unknown): string {
  if (!isObj(examples)) return '';
  return Object.entries(examples)
    .filter(([, e]) => isObj(e) && 'value' in e)
    .map(([name, e]) => {
      const ex = e as Json;
      const title = typeof ex.summary === 'string' ? prose(ex.summary) : `<code>${esc(name)}</code>`;
      return `<p>Example: ${title}</p><pre><code>${esc(JSON.stringify(ex.value, null, 2))}</code></pre>`;
    })
    .join('');
}

function operation(path: string, method: string, op: Json): string {
  const id = `op-${esc(op.operationId ?? `${method}-${path}`)}`;
  const params = Array.isArray(op.parameters) ? (op.parameters as Json[]) : [];
  const paramRows = params.map((p) => {
    const schema = isObj(p.schema) ? p.schema : {};
    const description = p.description ?? schema.description;
    // constraints() is HTML already: only the description is prose to render.
    const notes = [typeof description === 'string' ? prose(description) : '', constraints(schema)]
      .filter(Boolean)
      .join('; ');
    return `<tr><td><code>${esc(p.name)}</code></td><td>${esc(p.in)}</td><td>${typeOf(schema)}</td><td>${p.required ? 'yes' : ''}</td><td>${notes}</td></tr>`;
  });
  const body =
    isObj(op.requestBody) && isObj(op.requestBody.content)
      ? op.requestBody.content['application/json']
      : undefined;
  const responses = isObj(op.responses) ? op.responses : {};
  const responseRows = Object.entries(responses).map(([status, r]) => {
    const resp = isObj(r) ? r : {};
    const content = isObj(resp.content) ? resp.content : {};
    const [mediaType, media] = Object.entries(content)[0] ?? [];
    const schema = isObj(media) ? media.schema : undefined;
    return `<tr><td>${esc(status)}</td><td>${prose(resp.description)}</td><td>${mediaType ? `${esc(mediaType)}: ${typeOf(schema)}` : ''}</td></tr>`;
  });
  return `<section id="${id}">
<h2><span class="m">${esc(method.toUpperCase())}</span> <code>${esc(path)}</code></h2>
<p><strong>${prose(op.summary)}</strong></p>
${op.description ? `<p>${prose(op.description)}</p>` : ''}
${paramRows.length ? `<h3>Parameters</h3><table><thead><tr><th>name</th><th>in</th><th>type</th><th>required</th><th>notes</th></tr></thead><tbody>${paramRows.join('')}</tbody></table>` : ''}
${isObj(body) ? `<h3>Request body (application/json)</h3>${schemaBlock(body.schema)}${examplesBlock(body.examples)}` : ''}
<h3>Responses</h3><table><thead><tr><th>status</th><th>meaning</th><th>body</th></tr></thead><tbody>${responseRows.join('')}</tbody></table>
</section>`;
}

export function renderReference(doc: Json): string {
  const info = isObj(doc.info) ? doc.info : {};
  const servers = Array.isArray(doc.servers) ? (doc.servers as Json[]) : [];
  const paths = isObj(doc.paths) ? doc.paths : {};
  const ops: string[] = [];
  const toc: string[] = [];
  for (const [path, item] of Object.entries(paths)) {
    if (!isObj(item)) continue;
    for (const method of METHODS) {
      const op = item[method];
      if (!isObj(op)) continue;
      ops.push(operation(path, method, op));
      toc.push(
        `<li><a href="#op-${esc(op.operationId ?? `${method}-${path}`)}">${esc(method.toUpperCase())} ${esc(path)}</a></li>`,
      );
    }
  }
  const schemas = isObj(doc.components) && isObj(doc.components.schemas) ? doc.components.schemas : {};
  const schemaSections = Object.entries(schemas).map(
    ([name, s]) =>
      `<section id="schema-${esc(name)}"><h3>${esc(name)}</h3>${isObj(s) && s.description ? `<p>${prose(s.description)}</p>` : ''}${isObj(s) ? propertiesTable(s) : ''}</section>`,
  );
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(info.title)} reference</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;max-width:70rem;margin:2rem auto;padding:0 1rem;color:#1b1f24}
code{font:13px ui-monospace,monospace;background:#f2f4f7;padding:0 .25em;border-radius:3px}
pre{background:#f2f4f7;padding:.5em .75em;border-radius:3px;overflow-x:auto}pre code{padding:0}
table{border-collapse:collapse;width:100%;margin:.5rem 0 1rem}th,td{border:1px solid #d5dae1;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}section{border-top:1px solid #d5dae1;margin-top:1.5rem}.m{background:#1f6feb;color:#fff;border-radius:4px;padding:0 .4em;font-size:.8em}
</style></head><body>
<h1>${esc(info.title)} <small>v${esc(info.version)}</small></h1>
<p>${prose(info.description)}</p>
<p>Base URL: ${servers.map((s) => `<code>${esc(s.url)}</code>`).join(', ')} · machine-readable: <a href="openapi.json">openapi.json</a> (OpenAPI ${esc(doc.openapi)})</p>
<h2>Endpoints</h2><ul>${toc.join('')}</ul>
${ops.join('\n')}
<section><h2>Schemas</h2>${schemaSections.join('\n')}</section>
</body></html>`;
}
