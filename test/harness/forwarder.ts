import { connect, createServer, type Socket } from 'node:net';

/**
 * A database address the tests control: a TCP forwarder on loopback.
 *
 * - `repoint` is what a managed database's DNS name or pg_auto_failover's address does on a
 *   failover: new connections go elsewhere; connections already open stay with the server they
 *   were opened to, and end when it ends them.
 * - `cut` is a network that drops packets: forwarding stops in both directions without closing
 *   anything (no reset, no FIN: each side's writes go unanswered, and a new connection is accepted
 *   but never reaches the server); `restore` lets everything held go through, in order, as TCP's
 *   retransmissions do when the network returns. A side that closed during the cut is closed on
 *   the other side only then.
 */
export interface Forwarder {
  port: number;
  /** Where new connections go from now on. */
  repoint(targetPort: number): void;
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startForwarder(target: { host?: string; port: number }): Promise<Forwarder> {
  const host = target.host ?? '127.0.0.1';
  let targetPort = target.port;
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
    client.setNoDelay(true);
    client.on('close', () => sockets.delete(client));
    client.pause();
    whenHeard(() => {
      const upstream = connect(targetPort, host);
      upstream.setNoDelay(true);
      sockets.add(upstream);
      upstream.on('close', () => sockets.delete(upstream));
      join(client, upstream);
      join(upstream, client);
      client.resume();
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    repoint(port) {
      targetPort = port;
    },
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
