// End to end, DP-attention across nodes: the DeepSeek-V3.2 page's two-node command (`--nccl-init ADDR --nnodes 2
// --node-rank R --tp 16 --dp 2 --enable-dp-attention --page-size 64 … --speculative-algorithm EAGLE (2,1,3) …
// --tool-call-parser deepseekv32 --reasoning-parser deepseek-v3 …`) as written, only --model-path (the demo DeepSeek
// checkpoint: its trained MTP layer accepts drafts) and the ports changed, as two processes: attention-DP group 0 on
// node 0 (ranks 0..7), group 1 on node 1 (ranks 8..15, its engine core hosted there). Over loopback: greedy tokens and
// the speculative counters equal a tp 1 server's, two concurrent requests run one per group, chat goes through the
// reasoning and tool-call parsers (a named tool_choice: a constrained tool call; thinking on: reasoning) as on tp 1; then node 1 is killed
// mid-request: the requests get 500s naming the lost group/ranks and node 0 exits (no hang). In two network
// namespaces joined by a veth pair (skipped where not permitted): the same tokens, and SIGTERM stops both nodes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startServe, stopServe } from '../../bench/serve_child.js';
import { loadGlooAddon } from '../../src/distributed/index.js';
import { createNetnsPair } from '../helpers/netns.js';
import { exitsWithin, killNodes, startNodeProc, type NodeProc } from '../helpers/node_proc.js';
import { TSGLANG_BIN } from '../helpers/paths.js';
import { SEED_WEATHER_TOOL } from '../helpers/seed_tools.js';

const gloo = loadGlooAddon();
const skipGloo = gloo.addon ? false : `Gloo unavailable: ${gloo.reason}`;
const MODEL = mkdtempSync(join(tmpdir(), 'tsg-mndp-'));
// the demo model's config says 4096 positions; the seed command asks for --context-length 65536 (RoPE does not read it)
const made = spawnSync(process.execPath, [TSGLANG_BIN, 'make-tiny', '--preset', 'demo', '--arch', 'deepseek-v32', '--out', MODEL,
  '--json-model-override-args', '{"max_position_embeddings": 163840}'], { encoding: 'utf8' });
if (made.status !== 0) throw new Error(`make-tiny failed: ${made.stderr}`);
process.on('exit', () => rmSync(MODEL, { recursive: true, force: true }));
const WATCHDOG_MS = 400_000;

/** The seed page's flags after --model-path, for both nodes (only the ports differ from the page). */
function seedArgs(rank: number, initAddr: string, port: number): string[] {
  return [
    '--model-path', MODEL,
    '--nccl-init', initAddr, '--nnodes', '2', '--node-rank', String(rank), '--tp', '16',
    '--dp', '2', '--enable-dp-attention', '--page-size', '64',
    '--trust-remote-code', '--host', '0.0.0.0', '--port', String(port),
    '--log-requests',
    '--context-length', '65536', '--max-running-requests', '128',
    '--speculative-algorithm', 'EAGLE',
    '--speculative-num-steps', '2', '--speculative-eagle-topk', '1', '--speculative-num-draft-tokens', '3',
    '--allow-auto-truncate', '--enable-metrics',
    '--tool-call-parser', 'deepseekv32', '--reasoning-parser', 'deepseek-v3',
    '--served-model-name', 'DeepSeek-V3.2-Opt-dp2-mtp',
  ];
}

const PROMPTS = ['What is the weather in Paris?', 'Hello', 'Call get_weather for Tokyo'].map((q) => `<｜begin▁of▁sentence｜><｜User｜>${q}<｜Assistant｜></think>`);
const genBody = (text: string) => ({ text, sampling_params: { max_new_tokens: 20, temperature: 0, ignore_eos: true } });
const CHATS = [
  // a named tool_choice: a tool call constrained to get_weather's schema (a grammar in the group's engine core)
  { messages: [{ role: 'user', content: 'What is the weather in Paris?' }], tools: [SEED_WEATHER_TOOL], tool_choice: { type: 'function', function: { name: 'get_weather' } } },
  // thinking on, tools offered (auto)
  { messages: [{ role: 'user', content: 'Hello, how are you?' }], tools: [SEED_WEATHER_TOOL], chat_template_kwargs: { thinking: true } },
].map((c) => ({ model: 'DeepSeek-V3.2-Opt-dp2-mtp', max_tokens: 40, temperature: 0, ...c }));

interface GenOut { output_ids: number[]; meta_info: Record<string, unknown> }
interface Answers { gens: { ids: number[]; spec: unknown[] }[]; chats: unknown[] }

