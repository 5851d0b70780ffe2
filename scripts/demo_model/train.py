#!/usr/bin/env python3
"""Trains tsglang's demo checkpoints: a tiny MiniMax-M2 model and a tiny DeepSeek-V3.2 model (with its MTP layer).

DEV-TIME ONLY. Nothing here is needed to install, run or test tsglang: the trained weights are committed under
assets/demo/ and `tsglang make-tiny --preset demo` expands them into a checkpoint.
Needs Debian's PyTorch (`apt-get install -y python3-torch`, 1.13) and numpy, plus a built tsglang tree (the corpus
is rendered and tokenized by tsglang's own code, scripts/demo_model/corpus.mjs).

The committed assets came from (one thread each, nice 10, on the shared 2-core machine; figures in their metadata):
  /usr/bin/python3 scripts/demo_model/train.py --family minimax-m2 --steps 100000 --time-budget 1500 --tokens-per-batch 1536 \
      --samples 8000 --out assets/demo/minimax-m2.safetensors        # stopped at 640 steps, final loss 0.98
  /usr/bin/python3 scripts/demo_model/train.py --family deepseek-v32 --steps 100000 --time-budget 1500 --tokens-per-batch 1536 \
      --samples 8000 --out assets/demo/deepseek-v32.safetensors      # stopped at 311 steps, final loss 1.86 (undertrained)
With --time-budget the schedule follows wall time, so a rerun with --steps 640 (311) and no budget gives a close model,
not the same bytes. Continue a run with --resume FILE.pt --seed 1 (another batch order).
Then: node bin/tsglang.js make-tiny --arch minimax-m2 --preset demo --out /tmp/demo-mm   # the Hugging Face checkpoint
      /usr/bin/python3 scripts/demo_model/check_parity.py ...   # tsglang's logits = PyTorch's

What it writes: a compact safetensors file with every tensor of the checkpoint in its checkpoint storage (FP8 e4m3
codes + `*_scale_inv` 128x128 block scales for the FP8 linears, F32 for the others, already rounded to BF16 where
the checkpoint stores BF16), except the two vocabulary tensors, which hold only the rows of the token ids the corpus
uses (`demo.vocab_ids`) plus one last row shared by every other id. Its metadata holds config.json and the run's
figures (steps, seconds, final losses). Deterministic given --seed and --steps without --time-budget (one thread;
torch.manual_seed).
Runs on one thread (torch.set_num_threads(1)); start it under nice on a shared machine.
"""
import argparse
import json
import math
import os
import random
import struct
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import DeepseekV32, MiniMaxM2, QParam, fp8_block_quant  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Sizes of the demo configs (everything else is the family's tiny preset, src/models/*): heads divisible by 8 so the
# seed pages' --tp 8 --ep 8 commands split them, experts divisible by 8.
MINIMAX_SIZES = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4, head_dim=32, rotary_dim=16,
                     intermediate_size=128, num_local_experts=8, num_experts_per_tok=2, attn_type_list=[1, 1], max_position_embeddings=4096)
DEEPSEEK_SIZES = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=8, q_lora_rank=64, kv_lora_rank=64, qk_nope_head_dim=32,
                      qk_rope_head_dim=16, v_head_dim=32, index_n_heads=4, index_head_dim=32, index_topk=2048, intermediate_size=256,
                      moe_intermediate_size=64, n_routed_experts=8, num_experts_per_tok=2, n_group=1, topk_group=1, n_shared_experts=1,
                      first_k_dense_replace=1, routed_scaling_factor=2.5, max_position_embeddings=4096, rope_scaling=None)


def tiny_config(family):
    """The family's make-tiny preset config.json with the tokenizer's fields (printed by `tsglang make-tiny`)."""
    out = f'/tmp/tsglang-demo-preset-{family}-{os.getpid()}'
    subprocess.run(['node', os.path.join(ROOT, 'bin/tsglang.js'), 'make-tiny', '--arch', family, '--out', out, '--num-shards', '1', '--eos-shaping', 'off'],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(out, 'config.json')) as f:
        cfg = json.load(f)
    subprocess.run(['rm', '-rf', out], check=True)
    cfg.update(MINIMAX_SIZES if family == 'minimax-m2' else DEEPSEEK_SIZES)
    if family == 'minimax-m2':
        cfg['use_mtp'] = False  # tsglang (like SGLang's MiniMaxM2ForCausalLM) loads no MiniMax MTP modules
    return {k: v for k, v in cfg.items() if v is not None}


def load_corpus(family, n, seed):
    path = f'/tmp/tsglang-demo-corpus-{family}-{seed}-{n}.jsonl'
    if not os.path.exists(path):
        subprocess.run(['node', os.path.join(ROOT, 'scripts/demo_model/corpus.mjs'), '--family', family, '--n', str(n), '--seed', str(seed), '--out', path], check=True)
    with open(path) as f:
        return [json.loads(line) for line in f]


