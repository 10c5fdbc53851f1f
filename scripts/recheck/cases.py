"""Which dumped cases are recomputed, and how: each covered (suite, case)
reads its inputs from the dump and returns its checked tensors by the names
sextant's checks give them.

A dump folder holds params.json (suite, case, id, params, ranks, dtype, ...),
every input as NAME.npy, and per checked tensor NAME.dist.npy, NAME.base.npy
and NAME.ref.npy (harness/check.cc). Inputs are the values rounded to the
test dtype (bf16 is written as the f32 of the same value), read here as float64.
"""
import numpy as np

from . import attention, moe, ops


def is_cp_variant(suite, params):
    """A case of the attention suite's CP variant table (kernels/attention/cp_variants.h):
    each records its variant and the sizes of its two stages."""
    return suite == "attention" and all(k in params for k in ("variant", "a2a_size", "p2p_size"))


class Skip(Exception):
    """A case, or an instance of one, that this recomputation does not cover."""


class Inconsistent(Exception):
    """Dumped inputs that contradict each other or the case's parameters."""


def head_dims(params, q, v):
    """Checks the dumped q and v against the case's head dims (v_head_dim: MLA; absent: head_dim)."""
    d = params["head_dim"]
    d_v = params.get("v_head_dim", d)
    if q.shape[3] != d or v.shape[3] != d_v:
        raise Inconsistent(f"q {q.shape}, v {v.shape} do not have head_dim={d}, v_head_dim={d_v}")


def zigzag_positions(n, sk):
    """A zigzag shard of CP size n over sk rows: rank 0's query positions
    (chunks 0 and 2n - 1 of 2n) and every key position in rank order (rank
    r holds chunks r and 2n - 1 - r), as suites/ops/attention.cc lays them out."""
    chunk = sk // (2 * n)
    rows = lambda chunks: np.concatenate([np.arange(c * chunk, (c + 1) * chunk) for c in chunks])
    return rows([0, 2 * n - 1]), rows([c for r in range(n) for c in (r, 2 * n - 1 - r)])


def ops_attention_zigzag(params, read):
    """A zigzag CP shard: its query rows and its keys in rank order, rows of
    the whole sequence the case dumps beside them; out, lse and dq."""
    q, k, v, dout = read("q"), read("k"), read("v"), read("dout")
    head_dims(params, q, v)
    q_pos, k_pos = zigzag_positions(params["zigzag_cp"], params["sk"])
    for name, block, rows in (("q", q, q_pos), ("dout", dout, q_pos), ("k", k, k_pos), ("v", v, k_pos)):
        if not np.array_equal(read(name + "_all")[:, rows], block):
            raise Inconsistent(f"{name} is not the zigzag rows of {name}_all")
    result = attention.attention(q, k, v, dout, k_pos[None, :] <= q_pos[:, None])
    del result["dk"], result["dv"]  # they would need every query row of the sequence
    result.update({f"{name}_by_pieces": t for name, t in list(result.items())})
    return result


def ops_attention(params, read):
    """An attention block; with sq < sk, the last sq query rows of a sequence of sk keys."""
    if params.get("zigzag_cp"):
        return ops_attention_zigzag(params, read)
    q, k, v, dout = read("q"), read("k"), read("v"), read("dout")
    head_dims(params, q, v)
    sq, sk, causal = params["sq"], params["sk"], params["causal"]
    offset = sk - sq  # the block's first query position
    if q.shape[1] != sq or k.shape[1] != sk:
        raise Inconsistent(f"q {q.shape}, k {k.shape} do not have sq={sq}, sk={sk} rows")
    if offset:
        # The block's rows must be those of the whole sequence the case dumps beside it.
        for name, block in (("q", q), ("dout", dout)):
            whole = read(name + "_all")
            if not np.array_equal(whole[:, offset:], block):
                raise Inconsistent(f"{name} is not rows [{offset}, {sk}) of {name}_all")
    if causal and "window" in params:
        visible = attention.windowed_visible(np.arange(offset, sk), sk, params["window"])
    elif "window" in params or "window_right" in params:
        visible = attention.band_visible(np.arange(offset, sk), sk, params.get("window"), params.get("window_right"))
    else:
        visible = attention.causal_visible(np.arange(offset, sk), sk) if causal else None
    result = attention.attention(q, k, v, dout, visible)
    if offset:  # dk and dv would need every query row of the sequence
        del result["dk"], result["dv"]
    # The piece driver's results (NAME_by_pieces) are the same block by another path: the same math.
    result.update({f"{name}_by_pieces": t for name, t in list(result.items())})
    return result


# Tables checked exactly (an element differs or it does not), dumped as
# NAME.dist, NAME.base and NAME.ref like a checked tensor but recorded in the
# results as a pass or a failure, not as errors.
EXACT = {"routing"}


