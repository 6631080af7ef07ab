import { createServer, connect, type Socket } from 'node:net';

/**
 * A TCP forwarder on loopback that can go silent: `cut()` stops forwarding in both directions
 * without closing anything, as a network that drops packets does (no reset, no FIN: each side's
 * writes go unanswered, and a new connection is accepted but never reaches the server); `restore()`
 * lets everything held go through, in order, as TCP's retransmissions do when the network returns.
 * A side that closed during the cut is closed on the other side only then.
 */
export interface SilentForwarder {
  port: number;
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startSilentForwarder(target: { host: string; port: number }): Promise<SilentForwarder> {
  let silent = false;
  const sockets = new Set<Socket>();
  /** Work held back while the network is silent. */
  let held: (() => void)[] = [];
  const whenHeard = (fn: () => void) => (silent ? held.push(fn) : fn());

  const join = (from: Socket, to: Socket) => {
    from.on('data', (chunk) => whenHeard(() => to.write(chunk)));
    from.on('close', () => whenHeard(() => to.destroy()));
    from.on('error', () => undefined);
  };

  const server = createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.pause();
    whenHeard(() => {
      const upstream = connect(target.port, target.host);
      sockets.add(upstream);
      upstream.on('close', () => sockets.delete(upstream));
      join(client, upstream);
      join(upstream, client);
      client.resume();
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    port,
    cut() {
      silent = true;
    },
    restore() {
      silent = false;
      const work = held;
      held = [];
      for (const fn of work) fn();
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((ok) => server.close(ok));
    },
  };
}