def make_batches(samples, tokens_per_batch, rng):
    """Buckets samples of similar length into batches of about tokens_per_batch (padded) tokens."""
    order = sorted(range(len(samples)), key=lambda i: len(samples[i]['ids']))
    batches, cur = [], []
    for i in order:
        cur.append(i)
        if len(cur) * len(samples[i]['ids']) >= tokens_per_batch:
            batches.append(cur)
            cur = []
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def collate(samples, idx, other, mtp_steps, rng):
    """ids [B, T] (2% of prompt ids replaced by the shared 'other' row), targets [B, T] (-100 outside completions)."""
    T = max(len(samples[i]['ids']) for i in idx)
    ids = torch.zeros(len(idx), T, dtype=torch.long)
    tgt = torch.full((len(idx), T + mtp_steps), -100, dtype=torch.long)
    full = torch.zeros(len(idx), T + mtp_steps, dtype=torch.long)
    for b, i in enumerate(idx):
        s = samples[i]
        x = list(s['ids'])
        full[b, :len(x)] = torch.tensor(x)
        for j in range(s['plen']):
            if rng.random() < 0.02:
                x[j] = other
        ids[b, :len(x)] = torch.tensor(x)
        for j in range(s['plen'], len(x)):
            tgt[b, j - 1] = s['ids'][j]
    return ids, tgt, full


