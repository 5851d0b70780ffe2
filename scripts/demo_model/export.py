"""Export of a trained demo model to the compact safetensors file committed under assets/demo/ (dev-time only; see
train.py and src/executor/demo_weights.ts, which expands it into a Hugging Face checkpoint)."""
import json
import struct

import numpy as np
import torch

from models import fp8_block_quant


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
    """Exports a training checkpoint (train.py --ckpt, at whatever step it holds) as a compact asset."""
    import argparse
    import sys
    from models import DeepseekV32, MiniMaxM2, QParam  # noqa: PLC0415
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument('--family', required=True, choices=['minimax-m2', 'deepseek-v32'])
    ap.add_argument('--ckpt', required=True)
    ap.add_argument('--out', required=True)
    args = ap.parse_args()
    saved = torch.load(args.ckpt)
    cfg, used = saved['cfg'], saved['used']
    model = (DeepseekV32 if args.family == 'deepseek-v32' else MiniMaxM2)(cfg, len(used) + 1)
    model.load_state_dict(saved['state'])
    QParam.qat = True
    history = saved['history']
    figures = {'args': saved.get('args'), 'steps': saved['step'], 'seconds': round(saved['elapsed'], 1), 'parameters': sum(p.numel() for p in model.parameters()),
               'final_loss': history[-1]['loss'] if history else None, 'held_out': history[-1]['held_out'] if history else None, 'exported_from_checkpoint': True}
    torch.save({'state': model.state_dict(), 'used': used, 'cfg': cfg, 'figures': figures}, args.out + '.pt')
    export(model, used, cfg, args.family, args.out, figures)
    print(json.dumps(figures), file=sys.stderr)


if __name__ == '__main__':
    main()
