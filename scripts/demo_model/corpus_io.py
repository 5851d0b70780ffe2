"""The demo corpus on the Python side (dev-time only): loading corpus.mjs output, length-bucketed batches, collation
with per-token loss weights, and the held-out exact-match evaluation train.py prints while it trains.

Token ids are compact (index into the sorted list of ids the corpus uses; the last row is shared by every other id).
A sample is (ids int32 [n], plen, spans [(start, end, tag)] in completion coordinates, kind).
"""
import hashlib
import json
import os
import subprocess

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def corpus_file(family, n, seed, held_out=False):
    """Runs corpus.mjs once (cached under /tmp, keyed by the generator's source so an edited corpus is regenerated)
    and returns the JSONL path."""
    h = hashlib.sha256()
    for name in ('corpus.mjs', 'corpus_data.mjs'):
        with open(os.path.join(ROOT, 'scripts/demo_model', name), 'rb') as f:
            h.update(f.read())
    path = f'/tmp/tsglang-demo-corpus-{family}-{seed}-{n}{"-heldout" if held_out else ""}-{h.hexdigest()[:10]}.jsonl'
    if not os.path.exists(path):
        cmd = ['node', os.path.join(ROOT, 'scripts/demo_model/corpus.mjs'), '--family', family, '--n', str(n), '--seed', str(seed), '--out', path + '.tmp']
        subprocess.run(cmd + (['--held-out'] if held_out else []), check=True)
        os.replace(path + '.tmp', path)
    return path


def read_raw(path):
    """The JSONL samples as dicts with numpy prompt/completion arrays (memory: int32, not Python lists)."""
    out = []
    with open(path) as f:
        for line in f:
            s = json.loads(line)
            out.append({'kind': s['kind'], 'prompt': np.array(s['prompt'], dtype=np.int32), 'completion': np.array(s['completion'], dtype=np.int32), 'spans': [tuple(x) for x in s['spans']]})
    return out


def compact(raw, index, other):
    """Maps raw samples to compact ids (ids unknown to `index` → `other`)."""
    lut = np.full(max(max(index) + 1, max(int(max(s['prompt'].max(), s['completion'].max())) for s in raw) + 1), other, dtype=np.int32)
    for t, i in index.items():
        lut[t] = i
    return [{'ids': lut[np.concatenate([s['prompt'], s['completion']])], 'plen': len(s['prompt']), 'spans': s['spans'], 'kind': s['kind']} for s in raw]


def make_batches(samples, tokens_per_batch, rng):
    """Buckets samples of similar length into batches of about tokens_per_batch (padded) tokens, in random order."""
    order = sorted(range(len(samples)), key=lambda i: (len(samples[i]['ids']), rng.random()))
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


def collate(samples, idx, other, rng, weights, noise=0.01, extra=0):
    """One batch.

    Returns ids [B, T] (a `noise` share of prompt ids replaced by the shared 'other' row, teaching the model to live
    with tokens it has no row for), full [B, T + extra] (the ids unchanged, zero-padded: the MTP's shifted inputs),
    qpos [B, Tq] (the positions that have a target: plen-1 .. n-2), tgt [B, Tq + extra] (token qpos+1+j at column j of
    the row's targets, -100 past the end) and wts [B, Tq + extra] (loss weights: weights[tag] inside a span, else 1).
    """
    B = len(idx)
    T = max(len(samples[i]['ids']) for i in idx)
    Tq = max(len(samples[i]['ids']) - samples[i]['plen'] for i in idx)
    ids = torch.zeros(B, T, dtype=torch.long)
    full = torch.zeros(B, T + extra, dtype=torch.long)
    qpos = torch.zeros(B, Tq, dtype=torch.long)
    tgt = torch.full((B, Tq + extra), -100, dtype=torch.long)
    wts = torch.zeros(B, Tq + extra)
    for b, i in enumerate(idx):
        s = samples[i]
        x = torch.from_numpy(s['ids'].astype(np.int64))
        n, plen = len(x), s['plen']
        full[b, :n] = x
        if noise > 0:
            flip = torch.from_numpy(np.array([rng.random() < noise for _ in range(plen)], dtype=bool))
            x = x.clone()
            x[:plen][flip] = other
        ids[b, :n] = x
        c = n - plen
        qpos[b, :c] = torch.arange(plen - 1, n - 1)
        qpos[b, c:] = n - 2
        tgt[b, :c] = full[b, plen:n]
        w = torch.ones(c)
        for a, e, tag in s['spans']:
            w[a:e] = weights.get(tag, 1.0)
        wts[b, :c] = w
    return ids, full, qpos, tgt, wts


@torch.no_grad()
def evaluate(model, samples, other, batch_tokens=4000):
    """Teacher-forced exact match on held-out samples: a span (or a whole completion) counts when the model's argmax is
    the reference token at every one of its positions, which is exactly when greedy decoding reproduces it.

    Returns {'value': EM of parameter values, 'copy': EM of copied entities, 'all:<kind>': EM of whole completions}.
    """
    from models import QParam  # noqa: PLC0415

    head = model.P.get('lm_head.weight')
    hits, totals = {}, {}
    order = sorted(range(len(samples)), key=lambda i: len(samples[i]['ids']))
    cur = []
    groups = []
    for i in order:
        cur.append(i)
        if len(cur) * len(samples[i]['ids']) >= batch_tokens:
            groups.append(cur)
            cur = []
    if cur:
        groups.append(cur)
    was = QParam.qat
    for idx in groups:
        ids, full, qpos, tgt, _ = collate(samples, idx, other, None, {}, noise=0)
        h = model(ids, qpos)
        pred = (h @ head.t())[..., :-1].argmax(-1)
        ok = (pred == tgt) | (tgt < 0)
        for b, i in enumerate(idx):
            s = samples[i]
            c = len(s['ids']) - s['plen']
            keys = [(f'all:{s["kind"]}', bool(ok[b, :c].all()))] + [(tag, bool(ok[b, a:e].all())) for a, e, tag in s['spans']]
            for k, v in keys:
                hits[k] = hits.get(k, 0) + int(v)
                totals[k] = totals.get(k, 0) + 1
    QParam.qat = was
    return {k: round(hits[k] / totals[k], 3) for k in sorted(totals)}


def drill_batch(rng, pool, tokens_per_batch, nmin, nmax):
    """A batch of copy drills (the induction pattern the demo needs for every copied name and number): each row is n
    random tokens of `pool` (compact ids) followed by the same n tokens again; the targets are the second copy's
    tokens after its first (each one is the token that followed the current one earlier in the row).

    Returns samples in compact form (see the module docstring; kind 'drill', one 'copy' span) for collate.
    """
    n = rng.randint(nmin, nmax)
    out = []
    for _ in range(max(1, tokens_per_batch // (2 * n))):
        x = np.array([pool[rng.randrange(len(pool))] for _ in range(n)], dtype=np.int32)
        out.append({'ids': np.concatenate([x, x]), 'plen': n + 1, 'spans': [(0, n - 1, 'copy')], 'kind': 'drill'})
    return out