def ce(model, h, tgt, log_unused):
    """Cross-entropy of hidden states h [B, T, D] against tgt [B, T] over the compact vocabulary + 'other'."""
    keep = tgt.reshape(-1) >= 0
    logits = h.reshape(-1, h.shape[-1])[keep] @ model.P.get('lm_head.weight').t()
    logits = torch.cat([logits[:, :-1], logits[:, -1:] + log_unused], dim=1)
    return F.cross_entropy(logits, tgt.reshape(-1)[keep])


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, dtype string, shape, bytes)."""
    header, offset = {'__metadata__': metadata}, 0
    for name, dtype, shape, data in tensors:
        header[name] = {'dtype': dtype, 'shape': list(shape), 'data_offsets': [offset, offset + len(data)]}
        offset += len(data)
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)))
        f.write(h)
        for _, _, _, data in tensors:
            f.write(data)


def e4m3_codes(values):
    """Codes of values that are exactly e4m3 (from fp8_block_quant) by lookup in the positive e4m3 table."""
    table = []
    for code in range(0x7f):
        e, m = code >> 3, code & 7
        table.append(m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    table = np.array(table, dtype=np.float64)
    a = np.abs(values.astype(np.float64))
    idx = np.searchsorted(table, a)
    idx = np.clip(idx, 0, 0x7e)
    assert np.all(table[idx] == a), 'value not on the e4m3 grid'
    return (idx | np.where(values < 0, 0x80, 0)).astype(np.uint8)


def export(model, vocab_ids, cfg, family, out, figures):
    tensors = []
    with torch.no_grad():
        for name, q in model.P.named():
            w = q.w.detach().float()
            if q.storage == 'fp8':
                _, scale, values = fp8_block_quant(w, q.pow2)
                codes = e4m3_codes(values.numpy())
                tensors.append((name, 'F8_E4M3', w.shape, codes.tobytes()))
                tensors.append((name + '_scale_inv', 'F32', scale.shape, scale.numpy().astype('<f4').tobytes()))
            elif name in ('model.embed_tokens.weight', 'lm_head.weight'):
                bf = w.to(torch.bfloat16).view(torch.int16).numpy().astype('<i2')
                tensors.append((name, 'BF16', w.shape, bf.tobytes()))
            else:
                v = w.to(torch.bfloat16).float() if q.storage == 'bf16' else w
                tensors.append((name, 'F32', w.shape, v.numpy().astype('<f4').tobytes()))
    tensors.append(('demo.vocab_ids', 'I32', (len(vocab_ids),), np.array(vocab_ids, dtype='<i4').tobytes()))
    meta = {'format': 'pt', 'family': family, 'config': json.dumps(cfg), 'training': json.dumps(figures)}
    write_safetensors(out, tensors, meta)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--family', required=True, choices=['minimax-m2', 'deepseek-v32'])
    ap.add_argument('--steps', type=int, default=1500)
    ap.add_argument('--samples', type=int, default=24000)
    ap.add_argument('--tokens-per-batch', type=int, default=2048)
    ap.add_argument('--lr', type=float, default=4e-3)
    ap.add_argument('--seed', type=int, default=0, help='initialization and batch order')
    ap.add_argument('--corpus-seed', type=int, default=0, help='the corpus (corpus.mjs --seed)')
    ap.add_argument('--qat-fraction', type=float, default=0.25, help='last fraction of the steps trained on FP8/BF16-rounded weights')
    ap.add_argument('--time-budget', type=float, default=0,
                    help='seconds: when > 0 the schedule (warm-up, cosine decay, QAT phase) follows max(step/steps, elapsed/budget) and '
                         'training stops when that reaches 1; the steps done are recorded, and rerunning with --steps <them> and no '
                         'budget reproduces the run exactly')
    ap.add_argument('--mtp-steps', type=int, default=2, help='DeepSeek: chained MTP draft steps trained (EAGLE num-steps)')
    ap.add_argument('--resume', help="a .pt written by an earlier run (same --family/--samples/--corpus-seed; another --seed sees the corpus in another order): continue training it")
    ap.add_argument('--out', required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    cfg = tiny_config(args.family)
    raw = load_corpus(args.family, args.samples, args.corpus_seed)
    used = sorted({t for s in raw for t in s['prompt'] + s['completion']} | {cfg['bos_token_id'], cfg['eos_token_id']})
    index = {t: i for i, t in enumerate(used)}
    other = len(used)
    samples = [{'ids': [index[t] for t in s['prompt'] + s['completion']], 'plen': len(s['prompt']), 'kind': s['kind']} for s in raw]
    log_unused = math.log(cfg['vocab_size'] - len(used))
    is_ds = args.family == 'deepseek-v32'
    model = DeepseekV32(cfg, other + 1) if is_ds else MiniMaxM2(cfg, other + 1)
    mtp_steps = args.mtp_steps if is_ds else 0
    earlier = None
    if args.resume:
        saved = torch.load(args.resume)
        assert saved['used'] == used, '--resume: the corpus vocabulary differs (use the same --samples and --corpus-seed)'
        model.load_state_dict(saved['state'])
        earlier = saved['figures']
    n_params = sum(p.numel() for p in model.parameters())
    print(f'{args.family}: {n_params} parameters over a compact vocabulary of {other} ids (+1 shared row), {len(samples)} samples', file=sys.stderr)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
    batches = []
    t0 = time.time()
    losses, mtp_losses = [], []
    stopped = None
    for step in range(args.steps):
        progress = step / args.steps
        if args.time_budget > 0:
            progress = max(progress, (time.time() - t0) / args.time_budget)
        if progress >= 1:
            stopped = step
            break
        QParam.qat = progress >= 1 - args.qat_fraction
        if not batches:
            batches = make_batches(samples, args.tokens_per_batch, rng)
        idx = batches.pop()
        warm = min(1.0, (step + 1) / 50)
        lr = args.lr * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
        for g in opt.param_groups:
            g['lr'] = lr
        ids, tgt, full = collate(samples, idx, other, mtp_steps, rng)
        h = model(ids)
        loss = ce(model, h, tgt[:, :ids.shape[1]], log_unused)
        total = loss
        mloss = []
        if mtp_steps:
            T = ids.shape[1]
            hk = h.detach()
            for k in range(1, mtp_steps + 1):
                hk = model.mtp(full[:, k:k + T], hk)  # position i: token i+k, hidden of step k-1 → predicts token i+k+1
                lk = ce(model, hk, tgt[:, k:k + T], log_unused)
                mloss.append(lk.item())
                total = total + lk / mtp_steps
        opt.zero_grad()
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if mloss:
            mtp_losses.append(mloss)
        if step % 25 == 0 or step == args.steps - 1:
            m = ' mtp ' + ' '.join(f'{x:.3f}' for x in np.mean(mtp_losses[-25:], axis=0)) if mtp_losses else ''
            print(f'step {step} loss {np.mean(losses[-25:]):.4f}{m} lr {lr:.2e} {time.time() - t0:.0f}s', file=sys.stderr, flush=True)
    seconds = time.time() - t0
    QParam.qat = True
    figures = {'steps': args.steps if stopped is None else stopped, 'time_budget': args.time_budget, 'seconds': round(seconds, 1), 'seed': args.seed, 'corpus_seed': args.corpus_seed, 'samples': len(samples), 'parameters': n_params,
               'final_loss': round(float(np.mean(losses[-50:])), 4)}
    if earlier is not None:
        figures['resumed_from'] = earlier
    if mtp_losses:
        figures['final_mtp_losses'] = [round(float(x), 4) for x in np.mean(mtp_losses[-50:], axis=0)]
    torch.save({'state': model.state_dict(), 'used': used, 'cfg': cfg, 'figures': figures}, args.out + '.pt')  # re-export without retraining
    export(model, used, cfg, args.family, args.out, figures)
    print(json.dumps(figures), file=sys.stderr)


if __name__ == '__main__':
    main()
