#!/usr/bin/env python3
"""Dev-time estimate of the EAGLE accept length of the DeepSeek-V3.2 demo's MTP layer, before tsglang's own
speculative decoding exists: greedy decoding with SGLang's chain drafting (topk 1; model-spec.md §3.10.3) simulated
on the trained PyTorch model (check_parity.py shows tsglang computes the same logits).

Each round: the last accepted token x_n and the target hidden h_{n-1} give draft 1 = MTP(x_n, h_{n-1}); draft k+1 =
MTP(draft k, the MTP's own output hidden); the MTP layer attends over its own earlier positions, fed (x_{i+1}, h_i).
The target then verifies [x_n, d_1..d_s]: accepted = the longest prefix of drafts equal to its greedy tokens, plus
one token of its own. Accept length = mean tokens per round (SGLang's `Accept length`).

  /usr/bin/python3 scripts/demo_model/accept_length.py --pt assets/demo/deepseek-v32.safetensors.pt --steps 3 --prompts 8
"""
import argparse
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import DeepseekV32, QParam  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--pt', required=True)
    ap.add_argument('--steps', type=int, default=3, help='--speculative-num-steps (draft tokens per round)')
    ap.add_argument('--prompts', type=int, default=8)
    ap.add_argument('--max-new', type=int, default=80)
    args = ap.parse_args()
    torch.set_num_threads(1)
    saved = torch.load(args.pt)
    used, cfg = saved['used'], saved['cfg']
    index = {t: i for i, t in enumerate(used)}
    model = DeepseekV32(cfg, len(used) + 1)
    model.load_state_dict(saved['state'])
    QParam.qat = True
    eos = index[cfg['eos_token_id']]
    path = '/tmp/tsglang-demo-accept-prompts.jsonl'
    subprocess.run(['node', os.path.join(ROOT, 'scripts/demo_model/corpus.mjs'), '--family', 'deepseek-v32', '--n', str(args.prompts), '--seed', '12345', '--out', path], check=True)
    head = model.P.get('lm_head.weight')[:-1]
    rounds = tokens = 0
    with torch.no_grad():
        for line in open(path):
            s = json.loads(line)
            if any(t not in index for t in s['prompt']):
                continue
            seq = [index[t] for t in s['prompt']]
            h = model(torch.tensor([seq]))
            seq.append(int((h[0, -1] @ head.t()).argmax()))
            new = 1
            while seq[-1] != eos and new < args.max_new:
                # drafts: MTP over positions 0..n-1 fed (x_{i+1}, h_i), then chained on its own outputs
                ids = list(seq[1:])
                hid = h[0]
                drafts = []
                for _ in range(args.steps):
                    out = model.mtp(torch.tensor([ids]), hid[None])[0]
                    d = int((out[-1] @ head.t()).argmax())
                    drafts.append(d)
                    ids.append(d)
                    hid = torch.cat([hid, out[-1:]], dim=0)
                # verify: the target's greedy tokens after [.., x_n, d_1 .. d_s]
                hv = model(torch.tensor([seq + drafts]))[0]
                greedy = (hv[len(seq) - 1:] @ head.t()).argmax(-1).tolist()
                acc = 0
                while acc < len(drafts) and drafts[acc] == greedy[acc]:
                    acc += 1
                step = greedy[:acc + 1]  # the accepted drafts and the target's own next token
                if eos in step:
                    step = step[:step.index(eos) + 1]
                seq += step
                new += len(step)
                rounds += 1
                tokens += len(step)
                h = model(torch.tensor([seq[:-1]])) if seq[-1] != eos else h
    print(json.dumps({'num_steps': args.steps, 'rounds': rounds, 'tokens': tokens, 'accept_length': round(tokens / max(rounds, 1), 3)}))


if __name__ == '__main__':
    main()
