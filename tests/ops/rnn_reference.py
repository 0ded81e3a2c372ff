"""A numpy reference of RNN, GRU and LSTM with every attribute the ONNX spec defines.

onnx.reference ignores sequence_lens, clip, input_forget and most activations, so the recurrent op
tests compare with this reference instead; the reference itself is checked against onnxruntime in
the tests. Semantics (onnxruntime's): activation alpha/beta values are consumed in order by the
activations that take them; a reverse direction runs each batch entry backwards over its own valid
length; Y is zero past a sequence's length and the final states are those of its last valid step
(zero for an empty sequence).
"""

from __future__ import annotations

import numpy as np

# activation -> (number of alpha values, number of beta values, default alpha, default beta)
ACT_ARGS = {
    "relu": (0, 0, 0.0, 0.0), "tanh": (0, 0, 0.0, 0.0), "sigmoid": (0, 0, 0.0, 0.0),
    "affine": (1, 1, 1.0, 0.0), "leakyrelu": (1, 0, 0.01, 0.0), "thresholdedrelu": (1, 0, 1.0, 0.0),
    "scaledtanh": (1, 1, 1.0, 1.0), "hardsigmoid": (1, 1, 0.2, 0.5), "elu": (1, 0, 1.0, 0.0),
    "softsign": (0, 0, 0.0, 0.0), "softplus": (0, 0, 0.0, 0.0),
}
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def activation(name: str, alpha: float, beta: float):
    n = name.lower()
    return {
        "relu": lambda x: np.maximum(x, 0),
        "tanh": np.tanh,
        "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
        "affine": lambda x: alpha * x + beta,
        "leakyrelu": lambda x: np.where(x >= 0, x, alpha * x),
        "thresholdedrelu": lambda x: np.where(x > alpha, x, 0),
        "scaledtanh": lambda x: alpha * np.tanh(beta * x),
        "hardsigmoid": lambda x: np.clip(alpha * x + beta, 0, 1),
        "elu": lambda x: np.where(x >= 0, x, alpha * (np.exp(x) - 1)),
        "softsign": lambda x: x / (1 + np.abs(x)),
        "softplus": lambda x: np.log1p(np.exp(x)),
    }[n]


def activations(op: str, names: list[str] | None, alphas: list[float] | None, betas: list[float] | None,
                num_dir: int) -> list[list]:
    """Per direction, the activation functions (f[, g[, h]]) with alpha/beta bound."""
    names = names or DEFAULT_ACTS[op] * num_dir
    alphas, betas = list(alphas or []), list(betas or [])
    fns = []
    for n in names:
        na, nb, da, db = ACT_ARGS[n.lower()]
        a = alphas.pop(0) if na and alphas else da
        b = betas.pop(0) if nb and betas else db
        fns.append(activation(n, a, b))
    k = len(DEFAULT_ACTS[op])
    return [fns[d * k:(d + 1) * k] for d in range(num_dir)]


def run(op: str, X, W, R, B=None, seq_lens=None, h0=None, c0=None, P=None, *, hidden_size=None,
        direction="forward", layout=0, clip=None, input_forget=0, linear_before_reset=0,
        acts=None, alphas=None, betas=None):
    """Outputs (Y, Y_h[, Y_c]) of ``op`` computed in float64, cast to X's dtype."""
    dt = X.dtype
    X, W, R = (np.asarray(a, np.float64) for a in (X, W, R))
    if layout:
        X = X.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    T, N, _ = X.shape
    D, H, G = W.shape[0], R.shape[-1], GATES[op]
    B = np.zeros((D, 2 * G * H)) if B is None else np.asarray(B, np.float64)
    P = np.zeros((D, 3 * H)) if P is None else np.asarray(P, np.float64)
    h0 = np.zeros((D, N, H)) if h0 is None else np.asarray(h0, np.float64)
    c0 = np.zeros((D, N, H)) if c0 is None else np.asarray(c0, np.float64)
    lens = np.full(N, T) if seq_lens is None else np.asarray(seq_lens)
    fns = activations(op, acts, alphas, betas, D)
    cl = (lambda v: np.clip(v, -clip, clip)) if clip is not None else (lambda v: v)
    Y, Yh, Yc = np.zeros((T, D, N, H)), np.zeros((D, N, H)), np.zeros((D, N, H))
    for d in range(D):
        rev = direction == "reverse" or d == 1
        f = fns[d]
        w, r, wb, rb, p = W[d], R[d], B[d, :G * H], B[d, G * H:], P[d]
        for b in range(N):
            h, c = h0[d, b].copy(), c0[d, b].copy()
            steps = range(lens[b] - 1, -1, -1) if rev else range(lens[b])
            for t in steps:
                x = X[t, b]
                if op == "RNN":
                    h = f[0](cl(x @ w.T + h @ r.T + wb + rb))
                elif op == "GRU":
                    gx, gh = x @ w.T + wb, h @ r.T + rb
                    z = f[0](cl(gx[:H] + gh[:H]))
                    rr = f[0](cl(gx[H:2 * H] + gh[H:2 * H]))
                    if linear_before_reset:
                        hh = f[1](cl(gx[2 * H:] + rr * gh[2 * H:]))
                    else:
                        hh = f[1](cl(gx[2 * H:] + (rr * h) @ r[2 * H:].T + rb[2 * H:]))
                    h = (1 - z) * hh + z * h
                else:
                    g = x @ w.T + h @ r.T + wb + rb
                    i = f[0](cl(g[:H] + p[:H] * c))
                    fg = 1 - i if input_forget else f[0](cl(g[2 * H:3 * H] + p[2 * H:] * c))
                    c = fg * c + i * f[1](cl(g[3 * H:]))
                    o = f[0](cl(g[H:2 * H] + p[H:2 * H] * c))
                    h = o * f[2](c)
                Y[t, d, b] = h
            if lens[b]:  # an empty sequence has zero final states (onnxruntime's convention)
                Yh[d, b], Yc[d, b] = h, c
    if layout:
        Y, Yh, Yc = Y.transpose(2, 0, 1, 3), Yh.transpose(1, 0, 2), Yc.transpose(1, 0, 2)
    outs = [Y.astype(dt), Yh.astype(dt)]
    if op == "LSTM":
        outs.append(Yc.astype(dt))
    return outs
