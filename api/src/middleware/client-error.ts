import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import { AppError, errorBody, type ErrorCode } from '#shared/errors/index.js';
import type { Logger } from '#shared/log.js';

/** Node's parser error codes that have a more precise status than 400. */
const BY_PARSER_CODE: Record<string, { code: ErrorCode; message: string }> = {
  HPE_HEADER_OVERFLOW: { code: 'headers_too_large', message: 'Request line and headers exceed the 16 KB limit' },
  ERR_HTTP_REQUEST_TIMEOUT: { code: 'request_timeout', message: 'The request (headers and body) did not arrive in time' },
};

/**
 * Requests Node's HTTP parser rejects never reach Koa (an oversized URL or
 * header block, a bad header byte, broken framing, headers too slow). Node's
 * own answer is a bare status line; this one is the house JSON error, so every
 * 4xx a client can get has the same shape. The connection is closed after it:
 * the parser state is unknown.
 */
export function answerClientError(log: Logger) {
  return function onClientError(err: NodeJS.ErrnoException, socket: Socket): void {
    // A response already on its way (its headers sent) cannot be followed by another status line.
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const known = err.code ? BY_PARSER_CODE[err.code] : undefined;
    const appError = new AppError(known?.code ?? 'bad_request', known?.message ?? 'Malformed HTTP request');
    const requestId = randomUUID();
    log.info({ request_id: requestId, code: err.code, status: appError.status }, 'malformed request refused');
    const body = JSON.stringify(errorBody(appError, requestId));
    socket.end(
      `HTTP/1.1 ${appError.status} ${statusText(appError.status)}\r\n` +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${requestId}\r\n` +
        'X-Content-Type-Options: nosniff\r\n' +
        'Connection: close\r\n\r\n' +
        body,
    );
  };
}

function statusText(status: number): string {
  return { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' }[status] ?? 'Bad Request';
}
