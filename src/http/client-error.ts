/**
 * Requests Node's HTTP parser refuses before Express sees them (headers over 16 KB, a method it
 * does not know, a malformed request line or header) get the JSON error envelope too
 * (docs/api-contract.md §5, "Every response is JSON"), not Node's bare status line.
 */
import { STATUS_CODES, type Server } from 'node:http';

export function answerClientErrors(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    // A connection already answered or gone (a reset, a time-out) gets nothing more.
    if (!socket.writable || err.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    // The statuses Node itself would send, each with the envelope.
    const [status, code, message] = err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'headers_too_large', 'Request headers are larger than the server accepts (16 KB)']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'request_timeout', 'The request did not arrive in full in time']
        : [400, 'bad_request', 'The request is not valid HTTP/1.1'];
    const body = JSON.stringify({ error: { code, message, details: {} } });
    socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\n`
      + `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
  });
}
