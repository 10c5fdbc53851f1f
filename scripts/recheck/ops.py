"""Row and element-wise ops in float64, straight from their definitions."""
import numpy as np

GELU_C = np.sqrt(2.0 / np.pi)
GELU_A = 0.044715


def gelu(x):
    """gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3) (Hendrycks and Gimpel, 2016)."""
    return 0.5 * x * (1.0 + np.tanh(GELU_C * (x + GELU_A * x**3)))


def gelu_grad(x):
    """d gelu / dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) du/dx."""
    t = np.tanh(GELU_C * (x + GELU_A * x**3))
    du = GELU_C * (1.0 + 3.0 * GELU_A * x**2)
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du


def layernorm(x, gamma, beta, dy, eps=1e-5):
    """LayerNorm over the last dimension with the biased variance, and its backward of <dy, y>.

    x, dy: [rows, h]; gamma, beta: [h]. Returns y, mean, rstd, dx, dgamma, dbeta.
    """
    mean = x.mean(axis=-1)
    centred = x - mean[:, None]
    rstd = 1.0 / np.sqrt((centred**2).mean(axis=-1) + eps)
    xhat = centred * rstd[:, None]
    y = xhat * gamma + beta
    # dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma: the two means
    # are the gradients through the mean and through the variance.
    g = dy * gamma
    dx = rstd[:, None] * (g - g.mean(axis=-1, keepdims=True) - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    return {"y": y, "mean": mean, "rstd": rstd, "dx": dx,
            "dgamma": (dy * xhat).sum(axis=0), "dbeta": dy.sum(axis=0)}


def logsumexp(z, axis=-1):
    m = z.max(axis=axis, keepdims=True)
    return (m + np.log(np.exp(z - m).sum(axis=axis, keepdims=True))).squeeze(axis)


def softmax(z, axis=-1):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def cross_entropy(logits, targets):
    """Mean cross-entropy of [rows, vocab] logits against integer targets [rows].

    row_loss_r = logsumexp(logits_r) - logits_r[target_r]; loss = mean_r row_loss_r;
    dlogits = (softmax(logits) - onehot(target)) / rows (the gradient of the mean).
    A target of -1 (ignore_index: a padding position) gives row loss 0 and a
    zero gradient row, and the mean runs over the other rows.
    """
    kept = targets >= 0
    rows, counted = logits.shape[0], max(int(kept.sum()), 1)
    picked = np.where(kept, logits[np.arange(rows), np.where(kept, targets, 0)], 0.0)
    row_loss = np.where(kept, logsumexp(logits) - picked, 0.0)
    dlogits = softmax(logits)
    dlogits[np.arange(rows)[kept], targets[kept]] -= 1.0
    dlogits[~kept] = 0.0
    return {"loss": np.array([row_loss.sum() / counted]), "row_loss": row_loss, "dlogits": dlogits / counted}
