// PD mode over HTTP against scripted prefill/decode workers: bootstrap injection, the merge of the prefill side's
// logprobs (/generate, and /v1/completions with echo, streamed and not — answers recorded from real tsglang prefill,
// decode and plain servers), a decode worker dying mid-stream (SSE error event, worker unhealthy, next request 503),
// a prefill 500 retried, and a prefill that is down (502 prefill_server_error at once, without waiting for decode).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type http from 'node:http';
import { json, post, scripted, testRouter } from './scripted_worker.case.js';
import type { RunningRouter } from './router_server.js';

// `/v1/completions {"prompt":"Hello, my name is","max_tokens":4,"temperature":0,"echo":true,"logprobs":1}` answered by a
// tsglang prefill server, a decode server and a plain server (embedded default model); only the logprobs are kept.
const LP = {
  tokens: ['Hello', ',', ' my', ' name', ' is', ' אלה', '春光', '韧', ' Severe'],
  token_logprobs: [null, -17.86804962158203, -22.24886703491211, -24.1026611328125, -12.749749183654785, -1.5375205278396606, -1.9442098140716553, -1.2231481075286865, -0.6288614869117737],
  top_logprobs: [null, { ' indeterminate': -0.6431728601455688 }, { ',end': -1.0462453365325928 }, { ' Tourism': -2.3285837173461914 }, { 'ovies': -2.0236639976501465 }, { ' אלה': -1.5375205278396606 }, { '春光': -1.9442098140716553 }, { '韧': -1.2231481075286865 }, { ' Severe': -0.6288614869117737 }],
  text_offset: [-1, -1, -1, -1, -1, -1, -1, -1, -1],
};
const slice = (a: number, b: number) => ({ text_offset: LP.text_offset.slice(a, b), token_logprobs: LP.token_logprobs.slice(a, b), tokens: LP.tokens.slice(a, b), top_logprobs: LP.top_logprobs.slice(a, b) });
const choice = (text: string, logprobs: unknown, finish: string | null) => ({ index: 0, text, logprobs, finish_reason: finish, matched_stop: null });
const PREFILL_COMPLETION = { object: 'text_completion', choices: [choice('Hello, my name is אלה', slice(0, 6), 'length')] };
const DECODE_COMPLETION = { object: 'text_completion', choices: [choice('Hello, my name is אלה春光韧 Severe', slice(5, 9), 'length')] };
const sse = (events: unknown[]): string => events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('') + 'data: [DONE]\n\n';
const DECODE_STREAM = [
  { object: 'text_completion', choices: [choice('Hello, my name is אלה', slice(5, 6), null)] },
  { object: 'text_completion', choices: [choice('春光', slice(6, 7), null)] },
  { object: 'text_completion', choices: [choice('韧', slice(7, 8), null)] },
  { object: 'text_completion', choices: [choice(' Severe', slice(8, 9), 'length')] },
];

function answer(res: http.ServerResponse, body: Record<string, unknown>, whole: unknown, events: unknown[]): void {
  if (body['stream'] === true) {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
    res.end(sse(events));
  } else json(res, 200, whole);
}

test('PD: same body with bootstrap fields to both; prefill logprobs merged into /generate and echoed /v1/completions, streamed and not', async (t) => {
  const prefill = await scripted((path, body, res) => {
    if (path === '/v1/completions') return answer(res, body, PREFILL_COMPLETION, [PREFILL_COMPLETION]);
    const g = { text: '', meta_info: { input_token_logprobs: [[null, 1, null], [-0.5, 2, null]] } };
    answer(res, body, g, [g]);
  });
  const decode = await scripted((path, body, res) => {
    if (path === '/v1/completions') return answer(res, body, DECODE_COMPLETION, DECODE_STREAM);
    const g = (text: string) => ({ text, meta_info: { input_token_logprobs: [], output_token_logprobs: [[-0.1, 7, null]] } });
    answer(res, body, g('decoded'), [g('de'), g('decoded')]);
  });
  let router: RunningRouter | null = null;
  t.after(async () => { await router?.close(); await prefill.close(); await decode.close(); });
  router = await testRouter(['--pd-disaggregation', '--prefill', prefill.url, '8998', '--decode', decode.url]);
  const r = await post(router.port, '/generate', { text: 'hello', return_logprob: true, sampling_params: { max_new_tokens: 4 } });
  assert.equal(r.status, 200, r.text);
  const out = JSON.parse(r.text);
  assert.equal(out.text, 'decoded');
  assert.deepEqual(out.meta_info.input_token_logprobs, [[null, 1, null], [-0.5, 2, null]]);
  const pb = prefill.on('/generate')[0].body;
  assert.deepEqual(pb, decode.on('/generate')[0].body);
  assert.equal(pb['bootstrap_host'], '127.0.0.1');
  assert.equal(pb['bootstrap_port'], 8998);
  assert.equal(typeof pb['bootstrap_room'], 'number');
  const rs = await post(router.port, '/generate', { text: 'hello', return_logprob: true, stream: true });
  const evs = rs.text.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
  assert.equal(evs.length, 2);
  for (const e of evs) assert.deepEqual(e.meta_info.input_token_logprobs, [[null, 1, null], [-0.5, 2, null]]);

  const req = { model: 'default', prompt: 'Hello, my name is', max_tokens: 4, temperature: 0, echo: true, logprobs: 1 };
  const c = JSON.parse((await post(router.port, '/v1/completions', req)).text);
  assert.deepEqual(c.choices[0].logprobs, LP, 'the merged logprobs equal the plain server\'s');
  const cs = await post(router.port, '/v1/completions', { ...req, stream: true });
  const chunks = cs.text.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)).choices[0].logprobs);
  assert.deepEqual(chunks[0], slice(0, 6), 'the first chunk carries the echoed prompt');
  assert.deepEqual(chunks.slice(1), [slice(6, 7), slice(7, 8), slice(8, 9)]);
  assert.match(cs.text, /data: \[DONE\]\n\n$/);
  // without echo nothing is merged (and the router does not wait on the prefill answer to decide)
  const plain = JSON.parse((await post(router.port, '/v1/completions', { ...req, echo: false })).text);
  assert.deepEqual(plain.choices[0].logprobs, DECODE_COMPLETION.choices[0].logprobs);
});