/** Greedy ids + speculative counters of PROMPTS, and the chat messages of CHATS, through `post` (all concurrently). */
async function answers(post: (path: string, body: unknown) => Promise<{ status: number; text: string }>): Promise<Answers> {
  const gens = await Promise.all(PROMPTS.map(async (p) => {
    const r = await post('/generate', genBody(p));
    assert.equal(r.status, 200, r.text);
    const o = JSON.parse(r.text) as GenOut;
    const m = o.meta_info;
    return { ids: o.output_ids, spec: [m.spec_verify_ct, m.spec_accept_token_num, m.spec_draft_token_num, m.spec_accept_length] };
  }));
  const chats = await Promise.all(CHATS.map(async (c) => {
    const r = await post('/v1/chat/completions', c);
    assert.equal(r.status, 200, r.text);
    const choice = (JSON.parse(r.text) as { choices: { message: { tool_calls?: { id?: string }[] | null }; finish_reason: string }[] }).choices[0];
    for (const call of choice.message.tool_calls ?? []) delete call.id; // a random call id
    return choice;
  }));
  return { gens, chats };
}

const localPost = (base: string) => async (path: string, body: unknown): Promise<{ status: number; text: string }> => {
  const r = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, text: await r.text() };
};

let reference: Answers | null = null;
/** The same answers from one process with tp 1 (the same serving flags, no parallelism). */
async function referenceAnswers(): Promise<Answers> {
  if (reference) return reference;
  const one = await startServe(['--model-path', MODEL, '--page-size', '64', '--context-length', '65536', '--max-running-requests', '128',
    '--speculative-algorithm', 'EAGLE', '--speculative-num-steps', '2', '--speculative-eagle-topk', '1', '--speculative-num-draft-tokens', '3',
    '--tool-call-parser', 'deepseekv32', '--reasoning-parser', 'deepseek-v3', '--served-model-name', 'DeepSeek-V3.2-Opt-dp2-mtp']);
  try {
    reference = await answers(localPost(one.base));
  } finally {
    await stopServe(one);
  }
  const [named, auto] = reference.chats as { message: { tool_calls: { function: { name: string; arguments: string } }[] | null; reasoning_content: string | null } }[];
  // (the demo model fills the arguments with whitespace, which the JSON grammar allows: only the call is asserted)
  assert.equal(named.message.tool_calls?.[0]?.function.name, 'get_weather', JSON.stringify(named));
  assert.ok(auto.message.reasoning_content, `reasoning parsed: ${JSON.stringify(auto)}`);
  assert.ok(reference.gens.some((g) => (g.spec[1] as number) > 0), `the demo MTP accepts drafts: ${JSON.stringify(reference.gens.map((g) => g.spec))}`);
  return reference;
}

test('seed two-node command (--tp 16 --dp 2 --enable-dp-attention + EAGLE) over loopback: tp 1 tokens, accept counts and chat; a group per request; killing node 1 fails the requests and node 0 exits', { skip: skipGloo, timeout: WATCHDOG_MS }, async () => {
  const want = await referenceAnswers();
  const [store, http] = [await freePort(), await freePort()];
  const n0 = startNodeProc(seedArgs(0, `127.0.0.1:${store}`, http), WATCHDOG_MS);
  const n1 = startNodeProc(seedArgs(1, `127.0.0.1:${store}`, http), WATCHDOG_MS);
  try {
    await n0.waitFor(/ready to roll/);
    // (a worker thread's log lines may reach stderr after the ready line)
    await n0.waitFor(/\[DP0 TP0\] Load weight end\. .*tp_size=16, dp_size=2, attn_tp_size=8/);
    await n1.waitFor(/\[DP1 TP8\] Load weight end\. .*tp_size=16, dp_size=2, attn_tp_size=8/);
    assert.match(n1.stderr(), /node 1: no HTTP server on this node .*engine cores of DP ranks \[1\]/);
    const base = `http://127.0.0.1:${http}`;
    const got = await answers(localPost(base));
    assert.deepEqual(got.gens, want.gens, 'greedy tokens and speculative counters = tp 1');
    assert.deepEqual(got.chats, want.chats, 'chat (reasoning + tool-call parsers) = tp 1');
    const info = (await (await fetch(`${base}/get_server_info`)).json()) as { internal_states: { num_running_reqs: number; avg_spec_accept_length?: number }[] };
    const accept = info.internal_states.map((s) => s.avg_spec_accept_length ?? 0);
    assert.ok(accept.length === 2 && accept.every((a) => a > 1), `both groups verified drafts: avg_spec_accept_length ${accept}`);
    assert.match(await (await fetch(`${base}/metrics`)).text(), /sglang:spec_accept_length\{[^}]*\} (1\.\d*[1-9]|[2-9])/);

    // two long requests: one per group (round robin), both running; then node 1 dies under them
    const long = (i: number) => fetch(`${base}/generate`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: PROMPTS[i], sampling_params: { max_new_tokens: 60_000, temperature: 0, ignore_eos: true } }),
    }).then(async (r) => ({ status: r.status, body: await r.text() }));
    const pending = [long(0), long(1)];
    let running: number[] = [];
    for (let t = 0; t < 600 && running.join() !== '1,1'; t++) {
      await new Promise((r) => setTimeout(r, 100));
      running = ((await (await fetch(`${base}/get_server_info`)).json()) as typeof info).internal_states.map((s) => s.num_running_reqs);
    }
    assert.deepEqual(running, [1, 1], 'one request per attention-DP group');
    n1.child.kill('SIGKILL');
    const res = await Promise.all(pending);
    for (const r of res) {
      assert.equal(r.status, 500, r.body);
      assert.match(r.body, /ranks 8\.\.15|group 'tp' rank \d+ of 16/, r.body);
    }
    const e0 = await exitsWithin(n0, 60_000);
    assert.equal(e0.code, 1, n0.stderr().slice(-3000));
    assert.match(n0.stderr(), /node 1 \(ranks 8\.\.15\) is gone/);
  } finally {
    killNodes(n0, n1);
  }
});

