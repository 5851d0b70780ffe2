"""PyTorch versions of the two architectures tsglang serves, for training the demo checkpoints (dev-time only).

Same math as tsglang's models (src/models/minimax_m2.ts, src/models/deepseek_v32.ts; model-spec.md §2.4, §3) and
the same tensor names, so the trained parameters export 1:1 to a Hugging Face checkpoint tsglang loads:
  - MiniMax-M2: q/k RMSNorm over all heads, partial NeoX RoPE, GQA, sigmoid-routed top-k MoE (bias for selection
    only, renormalized), no shared expert.
  - DeepSeek-V3.2: MLA (q LoRA, latent KV, interleaved RoPE on the rope part), dense first layer, sigmoid-routed
    top-k MoE with a shared expert and routed_scaling_factor, and the MTP (nextn) layer
    `x = eh_proj([enorm(embed(t)) | hnorm(h)])` → decoder layer → shared_head.norm → the target's lm_head.
    The DSA indexer selects every key while a sequence is shorter than index_topk (2048 in the demo config), so
    training runs dense attention; the indexer weights are exported untrained.
Quantization-aware: every weight the checkpoint stores as FP8 (128x128 block scales, e4m3) or BF16 is used rounded
that way in the forward pass (straight-through gradients), so the exported model computes what was trained.
The vocabulary is compact: only ids the corpus uses have rows, plus one shared row for every other id ("other").
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

BLOCK = 128


def e4m3_round(y):
    """Rounds to the nearest float8 e4m3fn value (ties to even, saturating at ±448). y: any shape, f32."""
    a = y.abs().clamp(max=448.0)
    e = torch.floor(torch.log2(a.clamp(min=2.0 ** -10))).clamp(min=-6.0)
    step = torch.pow(2.0, e - 3.0)
    return torch.sign(y) * (torch.round(a / step) * step).clamp(max=448.0)


def fp8_block_quant(w, pow2):
    """Block FP8 of a [O, I] weight: scale = amax/448 per 128x128 block (next power of two when pow2, as UE8M0).

    Returns (dequantized weight [O, I], scales [ceil(O/128), ceil(I/128)], e4m3 values w/scale rounded [O, I]).
    Same rule as tsglang's quantizeFp8Block (src/executor/tiny_weights.ts).
    """
    O, I = w.shape
    so, si = math.ceil(O / BLOCK), math.ceil(I / BLOCK)
    wp = F.pad(w, (0, si * BLOCK - I, 0, so * BLOCK - O))
    blocks = wp.reshape(so, BLOCK, si, BLOCK)
    amax = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-10)
    scale = amax / 448.0
    if pow2:
        scale = torch.pow(2.0, torch.ceil(torch.log2(scale)))
    codes = e4m3_round(blocks / scale[:, None, :, None])
    q = codes * scale[:, None, :, None]
    return q.reshape(so * BLOCK, si * BLOCK)[:O, :I], scale, codes.reshape(so * BLOCK, si * BLOCK)[:O, :I]


def ste(w, q):
    """Straight-through estimator: the value of q, the gradient of w."""
    return w + (q - w).detach()


class QParam(nn.Module):
    """A parameter with its checkpoint storage: 'fp8' (block-quantized 2-D), 'bf16' or 'f32'.

    QParam.qat (class-wide): when False the forward uses the f32 value (the first part of training, cheaper).
    """

    qat = True

    def __init__(self, shape, storage, init_std, pow2=False, init_value=None):
        super().__init__()
        self.storage = storage
        self.pow2 = pow2
        t = torch.full(shape, float(init_value)) if init_value is not None else torch.randn(shape) * init_std
        self.w = nn.Parameter(t)

    def forward(self):
        if not QParam.qat:
            return self.w
        if self.storage == 'fp8':
            return ste(self.w, fp8_block_quant(self.w, self.pow2)[0])
        if self.storage == 'bf16':
            return ste(self.w, self.w.to(torch.bfloat16).to(torch.float32))
        return self.w


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


_ROPE = {}


def rope_tables(positions, dim, theta):
    """cos/sin [T, dim/2] of the default inverse frequencies theta^(-2i/dim) (model-spec §1.5), for positions 0..T-1."""
    key = (positions.shape[0], dim, theta)
    if key not in _ROPE:
        _ROPE[key] = _rope_tables(positions, dim, theta)
    return _ROPE[key]


def _rope_tables(positions, dim, theta):
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    ang = positions.to(torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def _bcast(t):
    """A rope table [T, r] (shared) or [B, T, r] (per row) as [1|B, T, 1, r]."""
    return t[None, :, None, :] if t.dim() == 2 else t[:, :, None, :]


def rope_neox(x, cos, sin, rd):
    """NeoX (half-split) RoPE on the first rd dims of the last axis. x [B, T, H, hd]; cos/sin [T, rd/2]."""
    r, p = x[..., :rd], x[..., rd:]
    x1, x2 = r[..., : rd // 2], r[..., rd // 2:]
    c, s = _bcast(cos), _bcast(sin)
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, p], dim=-1)


def rope_interleaved(x, cos, sin):
    """GPT-J (interleaved pairs) RoPE over the whole last axis. x [B, T, H, d]; cos/sin [T, d/2]."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    c, s = _bcast(cos), _bcast(sin)
    return torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).flatten(-2)


