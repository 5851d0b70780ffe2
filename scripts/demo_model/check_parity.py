#!/usr/bin/env python3
"""Dev-time check that tsglang computes what train.py trained: logits of the PyTorch model (FP8/BF16-rounded
weights, as exported) against `tsglang logits` on the expanded checkpoint, for one token sequence (and, for
DeepSeek-V3.2, the MTP layer's logits through `--mtp-next-tokens`).

  /usr/bin/python3 scripts/demo_model/check_parity.py --family deepseek-v32 --pt assets/demo/deepseek-v32.safetensors.pt \
      --model-path /tmp/demo-ds
Prints the largest absolute logit difference over the compact vocabulary and whether the argmax agrees everywhere.
"""
import argparse
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import DeepseekV32, MiniMaxM2, QParam  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--family', required=True)
    ap.add_argument('--pt', required=True)
    ap.add_argument('--model-path', required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    saved = torch.load(args.pt)
    used, cfg = saved['used'], saved['cfg']
    ds = args.family == 'deepseek-v32'
    model = DeepseekV32(cfg, len(used) + 1) if ds else MiniMaxM2(cfg, len(used) + 1)  # untied: loads a tied run's two tensors
    model.load_state_dict(saved['state'])
    QParam.qat = True
    used_index = {t: i for i, t in enumerate(used)}
    g = torch.Generator().manual_seed(1)
    compact = torch.randint(0, len(used), (1, 24), generator=g)
    full = [used[i] for i in compact[0].tolist()]
    nxt = full[1:] + [full[0]]
    cmd = ['node', os.path.join(ROOT, 'bin/tsglang.js'), 'logits', '--model-path', args.model_path, '--input-ids', ','.join(map(str, full)), '--positions', 'all', '--threads', '1']
    if ds:
        cmd += ['--mtp-next-tokens', ','.join(map(str, nxt))]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    with torch.no_grad():
        h = model(compact)
        head = model.P.get('lm_head.weight')
        ref = (h @ head.t())[0]
        checks = [('logits', ref, out['logits'])]
        if ds:
            nxt_c = torch.tensor([[used_index[t] for t in nxt]])
            checks.append(('mtp_logits', (model.mtp(nxt_c, h) @ head.t())[0], out['mtp_logits']))
    used_set = set(used)
    unused = next(i for i in range(cfg['vocab_size']) if i not in used_set)  # any id of the shared last row
    for name, r, got in checks:
        worst, agree = 0.0, True
        for pos in range(r.shape[0]):
            row = torch.tensor(got[str(pos)])
            mine = torch.cat([row[used], row[[unused]]])
            worst = max(worst, ((mine - r[pos]).abs().max() / r[pos].abs().max()).item())
            agree = agree and int(mine[:-1].argmax()) == int(r[pos][:-1].argmax())
        print(f'{name}: max |tsglang - torch| / max |torch| = {worst:.2e}, argmax agrees at every position: {agree}')


if __name__ == '__main__':
    main()
