import net from 'node:net';

/**
 * A repointable database address: a TCP forwarder on loopback, what a managed database's DNS name
 * or pg_auto_failover's address is to its clients. `repoint` sends new connections elsewhere;
 * connections already open stay with the server they were opened to, and end when it ends them.
 */
export interface Forwarder {
  port: number;
  /** Where new connections go from now on. */
  repoint(targetPort: number): void;
  /** Connections currently open through it. */
  open(): number;
  close(): Promise<void>;
}

export async function startForwarder(targetPort: number): Promise<Forwarder> {
  let target = targetPort;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target, '127.0.0.1');
    sockets.add(client);
    sockets.add(upstream);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    client.pipe(upstream);
    upstream.pipe(client);
    // Either side ending or failing ends the other, as a reset would.
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const addr = server.address();
  return {
    port: typeof addr === 'object' && addr ? addr.port : 0,
    repoint: (port) => void (target = port),
    open: () => sockets.size / 2,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((ok) => server.close(() => ok()));
    },
  };
}