_MASKS = {}


def causal_attention(q, k, v, scale, qpos=None, chunk=96):
    """Causal softmax attention. q [B, Tq, H, dq], k [B, T, Hk, dq], v [B, T, Hk, dv] (Hk divides H; query head h reads
    key head h // (H / Hk)) → [B, Tq, H, dv].

    qpos [B, Tq] (long): the positions of the queries when they are a subset of the T positions (the last layer only
    needs the rows that have a training target); None: Tq = T, query i at position i, computed in blocks of `chunk`
    queries that each read only the keys up to their last position (skips most of the masked half).
    """
    B, Tq, H, dq = q.shape
    T, Hk, dv = k.shape[1], k.shape[2], v.shape[3]
    G = H // Hk
    q = (q * scale).reshape(B, Tq, Hk, G, dq).permute(0, 2, 3, 1, 4)  # [B, Hk, G, Tq, dq]
    kt = k.permute(0, 2, 3, 1)  # [B, Hk, dq, T]
    v = v.transpose(1, 2)  # [B, Hk, T, dv]
    if qpos is not None:
        s = torch.matmul(q.reshape(B, Hk, G * Tq, dq), kt).view(B, Hk, G, Tq, T)
        mask = (torch.arange(T)[None, None, :] > qpos[:, :, None])[:, None, None]
        p = torch.softmax(s.masked_fill(mask, float('-inf')), dim=-1)
        o = torch.matmul(p.view(B, Hk, G * Tq, T), v).view(B, Hk, G, Tq, dv)
    else:
        outs = []
        for s0 in range(0, Tq, chunk):
            e = min(Tq, s0 + chunk)
            n = e - s0
            s = torch.matmul(q[:, :, :, s0:e].reshape(B, Hk, G * n, dq), kt[..., :e]).view(B, Hk, G, n, e)
            key = (n, e)
            if key not in _MASKS:
                _MASKS[key] = torch.arange(e)[None, :] > torch.arange(s0, e)[:, None]
            p = torch.softmax(s.masked_fill(_MASKS[key], float('-inf')), dim=-1)
            outs.append(torch.matmul(p.view(B, Hk, G * n, e), v[:, :, :e]).view(B, Hk, G, n, dv))
        o = torch.cat(outs, dim=3) if len(outs) > 1 else outs[0]
    return o.permute(0, 3, 1, 2, 4).reshape(B, Tq, H, dv)


def gather_rows(x, qpos):
    """x [B, T, ...] → the rows at qpos [B, Tq] → [B, Tq, ...]."""
    idx = qpos.reshape(qpos.shape + (1,) * (x.dim() - 2)).expand(qpos.shape + x.shape[2:])
    return x.gather(1, idx)


