// The grammar queue (SGLang GrammarManager.get_ready_grammar_requests in scheduler.py): constrained requests wait
// here while their grammar compiles, then join the waiting queue; a grammar that fails to compile, times out or
// whose matcher breaks later finishes its request with SGLang's error.
import type { ReqTokenOutput } from './io.js';
import type { Scheduler } from './scheduler.js';

/**
 * Moves requests whose grammar compiled from the grammar queue to the waiting queue (SGLang
 * GrammarManager.get_ready_grammar_requests); those whose grammar is invalid or timed out finish with an abort,
 * status 400, SGLang's messages ("Failed to compile {kind} grammar: {reason}", "Grammar preprocessing timed out").
 * @param outputs receives the failed requests' final outputs
 */
export function pollGrammarQueue(s: Scheduler, outputs: ReqTokenOutput[]): void {
  const g = s.grammar!;
  const now = performance.now();
  for (const req of [...s.grammarQueue]) {
    const phase = g.phase(req.rid);
    let fail: string | null = null;
    if (phase === 'ready') {
      s.grammarQueue.splice(s.grammarQueue.indexOf(req), 1);
      s.waiting.push(req);
      continue;
    }
    if (phase === 'failed' || phase === null) fail = `Failed to compile ${req.grammar!.kind} grammar: ${g.error(req.rid)?.message ?? 'unknown error'}`;
    else if (now - req.grammarQueuedAtMs > s.grammarTimeoutMs) fail = `Grammar preprocessing timed out: grammar_key=('${req.grammar!.kind}', ...)`;
    if (fail === null) continue;
    s.grammarQueue.splice(s.grammarQueue.indexOf(req), 1);
    s.live.delete(req.rid);
    g.close(req.rid);
    req.finishReason = { type: 'abort', message: fail, statusCode: 400, errType: 'BadRequestError' };
    outputs.push(req.takeOutput());
  }
}

/**
 * Running or waiting constrained requests whose matcher failed (worker crash, rejected token) finish with an abort
 * (500). The chunk in progress is left to finish first.
 * @param outputs receives their final outputs
 */
export function failBrokenGrammars(s: Scheduler, outputs: ReqTokenOutput[]): void {
  for (const req of [...s.running, ...s.waiting]) {
    if (!req.grammar || req === s.chunkedReq) continue;
    const err = s.grammar!.error(req.rid);
    if (!err) continue;
    s.finishReq(req.rid, { type: 'abort', message: `The grammar backend failed for this request: ${err.message}`, statusCode: 500 });
    const out = s.pendingOutputs.pop();
    if (out) outputs.push(out);
  }
}