def cp_attention(params, read):
    """The attention suite's check: every token row, padding dropped; with
    reference=spot only the sampled query rows (query_rows), for out, lse and dq."""
    q, k, v, dout = read("q"), read("k"), read("v"), read("dout")
    head_dims(params, q, v)
    seq_lens = params.get("seq_lens")
    if seq_lens:
        if sum(seq_lens) != q.shape[1]:
            raise Inconsistent(f"seq_lens {seq_lens} do not sum to the {q.shape[1]} token rows of q")
        visible = attention.packed_visible(seq_lens, params.get("window"))
    elif params["causal"] and "window" in params:
        visible = attention.windowed_visible(np.arange(q.shape[1]), k.shape[1], params["window"])
    elif params["causal"]:
        visible = attention.causal_visible(np.arange(q.shape[1]), k.shape[1])
    elif "window" in params or "window_right" in params:
        visible = attention.band_visible(np.arange(q.shape[1]), k.shape[1], params.get("window"),
                                         params.get("window_right"))
    else:
        visible = None
    if params.get("reference", "full") == "full":
        return attention.attention(q, k, v, dout, visible)
    rows = read("query_rows").astype(np.int64)
    if rows.min(initial=0) < 0 or rows.max(initial=0) >= q.shape[1]:
        raise Inconsistent(f"query_rows outside the {q.shape[1]} token rows")
    result = attention.attention(q[:, rows], k, v, dout[:, rows], None if visible is None else visible[rows])
    return {name: result[name] for name in ("out", "lse", "dq")}  # dk and dv need every query row


def dynamic_cp(params, read):
    """Dynamic CP: every sequence of every microbatch end to end, attended on its own, once
    for the static grouping and once for the dynamic one."""
    q, k, v, dout = read("q"), read("k"), read("v"), read("dout")
    head_dims(params, q, v)
    seq_lens = read("seq_lens").astype(np.int64)
    if seq_lens.sum() != q.shape[1]:
        raise Inconsistent(f"seq_lens sum to {seq_lens.sum()}, not the {q.shape[1]} token rows of q")
    result = attention.attention(q, k, v, dout, attention.packed_visible(seq_lens, params.get("window")))
    return {f"{grouping}.{name}": t for grouping in ("static", "dynamic") for name, t in result.items()}


def routing_table(routing):
    """[T, 2k]: each token's (expert, kept) pairs in ascending order, as sextant dumps them."""
    experts, kept = routing["experts"], routing["kept"].astype(np.float64)
    pairs = np.stack([experts.astype(np.float64), kept], axis=-1)  # [T, k, 2]
    order = np.lexsort((pairs[..., 1], pairs[..., 0]), axis=-1)
    return np.take_along_axis(pairs, order[..., None], axis=1).reshape(experts.shape[0], -1)


def moe_layer(params, read, ranks):
    tokens = params["tokens"]
    if tokens % ranks:
        raise Inconsistent(f"tokens={tokens} is not a multiple of the {ranks} ranks")
    drop = params["drop_policy"]
    result = moe.moe_layer(read("x"), read("dy"), read("router"), read("w1"), read("w2"), topk=params["topk"],
                           pre_softmax=params["pre_softmax"], drop=drop,
                           capacity_factor=params["capacity_factor"] if drop != "none" else 0.0,
                           group=tokens // ranks,  # capacity groups are each rank's tokens
                           aux_coeff=params["aux_coeff"], z_coeff=params["z_coeff"])
    result["routing"] = routing_table(result["routing"])
    # sextant checks the losses only when their coefficient is set.
    if not params["aux_coeff"] > 0:
        del result["aux_loss"]
    if not params["z_coeff"] > 0:
        del result["z_loss"]
    return result


def layernorm(params, read):
    return ops.layernorm(read("x"), read("gamma"), read("beta"), read("dy"))


def gelu(params, read):
    x, dy = read("x"), read("dy")
    return {"y": ops.gelu(x), "dx": dy * ops.gelu_grad(x)}


def cross_entropy(params, read):
    logits, targets = read("logits"), read("targets")
    ids = targets.astype(np.int64)
    if not np.array_equal(ids, targets) or ids.min(initial=0) < -1 or ids.max(initial=0) >= logits.shape[-1]:
        raise Inconsistent(f"targets are not token ids in [0, {logits.shape[-1]}) or -1 (ignored)")
    return ops.cross_entropy(logits, ids)


def recompute(meta, read):
    """{tensor name: float64 array} for a dumped case; Skip when not covered.

    meta: params.json; read(name): the dumped input NAME.npy as float64.
    """
    suite, case, params = meta["suite"], meta["case"], meta["params"]
    if suite == "ops" and case == "attention":
        return ops_attention(params, read)
    if suite == "ops" and case == "layernorm":
        return layernorm(params, read)
    if suite == "ops" and case == "gelu":
        return gelu(params, read)
    if suite == "ops" and case == "cross_entropy":
        return cross_entropy(params, read)
    if suite == "attention" and case == "dynamic_cp":
        return dynamic_cp(params, read)
    if is_cp_variant(suite, params):
        return cp_attention(params, read)
    if suite == "moe" and case == "layer":
        return moe_layer(params, read, meta["ranks"])
    raise Skip("not re-implemented")