test('seed two-node DP-attention command in two network namespaces: tp 1 tokens; SIGTERM on node 0 stops both', { skip: skipGloo, timeout: WATCHDOG_MS }, async (t) => {
  const ns = createNetnsPair('dpnodes');
  if ('skip' in ns) return t.skip(ns.skip);
  try {
    const want = await referenceAnswers();
    const addr = `${ns.addrs[0]}:29531`;
    const n0 = startNodeProc(seedArgs(0, addr, 30031), WATCHDOG_MS, ns.prefix(0));
    const n1 = startNodeProc(seedArgs(1, addr, 30031), WATCHDOG_MS, ns.prefix(1));
    try {
      await n0.waitFor(/ready to roll/);
      assert.match(n0.stderr(), new RegExp(`DP1 on node 1 \\(${ns.addrs[1].replace(/\./g, '\\.')}:\\d+\\)`));
      // the HTTP server is reachable only inside namespace 0: ask from there
      const post = async (path: string, body: unknown): Promise<{ status: number; text: string }> => {
        const script = `fetch('http://${ns.addrs[0]}:30031${path}',{method:'POST',headers:{'content-type':'application/json'},body:${JSON.stringify(JSON.stringify(body))}})` +
          '.then(async r=>process.stdout.write(JSON.stringify({status:r.status,text:await r.text()})))';
        const r = spawnSync(ns.prefix(0)[0], [...ns.prefix(0).slice(1), process.execPath, '-e', script], { encoding: 'utf8', timeout: 120_000 });
        return JSON.parse(r.stdout) as { status: number; text: string };
      };
      const got = await answers(post);
      assert.deepEqual(got.gens, want.gens);
      assert.deepEqual(got.chats, want.chats);
      n0.child.kill('SIGTERM');
      const [e0, e1] = [await exitsWithin(n0, 60_000), await exitsWithin(n1, 60_000)];
      assert.equal(e0.code, 0, n0.stderr().slice(-3000));
      assert.equal(e1.code, 0, n1.stderr().slice(-3000));
      assert.match(n1.stderr(), /node 1: node 0 shut down; exiting/);
      assert.doesNotMatch(n0.stderr() + n1.stderr(), /ERROR|rank failed/);
    } finally {
      killNodes(n0, n1);
    }
  } finally {
    ns.remove();
  }
});

// Opt-in (TSGLANG_TEST_DP_SPAN=1; four processes): attention-DP groups that span nodes (--tp 4 --dp 2 --nnodes 4: one
// rank per node, each group on two nodes, its attn_tp and step groups over Gloo, node 1's and node 3's ranks started
// by their own nodes) give tp 1's greedy tokens; SIGTERM on node 0 stops all four.
test('attention-DP groups spanning nodes (--tp 4 --dp 2 --nnodes 4): tp 1 tokens, clean stop', { skip: skipGloo || (process.env.TSGLANG_TEST_DP_SPAN === '1' ? false : 'opt-in: TSGLANG_TEST_DP_SPAN=1'), timeout: WATCHDOG_MS }, async () => {
  const want = await referenceAnswers();
  const [store, http] = [await freePort(), await freePort()];
  const nodes = [0, 1, 2, 3].map((k) => startNodeProc(['--model-path', MODEL, '--nnodes', '4', '--node-rank', String(k), '--dist-init-addr', `127.0.0.1:${store}`, '--port', String(http),
    '--tp', '4', '--dp', '2', '--enable-dp-attention', '--page-size', '64', '--speculative-algorithm', 'EAGLE', '--speculative-num-steps', '2', '--speculative-eagle-topk', '1',
    '--speculative-num-draft-tokens', '3', '--tool-call-parser', 'deepseekv32', '--reasoning-parser', 'deepseek-v3', '--served-model-name', 'DeepSeek-V3.2-Opt-dp2-mtp', '--context-length', '65536'], WATCHDOG_MS));
  try {
    await nodes[0].waitFor(/ready to roll/);
    await nodes[1].waitFor(/attention-DP ranks 1 of groups led by another node started/);
    await nodes[2].waitFor(/engine cores of DP ranks \[1\]/);
    const got = await answers(localPost(`http://127.0.0.1:${http}`));
    assert.deepEqual(got.gens, want.gens);
    assert.deepEqual(got.chats, want.chats);
    nodes[0].child.kill('SIGTERM');
    for (const n of nodes) assert.equal((await exitsWithin(n, 60_000)).code, 0, n.stderr().slice(-2000));
  } finally {
    killNodes(...nodes);
  }
});