test('PD faults: a prefill 500 is retried; a prefill that is down answers 502 prefill_server_error at once', async (t) => {
  let prefillFails = 1;
  const prefill = await scripted((path, body, res) => {
    if (path === '/generate' && prefillFails-- > 0) return json(res, 500, { error: { message: 'Prefill transfer failed for request rank=0' } });
    json(res, 200, { text: '' });
  });
  const decode = await scripted((path, body, res) => json(res, 200, { text: 'decoded' }));
  let router: RunningRouter | null = null;
  t.after(async () => { await router?.close(); await prefill.close(); await decode.close(); });
  router = await testRouter(['--pd-disaggregation', '--prefill', prefill.url, '--decode', decode.url]);
  const retried = await post(router.port, '/generate', { text: 'x' });
  assert.equal(retried.status, 200, retried.text);
  assert.equal(prefill.on('/generate').length, 2, 'the prefill 500 was retried');
  await prefill.close();
  const down = await post(router.port, '/generate', { text: 'z', sampling_params: { max_new_tokens: 2 } });
  assert.equal(down.status, 502, down.text);
  assert.equal(JSON.parse(down.text).error.code, 'prefill_server_error');
  const p = router.workers.find((w) => w.role === 'prefill')!;
  for (let i = 0; i < 100 && p.healthy; i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(p.healthy, false, 'a prefill worker that does not answer its health check is unhealthy');
});

test('PD: a decode worker dying mid-stream ends the client stream with an SSE error event and [DONE]; it is unhealthy, the next request 503', async (t) => {
  const prefill = await scripted((path, body, res) => json(res, 200, { text: '' }));
  const decode = await scripted((path, body, res) => {
    if (path !== '/generate') return json(res, 200, []);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: {"text":"a"}\n\n');
    res.write('data: {"text":"a partial ev');
    setTimeout(() => { void decode.close(); }, 30); // the server goes away mid-stream
  });
  let router: RunningRouter | null = null;
  t.after(async () => { await router?.close(); await prefill.close(); });
  router = await testRouter(['--pd-disaggregation', '--prefill', prefill.url, '--decode', decode.url]);
  const resp = await fetch(`http://127.0.0.1:${router.port}/generate`, { method: 'POST', body: JSON.stringify({ text: 'x', stream: true }) });
  assert.equal(resp.status, 200);
  const text = await resp.text();
  const events = text.split('\n\n').filter((e) => e.startsWith('data: '));
  assert.equal(events[0], 'data: {"text":"a"}');
  const err = JSON.parse(events.at(-2)!.slice(6));
  assert.deepEqual(Object.keys(err.error), ['type', 'code', 'message']);
  assert.equal(err.error.code, 'decode_server_error');
  assert.equal(events.at(-1), 'data: [DONE]');
  const d = router.workers.find((w) => w.role === 'decode')!;
  for (let i = 0; i < 100 && d.healthy; i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(d.healthy, false);
  const none = await post(router.port, '/generate', { text: 'y' });
  assert.equal(none.status, 503);
  assert.deepEqual(JSON.parse(none.text).error, { type: 'Service Unavailable', code: 'server_selection_failed', message: 'No available servers: No available decode workers (all circuits open or unhealthy)' });
});