class Params(nn.Module):
    """Named QParams (checkpoint names with '.' stored as '__')."""

    def __init__(self):
        super().__init__()
        self.p = nn.ModuleDict()

    def add(self, name, param):
        self.p[name.replace('.', '__')] = param

    def get(self, name):
        return self.p[name.replace('.', '__')]()

    def named(self):
        """(checkpoint name, QParam) pairs."""
        return [(k.replace('__', '.'), v) for k, v in self.p.items()]


def moe(P, prefix, x, cfg, names, shared):
    """Routed SwiGLU experts (+ optional shared expert) of one layer. x [B, T, D] → [B, T, D].

    names: (router weight, correction bias, experts prefix, gate, up, down) checkpoint names under `prefix`.
    Routing as tsglang's selectExperts / biasedGroupedTopK with one group: sigmoid scores, top-k of score + bias,
    weights = selected scores / their sum × routed_scaling_factor.
    """
    router, bias, experts, g, u, d = names
    B, T, D = x.shape
    flat = x.reshape(-1, D)
    scores = torch.sigmoid(flat @ P.get(prefix + router).t())
    _, idx = torch.topk(scores + P.get(prefix + bias).detach(), cfg['top_k'], dim=-1)
    sel = scores.gather(1, idx)
    weights = sel / sel.sum(-1, keepdim=True) * cfg['scaling']
    out = torch.zeros_like(flat)
    for e in range(cfg['num_experts']):
        rows, slot = (idx == e).nonzero(as_tuple=True)
        if rows.numel() == 0:
            continue
        xe = flat[rows]
        q = f'{prefix}{experts}.{e}.'
        h = F.silu(xe @ P.get(q + g).t()) * (xe @ P.get(q + u).t())
        out.index_add_(0, rows, (h @ P.get(q + d).t()) * weights[rows, slot][:, None])
    if shared is not None:
        q = prefix + shared + '.'
        out = out + (F.silu(flat @ P.get(q + g).t()) * (flat @ P.get(q + u).t())) @ P.get(q + d).t()
    return out.reshape(B, T, D)


