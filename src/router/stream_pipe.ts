// Passing a worker's answer through to the client as it arrives. When the worker's connection breaks before its answer
// is complete (a worker killed mid-stream), an SSE answer gets a closing error event and [DONE] — the client learns
// why instead of seeing a cut connection [choice: SGLang's router drops the connection] — and any other answer is cut.
// A client that goes away cancels the worker's answer.
import type http from 'node:http';
import { encodeSseEvent, SSE_DONE } from '../protocol/index.js';
import { endToEndHeaders, type ForwardResponse } from './http_forward.js';

/** How a piped answer ended. */
export interface PipeEnd {
  /** The worker's answer arrived whole. */
  readonly complete: boolean;
  /** The client left before the end. */
  readonly clientGone: boolean;
}

/** Options of {@link pipeAnswer}. */
export interface PipeOptions {
  /** Applied to each SSE event (text up to and including its blank line) when given. */
  readonly rewrite?: (event: string) => string;
  /** The error event's fields when the worker breaks mid-answer: `{"error":{type, code, message}}`. */
  readonly breakError: () => { type: string; code: string; message: string };
}

/**
 * Writes `r`'s status, headers and body to `res` as they arrive.
 * @returns once the answer ended one way or the other (never rejects)
 */
export function pipeAnswer(r: ForwardResponse, res: http.ServerResponse, opts: PipeOptions): Promise<PipeEnd> {
  return new Promise((resolve) => {
    const h = endToEndHeaders(r.headers);
    const sse = String(r.headers['content-type'] ?? '').startsWith('text/event-stream');
    if (opts.rewrite) delete h['content-length'];
    res.writeHead(r.status, h);
    let pending = '';
    let tail = '';
    let ended = false;
    const write = (c: Buffer): void => {
      if (!opts.rewrite) {
        res.write(c);
        tail = (tail + c.toString('latin1')).slice(-2);
        return;
      }
      pending += c.toString('utf8');
      let i: number;
      while ((i = pending.indexOf('\n\n')) >= 0) {
        res.write(opts.rewrite(pending.slice(0, i + 2)));
        pending = pending.slice(i + 2);
        tail = '\n\n';
      }
    };
    const finish = (complete: boolean, clientGone: boolean): void => {
      if (ended) return;
      ended = true;
      if (complete) {
        res.end(pending);
      } else if (!clientGone && sse && !res.destroyed) {
        // close any half-written event, then say what happened
        const sep = pending !== '' || (tail !== '' && tail !== '\n\n') ? '\n\n' : '';
        res.end(`${sep}${encodeSseEvent({ error: opts.breakError() })}${SSE_DONE}`);
      } else {
        res.destroy();
      }
      resolve({ complete, clientGone });
    };
    r.body.on('data', write);
    r.body.on('end', () => finish(r.body.complete, false));
    r.body.on('error', () => finish(false, false));
    r.body.on('close', () => { if (!r.body.complete) finish(false, false); });
    res.on('close', () => {
      if (!res.writableFinished && !ended) {
        r.body.destroy();
        finish(false, true);
      }
    });
  });
}
