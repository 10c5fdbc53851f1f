"""The MoE layer in float64 (Shazeer et al., 2017; Fedus et al., Switch Transformer, 2021),
with Megatron-Core's router conventions (megatron/core/transformer/moe/router.py, moe_utils.py):

    l = x W_r [T, E],  s = softmax(l) over all experts
    top-k: the k largest logits of a token, ties to the lower expert index
    p: softmax over the k selected logits, or s at them (pre_softmax)
    capacity: in each group of G consecutive tokens (a rank's tokens), expert e
      keeps C = ceil(G k / E * cf) of its slots: the highest p (ties: lower
      token) or the first tokens (position); a dropped slot contributes nothing
    y_t = sum over kept slots j of p_tj * gelu(x_t W1_e) W2_e,  e the slot's expert
    aux = aux_coeff E sum_i f_i P_i,  f_i = slots routed to i before dropping / (T k),
      P_i = sum_t s_ti / T
    z = z_coeff sum_t logsumexp(l_t)^2 / T

The backward is that of L = <dy, y> + aux + z; f_i, a count, has no gradient.
"""
import math

import numpy as np

from .ops import gelu, gelu_grad, logsumexp, softmax


def route(logits, topk, pre_softmax):
    """experts [T, k] by descending logit (ties: lower index), probabilities [T, k], scores [T, E]."""
    scores = softmax(logits)
    # A stable sort of -logits keeps equal logits in expert order.
    experts = np.argsort(-logits, axis=1, kind="stable")[:, :topk]
    chosen = np.take_along_axis(logits, experts, axis=1)
    probs = np.take_along_axis(scores, experts, axis=1) if pre_softmax else softmax(chosen)
    return experts, probs, scores


def capacity(group_tokens, topk, experts, capacity_factor):
    return math.ceil(group_tokens * topk / experts * capacity_factor)


def keep_mask(experts_of, probs, n_experts, drop, capacity_factor, group):
    """[T, k] bool: the slots capacity keeps (all of them when dropless)."""
    tokens, topk = experts_of.shape
    kept = np.ones_like(experts_of, dtype=bool)
    if drop == "none":
        return kept
    cap = capacity(group, topk, n_experts, capacity_factor)
    flat_e, flat_p, flat_kept = experts_of.reshape(-1), probs.reshape(-1), kept.reshape(-1)
    for start in range(0, tokens * topk, group * topk):
        slots = np.arange(start, min(start + group * topk, tokens * topk))
        for e in range(n_experts):
            mine = slots[flat_e[slots] == e]  # in token order
            if len(mine) <= cap:
                continue
            if drop == "probability":  # highest first; a stable sort leaves ties in token order
                mine = mine[np.argsort(-flat_p[mine], kind="stable")]
            elif drop != "position":
                raise ValueError(f"unknown drop policy {drop!r}")
            flat_kept[mine[cap:]] = False
    return flat_kept.reshape(tokens, topk)


def softmax_backward(y, dy):
    """Gradient through y = softmax(z) along the last axis."""
    return y * (dy - (y * dy).sum(axis=-1, keepdims=True))


def moe_layer(x, dy, router, w1, w2, *, topk, pre_softmax=False, drop="none", capacity_factor=0.0,
              group=None, aux_coeff=0.0, z_coeff=0.0):
    """Forward and backward. x, dy [T, h]; router [h, E]; w1 [E, h, f]; w2 [E, f, h].

    Returns y, dx, d_router, d_w1, d_w2, aux_loss, z_loss (losses as [1] arrays) and the routing.
    """
    tokens = x.shape[0]
    n_experts = router.shape[1]
    logits = x @ router
    experts_of, probs, scores = route(logits, topk, pre_softmax)
    kept = keep_mask(experts_of, probs, n_experts, drop, capacity_factor, group or tokens)

    y, dx = np.zeros_like(x), np.zeros_like(x)
    dw1, dw2 = np.zeros_like(w1), np.zeros_like(w2)
    dprobs = np.zeros_like(probs)  # dL/dp per slot; 0 where dropped
    for e in range(n_experts):
        tok, slot = np.nonzero((experts_of == e) & kept)
        if len(tok) == 0:
            continue
        xe, pe, dye = x[tok], probs[tok, slot][:, None], dy[tok]
        a = xe @ w1[e]          # [n, f]
        g = gelu(a)
        o = g @ w2[e]           # [n, h]: the expert's output before the probability
        np.add.at(y, tok, pe * o)
        dprobs[tok, slot] = (dye * o).sum(axis=1)
        do = pe * dye
        dw2[e] = g.T @ do
        da = (do @ w2[e].T) * gelu_grad(a)
        dw1[e] = xe.T @ da
        np.add.at(dx, tok, da @ w1[e].T)

    # dL/dlogits: through the probabilities, then the aux and z losses.
    dlogits = np.zeros_like(logits)
    if pre_softmax:
        dscores = np.zeros_like(scores)
        np.put_along_axis(dscores, experts_of, dprobs, axis=1)
        dlogits += softmax_backward(scores, dscores)
    else:
        np.put_along_axis(dlogits, experts_of, softmax_backward(probs, dprobs), axis=1)
    routed = np.bincount(experts_of.reshape(-1), minlength=n_experts) / (tokens * topk)  # f_i
    mean_score = scores.mean(axis=0)                                                        # P_i
    aux = aux_coeff * n_experts * float(routed @ mean_score)
    dlogits += softmax_backward(scores, np.broadcast_to(aux_coeff * n_experts * routed / tokens, scores.shape))
    lse = logsumexp(logits)
    z = z_coeff * float((lse**2).sum()) / tokens
    dlogits += (2.0 * z_coeff / tokens) * lse[:, None] * scores  # d lse_t / d l_t = s_t

    dx += dlogits @ router.T
    return {"y": y, "dx": dx, "d_router": x.T @ dlogits, "d_w1": dw1, "d_w2": dw2,
            "aux_loss": np.array([aux]), "z_loss": np.array([z]),
            "routing": {"experts": experts_of, "kept": kept}}
