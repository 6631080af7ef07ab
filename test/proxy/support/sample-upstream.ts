import { createHash } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { gzipSync } from 'node:zlib';

export interface UpstreamRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export const HOME_HTML =
  '<!doctype html><html><head><title>Sample shop</title></head><body><h1>Welcome</h1><a id="join" href="/capigram/invite">Join our channel</a></body></html>';
export const GZIP_TEXT = 'compressible '.repeat(500);
export const GZIPPED = gzipSync(Buffer.from(GZIP_TEXT));

/**
 * The site owner's origin: a real node:http server with a few pages that exercise what a proxy
 * must leave alone (cookies, redirects, bodies, streaming, compression, WebSockets).
 */
export interface SampleUpstream {
  url: string;
  port: number;
  requests: UpstreamRequest[];
  server: Server;
  /** Lets a held `/stream` response finish. */
  releaseStream(): void;
  close(): Promise<void>;
}

export async function startSampleUpstream(): Promise<SampleUpstream> {
  const requests: UpstreamRequest[] = [];
  let release: (() => void) | undefined;
  const sockets = new Set<Duplex>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const url = req.url ?? '/';
      requests.push({ method: req.method ?? 'GET', url, headers: req.headers, body });
      const path = url.split('?')[0];
      switch (path) {
        case '/':
        case '/landing':
        case '/page':
          res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
          res.end(HOME_HTML);
          return;
        case '/with-cookies':
          res.setHeader('set-cookie', ['shop_session=s3cr3t; Path=/; HttpOnly', 'cart=2; Path=/']);
          res.writeHead(200, { 'content-type': 'text/html' });
          res.end('<p>cookies</p>');
          return;
        case '/redirect':
          res.writeHead(302, { location: '/landing', 'content-type': 'text/html' });
          res.end();
          return;
        case '/app.js':
          res.writeHead(200, { 'content-type': 'text/javascript' });
          res.end('console.log("app")');
          return;
        case '/api/data':
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end('{"ok":true}');
          return;
        case '/echo':
          res.writeHead(201, {
            'content-type': req.headers['content-type'] ?? 'application/octet-stream',
            'x-echo-method': req.method ?? '',
            'x-echo-length': String(body.length),
            'x-echo-sha256': createHash('sha256').update(body).digest('hex'),
          });
          res.end(body);
          return;
        case '/headers':
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify(req.headers));
          return;
        case '/gzip':
          res.writeHead(200, {
            'content-type': 'text/plain',
            'content-encoding': 'gzip',
            'content-length': GZIPPED.length,
          });
          res.end(GZIPPED);
          return;
        case '/stream':
          res.writeHead(200, { 'content-type': 'text/html' });
          res.write('<p>first</p>');
          release = () => res.end('<p>last</p>');
          return;
        case '/drops-mid-body':
          // Promises more than it sends, then its connection dies (a crashed upstream).
          res.writeHead(200, { 'content-type': 'text/html', 'content-length': '1000' });
          res.write('<p>partial');
          setTimeout(() => res.socket?.destroy(), 50);
          return;
        default:
          res.writeHead(404, { 'content-type': 'text/html' });
          res.end('<p>no such page</p>');
      }
    });
  });
  // A WebSocket endpoint: a real handshake, then the raw bytes are echoed back.
  server.on('upgrade', (req, socket) => {
    requests.push({ method: 'UPGRADE', url: req.url ?? '/', headers: req.headers, body: Buffer.alloc(0) });
    const key = String(req.headers['sec-websocket-key']);
    const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
    );
    sockets.add(socket);
    socket.on('data', (data: Buffer) => socket.write(data));
    socket.on('end', () => socket.end());
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    server,
    releaseStream: () => release?.(),
    async close() {
      server.closeAllConnections();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