class MiniMaxM2(nn.Module):
    """MiniMaxM2ForCausalLM (tsglang src/models/minimax_m2.ts) over a compact vocabulary of V rows."""

    def __init__(self, c, V, pow2=False, tie=False, qk_norm_init=1.0):
        super().__init__()
        self.c, self.V = c, V
        D, H, K, hd, I, E = c['hidden_size'], c['num_attention_heads'], c['num_key_value_heads'], c['head_dim'], c['intermediate_size'], c['num_local_experts']
        P = self.P = Params()
        std = 0.02
        out_std = std / math.sqrt(2 * c['num_hidden_layers'])
        embed = QParam((V, D), 'bf16', std)
        P.add('model.embed_tokens.weight', embed)
        for i in range(c['num_hidden_layers']):
            p = f'model.layers.{i}.'
            P.add(p + 'input_layernorm.weight', QParam((D,), 'bf16', 0, init_value=1.0))
            P.add(p + 'self_attn.q_proj.weight', QParam((H * hd, D), 'fp8', std, pow2))
            P.add(p + 'self_attn.k_proj.weight', QParam((K * hd, D), 'fp8', std, pow2))
            P.add(p + 'self_attn.v_proj.weight', QParam((K * hd, D), 'fp8', std, pow2))
            P.add(p + 'self_attn.o_proj.weight', QParam((D, H * hd), 'fp8', out_std, pow2))
            # q/k RMSNorm over all heads bounds each head's logits (|q_h|, |k_h| ≈ sqrt(head_dim)); a larger initial
            # weight lets attention be sharp (copying needs one key of hundreds) from the start
            P.add(p + 'self_attn.q_norm.weight', QParam((H * hd,), 'bf16', 0, init_value=qk_norm_init))
            P.add(p + 'self_attn.k_norm.weight', QParam((K * hd,), 'bf16', 0, init_value=qk_norm_init))
            P.add(p + 'post_attention_layernorm.weight', QParam((D,), 'bf16', 0, init_value=1.0))
            P.add(p + 'block_sparse_moe.gate.weight', QParam((E, D), 'f32', std))
            P.add(p + 'block_sparse_moe.e_score_correction_bias', QParam((E,), 'f32', 0, init_value=0.0))
            for e in range(E):
                q = f'{p}block_sparse_moe.experts.{e}.'
                P.add(q + 'w1.weight', QParam((I, D), 'fp8', std, pow2))
                P.add(q + 'w3.weight', QParam((I, D), 'fp8', std, pow2))
                P.add(q + 'w2.weight', QParam((D, I), 'fp8', out_std, pow2))
        P.add('model.norm.weight', QParam((D,), 'bf16', 0, init_value=1.0))
        # tie: lm_head trained as the embedding itself (both checkpoint tensors hold the same values): copying a token
        # then needs no per-token output row of its own
        P.add('lm_head.weight', embed if tie else QParam((V, D), 'bf16', std))
        self.moe_cfg = {'top_k': c['num_experts_per_tok'], 'scaling': c.get('routed_scaling_factor', 1.0), 'num_experts': E}

    def forward(self, ids, qpos=None):
        """ids [B, T] compact ids → final-norm hidden states [B, T, D], or [B, Tq, D] at the positions qpos [B, Tq]
        (the last layer then runs only those rows)."""
        c, P = self.c, self.P
        H, K, hd, rd, eps, L = c['num_attention_heads'], c['num_key_value_heads'], c['head_dim'], c['rotary_dim'], c['rms_norm_eps'], c['num_hidden_layers']
        B, T = ids.shape
        x = F.embedding(ids, P.get('model.embed_tokens.weight'))
        cos, sin = rope_tables(torch.arange(T), rd, c['rope_theta'])
        for i in range(L):
            p = f'model.layers.{i}.'
            sub = qpos if i == L - 1 else None
            a = rms_norm(x, P.get(p + 'input_layernorm.weight'), eps)
            aq = a if sub is None else gather_rows(a, sub)
            Tq = aq.shape[1]
            q = rms_norm(aq @ P.get(p + 'self_attn.q_proj.weight').t(), P.get(p + 'self_attn.q_norm.weight'), eps)
            k = rms_norm(a @ P.get(p + 'self_attn.k_proj.weight').t(), P.get(p + 'self_attn.k_norm.weight'), eps)
            v = a @ P.get(p + 'self_attn.v_proj.weight').t()
            qc, qs = (cos, sin) if sub is None else (cos[sub], sin[sub])
            q = rope_neox(q.view(B, Tq, H, hd), qc, qs, rd)
            k = rope_neox(k.view(B, T, K, hd), cos, sin, rd)
            o = causal_attention(q, k, v.view(B, T, K, hd), 1.0 / math.sqrt(hd), sub).reshape(B, Tq, H * hd)
            x = (x if sub is None else gather_rows(x, sub)) + o @ P.get(p + 'self_attn.o_proj.weight').t()
            m = rms_norm(x, P.get(p + 'post_attention_layernorm.weight'), eps)
            x = x + moe(P, p + 'block_sparse_moe.', m, self.moe_cfg, ('gate.weight', 'e_score_correction_bias', 'experts', 'w1.weight', 'w3.weight', 'w2.weight'), None)
        return rms_norm(x, P.get('model.norm.weight'), eps)



