// Max |logit error| per golden prompt of a fixture, read through `tsglang logits` as outside checks read it.
// Usage: node scripts/golden_logit_error.mjs ../shared/fixtures/tiny-minimax-m2 [mtp]   (run from the repo root after a build)
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
const [fixture, extra] = [process.argv[2], process.argv[3] ?? ''];
const g = JSON.parse(readFileSync(`${fixture}/golden.json`, 'utf8'));
for (const p of g.prompts) {
  const positions = [...new Set([...(p.logits_at ?? []).map((x) => x.position), p.length - 1])];
  const args = ['bin/tsglang.js', 'logits', '--model-path', fixture, '--input-ids', p.tokens.join(','), '--positions', positions.join(','), '--greedy', String(p.greedy.num_tokens)];
  if (extra === 'mtp' && p.mtp) args.push('--mtp-next-tokens', p.mtp.next_tokens.join(','));
  const t0 = Date.now();
  const out = JSON.parse(execFileSync('node', args, { encoding: 'utf8', maxBuffer: 1 << 28, stdio: ['ignore', 'pipe', 'ignore'] }));
  const ms = Date.now() - t0;
  let err = 0;
  const cmp = (a, b) => { for (let i = 0; i < a.length; i++) err = Math.max(err, Math.abs(a[i] - b[i])); };
  cmp(out.logits[String(p.length - 1)], p.logits_last);
  for (const la of p.logits_at ?? []) cmp(out.logits[String(la.position)], la.logits);
  let mtpErr = null;
  if (out.mtp_logits) { mtpErr = 0; for (const la of p.mtp.logits_at) { const o = out.mtp_logits[String(la.position)]; if (!o) continue; for (let i = 0; i < o.length; i++) mtpErr = Math.max(mtpErr, Math.abs(o[i] - la.logits[i])); } }
  const greedyOk = JSON.stringify(out.greedy) === JSON.stringify(p.greedy.tokens);
  console.log(`${p.name}: length ${p.length}, max |logit err| ${err.toExponential(2)}${mtpErr !== null ? `, MTP max err ${mtpErr.toExponential(2)}` : ''}, greedy ${greedyOk ? 'identical' : 'DIFFERENT'} (${ms} ms CLI wall)`);
}
