/**
 * Requests Node's HTTP parser refuses before Express sees them (headers over 16 KB, a method it
 * does not know, a malformed request line or header, an Expect it does not meet) get the JSON
 * error envelope too (docs/api-contract.md §5, "Every response is JSON"), not Node's bare status
 * line.
 */
import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

export function answerClientErrors(server: Server): void {
  // An Expect other than 100-continue: Node answers 417 with no body and never runs the request.
  // The same, in the envelope; the connection closes, as the body (if any) was never read.
  server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) => {
    const body = envelope('expectation_failed', 'Only "Expect: 100-continue" is supported');
    res.writeHead(417, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), connection: 'close' });
    res.end(body);
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    // A connection already answered or gone (a reset, a time-out) gets nothing more.
    if (!socket.writable || err.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    // Bytes after a complete request on the same connection (a body longer than its
    // Content-Length, a DELETE's unframed body) are refused while that request still runs: its
    // answer goes first, as HTTP/1.1 answers in order, then this refusal if the connection is
    // still open (Node closes it after that answer). Written at once, the 400 closed the
    // connection ahead of it, and a client that read "not valid" and retried made the write twice.
    // Only a request that arrived in full waits so: an error about the request in flight itself
    // (its body stalled past the request time-out, a bad chunk size) is answered now. Waiting
    // then, neither side moved: its route waits for the rest of the body, this answer for the
    // route, and the connection stayed open for ever.
    const inFlight = (socket as { _httpMessage?: ServerResponse | null })._httpMessage;
    if (inFlight && !inFlight.writableFinished && inFlight.req?.complete) {
      // 'close' comes once the answer is out, or its connection is gone.
      inFlight.once('close', () => answer(err, socket));
      return;
    }
    answer(err, socket);
  });
}

/** The API's error envelope, written here without Express (these requests never reach it). */
const envelope = (code: string, message: string) => JSON.stringify({ error: { code, message, details: {} } });

/** The refusal in the envelope, then the connection closes. */
function answer(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  // The statuses Node itself would send, each with the envelope.
  const [status, code, message] = err.code === 'HPE_HEADER_OVERFLOW'
    ? [431, 'headers_too_large', 'Request headers are larger than the server accepts (16 KB)']
    : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'request_timeout', 'The request did not arrive in full in time']
      : [400, 'bad_request', 'The request is not valid HTTP/1.1'];
  const body = envelope(code, message);
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\n`
    + `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
}