class DeepseekV32(nn.Module):
    """DeepseekV32ForCausalLM (tsglang src/models/deepseek_v32.ts) with its MTP layer, compact vocabulary of V rows."""

    def __init__(self, c, V, pow2=True, tie=False):
        super().__init__()
        self.c, self.V = c, V
        D, L = c['hidden_size'], c['num_hidden_layers']
        P = self.P = Params()
        self.std = std = 0.02
        self.out_std = std / math.sqrt(2 * (L + 1))
        self.pow2 = pow2
        embed = QParam((V, D), 'bf16', std)
        P.add('model.embed_tokens.weight', embed)
        for i in range(L + 1):
            self._layer(i)
        P.add('model.norm.weight', QParam((D,), 'bf16', 0, init_value=1.0))
        P.add('lm_head.weight', embed if tie else QParam((V, D), 'bf16', std))
        m = f'model.layers.{L}.'
        for n in ('enorm.weight', 'hnorm.weight', 'shared_head.norm.weight'):
            P.add(m + n, QParam((D,), 'bf16', 0, init_value=1.0))
        P.add(m + 'eh_proj.weight', QParam((D, 2 * D), 'bf16', std))
        self.moe_cfg = {'top_k': c['num_experts_per_tok'], 'scaling': c['routed_scaling_factor'], 'num_experts': c['n_routed_experts']}

    def _layer(self, i):
        c, P, std, pow2 = self.c, self.P, self.std, self.pow2
        D, H, qr, R = c['hidden_size'], c['num_attention_heads'], c['q_lora_rank'], c['kv_lora_rank']
        dn, dr, dv = c['qk_nope_head_dim'], c['qk_rope_head_dim'], c['v_head_dim']
        p = f'model.layers.{i}.'
        one = lambda n: QParam((n,), 'bf16', 0, init_value=1.0)
        fp8 = lambda o, k, s=std: QParam((o, k), 'fp8', s, pow2)
        P.add(p + 'input_layernorm.weight', one(D))
        P.add(p + 'self_attn.q_a_proj.weight', fp8(qr, D))
        P.add(p + 'self_attn.q_a_layernorm.weight', one(qr))
        P.add(p + 'self_attn.q_b_proj.weight', fp8(H * (dn + dr), qr))
        P.add(p + 'self_attn.kv_a_proj_with_mqa.weight', fp8(R + dr, D))
        P.add(p + 'self_attn.kv_a_layernorm.weight', one(R))
        P.add(p + 'self_attn.kv_b_proj.weight', fp8(H * (dn + dv), R))
        P.add(p + 'self_attn.o_proj.weight', fp8(D, H * dv, self.out_std))
        ni, hi = c['index_n_heads'], c['index_head_dim']
        # the DSA indexer: exported untrained (it selects every key below index_topk tokens)
        P.add(p + 'self_attn.indexer.wq_b.weight', fp8(ni * hi, qr))
        P.add(p + 'self_attn.indexer.wk.weight', fp8(hi, D))
        P.add(p + 'self_attn.indexer.k_norm.weight', QParam((hi,), 'f32', 0, init_value=1.0))
        P.add(p + 'self_attn.indexer.k_norm.bias', QParam((hi,), 'f32', 0, init_value=0.0))
        P.add(p + 'self_attn.indexer.weights_proj.weight', QParam((ni, D), 'bf16', std))
        P.add(p + 'post_attention_layernorm.weight', one(D))
        if i < c['first_k_dense_replace']:
            I = c['intermediate_size']
            P.add(p + 'mlp.gate_proj.weight', fp8(I, D))
            P.add(p + 'mlp.up_proj.weight', fp8(I, D))
            P.add(p + 'mlp.down_proj.weight', fp8(D, I, self.out_std))
        else:
            E, Im = c['n_routed_experts'], c['moe_intermediate_size']
            P.add(p + 'mlp.gate.weight', QParam((E, D), 'bf16', std))
            P.add(p + 'mlp.gate.e_score_correction_bias', QParam((E,), 'f32', 0, init_value=0.0))
            for e in range(E):
                q = f'{p}mlp.experts.{e}.'
                P.add(q + 'gate_proj.weight', fp8(Im, D))
                P.add(q + 'up_proj.weight', fp8(Im, D))
                P.add(q + 'down_proj.weight', fp8(D, Im, self.out_std))
            Is = c['n_shared_experts'] * Im
            P.add(p + 'mlp.shared_experts.gate_proj.weight', fp8(Is, D))
            P.add(p + 'mlp.shared_experts.up_proj.weight', fp8(Is, D))
            P.add(p + 'mlp.shared_experts.down_proj.weight', fp8(D, Is, self.out_std))

    def decoder_layer(self, i, x, cos, sin, qpos=None):
        """One decoder layer (model-spec §3.6, MLA naive form §3.7 with dense attention). x [B, T, D] → [B, T, D], or
        [B, Tq, D] at the positions qpos [B, Tq] (only those rows' queries and FFN run)."""
        c, P = self.c, self.P
        eps, H = c['rms_norm_eps'], c['num_attention_heads']
        dn, dr, dv, R = c['qk_nope_head_dim'], c['qk_rope_head_dim'], c['v_head_dim'], c['kv_lora_rank']
        B, T, _ = x.shape
        p = f'model.layers.{i}.'
        a = rms_norm(x, P.get(p + 'input_layernorm.weight'), eps)
        aq = a if qpos is None else gather_rows(a, qpos)
        Tq = aq.shape[1]
        cq = rms_norm(aq @ P.get(p + 'self_attn.q_a_proj.weight').t(), P.get(p + 'self_attn.q_a_layernorm.weight'), eps)
        q = (cq @ P.get(p + 'self_attn.q_b_proj.weight').t()).view(B, Tq, H, dn + dr)
        kv = a @ P.get(p + 'self_attn.kv_a_proj_with_mqa.weight').t()
        ckv = rms_norm(kv[..., :R], P.get(p + 'self_attn.kv_a_layernorm.weight'), eps)
        krope = rope_interleaved(kv[..., R:].view(B, T, 1, dr), cos, sin)
        qrope = rope_interleaved(q[..., dn:], *((cos, sin) if qpos is None else (cos[qpos], sin[qpos])))
        kvb = (ckv @ P.get(p + 'self_attn.kv_b_proj.weight').t()).view(B, T, H, dn + dv)
        k = torch.cat([kvb[..., :dn], krope.expand(B, T, H, dr)], dim=-1)
        qf = torch.cat([q[..., :dn], qrope], dim=-1)
        o = causal_attention(qf, k, kvb[..., dn:], 1.0 / math.sqrt(dn + dr), qpos).reshape(B, Tq, H * dv)
        x = (x if qpos is None else gather_rows(x, qpos)) + o @ P.get(p + 'self_attn.o_proj.weight').t()
        m = rms_norm(x, P.get(p + 'post_attention_layernorm.weight'), eps)
        if i < c['first_k_dense_replace']:
            y = (F.silu(m @ P.get(p + 'mlp.gate_proj.weight').t()) * (m @ P.get(p + 'mlp.up_proj.weight').t())) @ P.get(p + 'mlp.down_proj.weight').t()
        else:
            y = moe(P, p + 'mlp.', m, self.moe_cfg, ('gate.weight', 'gate.e_score_correction_bias', 'experts', 'gate_proj.weight', 'up_proj.weight', 'down_proj.weight'), 'shared_experts')
        return x + y

    def rope(self, T):
        return rope_tables(torch.arange(T), self.c['qk_rope_head_dim'], self.c['rope_theta'])

    def forward(self, ids, qpos=None):
        """ids [B, T] compact ids → final-norm hidden states [B, T, D] (or [B, Tq, D] at the positions qpos [B, Tq]:
        the last layer runs only those rows)."""
        cos, sin = self.rope(ids.shape[1])
        x = F.embedding(ids, self.P.get('model.embed_tokens.weight'))
        L = self.c['num_hidden_layers']
        for i in range(L):
            x = self.decoder_layer(i, x, cos, sin, qpos if i == L - 1 else None)
        return rms_norm(x, self.P.get('model.norm.weight'), self.c['rms_norm_eps'])

    def mtp(self, ids_next, h, qpos=None):
        """The MTP layer (model-spec §3.10.2): ids_next [B, T] (token i+1), h [B, T, D] → shared_head.norm output
        [B, T, D] (or [B, Tq, D] at the positions qpos [B, Tq])."""
        L, eps, P = self.c['num_hidden_layers'], self.c['rms_norm_eps'], self.P
        m = f'model.layers.{L}.'
        e = rms_norm(F.embedding(ids_next, P.get('model.embed_tokens.weight')), P.get(m + 'enorm.weight'), eps)
        u = torch.cat([e, rms_norm(h, P.get(m + 'hnorm.weight'), eps)], dim=-1)
        cos, sin = self.rope(ids_next.shape[1])
        x = self.decoder_layer(L, u @ P.get(m + 'eh_proj.weight').t(), cos, sin, qpos)
        return rms_norm(x, P.get(m + 'shared_head.norm.weight'), eps)
