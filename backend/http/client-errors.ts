import { Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ServerType } from '@hono/node-server';
import { ApiError } from '../errors.js';
import { problemBody } from './errors.js';

/**
 * Requests Node's HTTP parser refuses before the app sees them (headers over Node's 16 KB limit,
 * a malformed request line or header) are answered as problem+json like every other error,
 * instead of Node's bare `400`/`431` status line. The connection is closed after: the parser
 * cannot tell where the next request would start.
 */
export function answerUnparseableRequests(server: ServerType): void {
  // An HTTP/2 server has no HTTP/1.1 parser to refuse anything.
  if (!(server instanceof Server)) return;
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // Nothing to answer on a socket that is gone, or on a client that went quiet (Node's request
    // timeout): close it as Node would.
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      socket.end('HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n');
      return;
    }
    const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
    const apiError = tooLarge
      ? new ApiError('HEADERS_TOO_LARGE', 'The request headers exceed 16 KB')
      : new ApiError('VALIDATION_FAILED', 'The request is not valid HTTP/1.1');
    const body = JSON.stringify(problemBody(apiError));
    socket.end(
      `HTTP/1.1 ${apiError.status} ${tooLarge ? 'Request Header Fields Too Large' : 'Bad Request'}\r\n` +
        `Content-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}
