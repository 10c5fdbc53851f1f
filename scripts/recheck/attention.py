"""Softmax attention in float64, forward and backward, from the math:

    S = Q K^T / sqrt(d)      (d: the head dim of q and k; entries a query may not see are -inf)
    P = softmax_j(S),  O = P V,  LSE_i = log sum_j exp(S_ij)
    dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(P * dP))
    dQ = dS K / sqrt(d),  dK = dS^T Q / sqrt(d)

Layout BSHD: q [b, sq, hq, d]; k [b, sk, hk, d]; v [b, sk, hk, dv]; dout, out
[b, sq, hq, dv]; lse [b, hq, sq]. dv is d but for multi-head latent attention
(MLA: DeepSeek-V2, 2024), whose values are narrower than its queries and keys.
Grouped-query attention: query head h reads kv head h // (hq / hk), so a kv
head's gradient sums over the query heads that read it (Ainslie et al., GQA, 2023).
"""
import numpy as np


def causal_visible(query_positions, keys):
    """[len(query_positions), keys]: key j is visible to the query at position i iff j <= i."""
    return np.arange(keys)[None, :] <= np.asarray(query_positions)[:, None]


def windowed_visible(query_positions, keys, window):
    """Causal with a sliding window: key j is visible to the query at position i iff i - window <= j <= i."""
    j, i = np.arange(keys)[None, :], np.asarray(query_positions)[:, None]
    return (j <= i) & (j >= i - window)


def band_visible(query_positions, keys, left=None, right=None):
    """No causal mask, a two-sided sliding window: key j is visible to the query at position i iff
    i - left <= j <= i + right (None: that side unbounded)."""
    j, i = np.arange(keys)[None, :], np.asarray(query_positions)[:, None]
    visible = np.ones((i.shape[0], keys), dtype=bool)
    if left is not None:
        visible &= j >= i - left
    if right is not None:
        visible &= j <= i + right
    return visible


def packed_visible(seq_lens, window=None):
    """Packed sequences laid end to end (THD): causal within each sequence (and within a sliding
    window there, if given), nothing across them."""
    sequence = np.repeat(np.arange(len(seq_lens)), seq_lens)
    total = int(np.sum(seq_lens))
    rows = np.arange(total)
    within = causal_visible(rows, total) if window is None else windowed_visible(rows, total, window)
    return (sequence[:, None] == sequence[None, :]) & within


def attention(q, k, v, dout, visible=None):
    """Forward and backward of softmax attention; visible: [sq, sk] bool, or None for every key.

    Returns out [b, sq, hq, dv], lse [b, hq, sq], dq like q, dk like k, dv like v.
    """
    b, sq, hq, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    d_v = v.shape[3]
    if hq % hk:
        raise ValueError(f"{hq} query heads are not a multiple of {hk} kv heads")
    if v.shape[:3] != k.shape[:3] or k.shape[3] != d or dout.shape != (b, sq, hq, d_v):
        raise ValueError(f"q {q.shape}, k {k.shape}, v {v.shape}, dout {dout.shape} do not fit one another")
    group = hq // hk
    scale = 1.0 / np.sqrt(d)
    out, dq = np.empty((b, sq, hq, d_v)), np.empty_like(q)
    lse = np.empty((b, hq, sq))
    dk, dv = np.empty_like(k), np.empty_like(v)
    for i in range(b):  # one batch row at a time: the score matrices are [hq, sq, sk]
        ke = np.repeat(k[i], group, axis=1)  # [sk, hq, d]: query head h gets kv head h // group
        ve = np.repeat(v[i], group, axis=1)
        s = np.einsum("qhd,khd->hqk", q[i], ke) * scale
        if visible is not None:
            s = np.where(visible[None], s, -np.inf)
        m = s.max(axis=-1, keepdims=True)
        e = np.exp(s - m)
        total = e.sum(axis=-1, keepdims=True)
        p = e / total
        lse[i] = (m + np.log(total))[..., 0]
        out[i] = np.einsum("hqk,khd->qhd", p, ve)
        dp = np.einsum("qhd,khd->hqk", dout[i], ve)
        ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
        dq[i] = np.einsum("hqk,khd->qhd", ds, ke) * scale
        dke = np.einsum("hqk,qhd->khd", ds, q[i]) * scale
        dve = np.einsum("hqk,qhd->khd", p, dout[i])
        dk[i] = dke.reshape(sk, hk, group, d).sum(axis=2)
        dv[i] = dve.reshape(sk, hk, group, d_v).sum(axis=2)
    return {"out": out, "lse": lse, "dq": dq, "dk": dk, "dv": dv}
