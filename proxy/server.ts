/**
 * The standalone proxy: the handler on its own HTTP server, with WebSocket upgrades and a
 * graceful stop (stop accepting, let tracker calls finish, then close what is still open,
 * WebSockets included).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { createCapigramProxy, type CapigramProxy, type CapigramProxyOptions } from './handler.js';

export interface RunningProxy {
  /** `http://host:port` the proxy listens on. */
  url: string;
  server: Server;
  handler: CapigramProxy;
  /** Stops accepting, waits for tracker calls (at most `drainMs`), then closes connections. */
  stop(options?: { drainMs?: number }): Promise<void>;
}

export async function startProxyServer(
  options: CapigramProxyOptions,
  listen: { host: string; port: number },
): Promise<RunningProxy> {
  const handler = createCapigramProxy(options);
  const server = createServer(handler);
  // Upgraded sockets leave the HTTP server's books: track them so a stop can close them.
  const upgraded = new Set<Duplex>();
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    upgraded.add(socket);
    socket.once('close', () => upgraded.delete(socket));
    handler.upgrade(req, socket, head);
  });
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    if (!socket.writable) socket.destroy();
    else if (error.code === 'HPE_HEADER_OVERFLOW')
      socket.end('HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\n\r\n');
    else socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  let stopping: Promise<void> | undefined;
  return {
    url: `http://${host}:${address.port}`,
    server,
    handler,
    stop(stopOptions = {}) {
      stopping ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        await handler.close(stopOptions);
        server.closeAllConnections();
        for (const socket of upgraded) socket.destroy();
        await closed;
      })();
      return stopping;
    },
  };
}
