// Server-Sent Events as SGLang's HTTP server writes them and its clients read them: one `data: <json>\n\n`
// event per update, terminated by `data: [DONE]\n\n`. Owns the wire format only; knows nothing of requests.
//
// Wire format (python/sglang/srt/entrypoints/http_server.py, serving_chat.py, serving_completions.py):
//   data: {"text": "...", "meta_info": {...}}\n\n      one JSON object per event, compact JSON
//   data: {"error":{"message":"..."}}\n\n               /generate: an error inside a stream (then [DONE])
//   data: {"error": {"object": "error", ...}}\n\n       OpenAI routes: the same, written by Python's json.dumps
//   data: [DONE]\n\n                                     end of stream
// Readers (python/sglang/bench_serving.py) split the body on '\n', skip empty lines, strip a leading
// "data: " (or "data:"), ignore "[DONE]" and JSON-parse the rest.
import { pyJsonDumps } from '../common/index.js';

/** The payload of the end-of-stream sentinel event. */
export const SSE_DONE_PAYLOAD = '[DONE]';

/** The complete end-of-stream event: `data: [DONE]\n\n`. */
export const SSE_DONE = `data: ${SSE_DONE_PAYLOAD}\n\n`;

/**
 * Content-Type of an SSE response body: Starlette's StreamingResponse(media_type="text/event-stream") adds the
 * charset, as it does for every `text/*` media type.
 */
export const SSE_CONTENT_TYPE = 'text/event-stream; charset=utf-8';

/**
 * Encodes one SSE `data:` event.
 * @param payload an object (serialized with JSON.stringify, compact, as orjson / pydantic do) or a raw string
 *   (written as is; it must not contain a newline)
 * @returns `data: <payload>\n\n`
 * @throws TypeError if the object is not JSON-serializable (a BigInt, a cycle)
 */
export function encodeSseEvent(payload: unknown): string {
  const text = typeof payload === 'string' ? payload : JSON.stringify(payload);
  return `data: ${text}\n\n`;
}

/**
 * Encodes the in-stream error event SGLang sends before `[DONE]` when a streamed request fails.
 * @param message human-readable error text
 * @param extra more fields of the error object (`type`, `code`, `param`, ...), merged after `message`
 * @returns `data: {"error":{"message":...}}\n\n`
 */
export function encodeSseError(message: string, extra: Record<string, unknown> = {}): string {
  return encodeSseEvent({ error: { message, ...extra } });
}

/**
 * Encodes the in-stream error event of SGLang's OpenAI routes (serving_base.py `create_streaming_error_response`):
 * `{"error": ErrorResponse}` written by Python's `json.dumps` (", " and ": " separators, non-ASCII as `\uXXXX`).
 * @param message human-readable error text
 * @param type ErrorResponse.type
 * @param code ErrorResponse.code (the HTTP status the error stands for)
 * @returns `data: {"error": {"object": "error", "message": ..., "type": ..., "param": null, "code": ...}}\n\n`
 */
export function encodeOpenAISseError(message: string, type = 'BadRequestError', code = 400): string {
  return encodeSseEvent(pyJsonDumps({ error: { object: 'error', message, type, param: null, code } }));
}

/** One parsed line of an SSE body: a data payload, the [DONE] sentinel, or something else to skip. */
export type SseLine =
  | { kind: 'data'; data: string }
  | { kind: 'done' }
  | { kind: 'skip' };

/**
 * Classifies one line of an SSE body (without its trailing newline), the way SGLang's bench client does:
 * empty lines and comment lines (`:...`) are skipped, `event:`/`id:`/`retry:` fields are skipped, a leading
 * `data: ` or `data:` is removed, and the payload `[DONE]` is the end sentinel. A line with no `data:` prefix
 * is taken as a whole payload (non-streamed bodies are one JSON line).
 * @param line one line; a trailing '\r' is removed
 */
export function parseSseLine(line: string): SseLine {
  let s = line.endsWith('\r') ? line.slice(0, -1) : line;
  if (s.trim() === '') return { kind: 'skip' };
  if (s.startsWith(':')) return { kind: 'skip' };
  if (s.startsWith('data:')) {
    s = s.slice(s.startsWith('data: ') ? 6 : 5);
  } else if (/^(event|id|retry):/.test(s)) {
    return { kind: 'skip' };
  }
  if (s.trim() === SSE_DONE_PAYLOAD) return { kind: 'done' };
  return { kind: 'data', data: s };
}

/**
 * Splits a byte or text stream into lines as chunks arrive (UTF-8 decoded across chunk boundaries).
 * `push` returns the complete lines in the chunk, `end` the unterminated rest. Used by clients that timestamp
 * each line when it is read (bench-serving's TTFT / ITL).
 */
export class SseLineSplitter {
  private readonly decoder = new TextDecoder('utf-8');
  private pending = '';

  /**
   * @param chunk the next piece of the body
   * @returns every line completed by this chunk, without '\n' (possibly none)
   */
  push(chunk: Uint8Array | string): string[] {
    this.pending += typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true });
    const parts = this.pending.split('\n');
    this.pending = parts.pop() ?? '';
    return parts;
  }

  /** @returns the text after the last '\n' (an unterminated final line), or [] if none */
  end(): string[] {
    this.pending += this.decoder.decode();
    const rest = this.pending;
    this.pending = '';
    return rest === '' ? [] : [rest];
  }
}

/**
 * Reads an SSE body and yields each event's data payload (already stripped of `data: `), stopping at
 * `[DONE]` (which is not yielded). Multi-line `data:` events are not joined: SGLang never sends them.
 * @param body the response body (e.g. `Response.body` or a node `IncomingMessage`)
 */
export async function* iterateSseData(body: AsyncIterable<Uint8Array | string>): AsyncGenerator<string> {
  const splitter = new SseLineSplitter();
  for await (const chunk of body) {
    for (const line of splitter.push(chunk)) {
      const parsed = parseSseLine(line);
      if (parsed.kind === 'done') return;
      if (parsed.kind === 'data') yield parsed.data;
    }
  }
  for (const line of splitter.end()) {
    const parsed = parseSseLine(line);
    if (parsed.kind === 'done') return;
    if (parsed.kind === 'data') yield parsed.data;
  }
}
