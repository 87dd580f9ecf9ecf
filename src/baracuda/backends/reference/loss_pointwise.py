"""NumPy float64 bodies of the pointwise losses (ops/loss_pointwise.py) and the row-wise margin losses
(ops/loss_margin.py): the oracle for the Triton kernels.  Bad values (BCE input outside [0, 1], negative
gaussian var, class indices out of range) raise InvalidProblemError here, on the host."""
from __future__ import annotations

import numpy as np

from ..._core.errors import InvalidProblemError
from ...ops.loss_pointwise import PW_EXTRA, aux_of, var_shape
from ...ops.loss_margin import ROW_LOSSES
from . import register_reference

_LOG2PI = float(np.log(2 * np.pi))


def _sp(x):
    """softplus(x) = log(1 + e^x), stable."""
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def _sig(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _split(desc, xs):
    base = desc.op.replace("_backward", "")
    d = PW_EXTRA[base]
    nm = len(d.main)
    main, aux = xs[:nm], xs[nm:]
    shape = main[0].shape
    names = aux_of(base, len(aux), desc.attr_dict)
    a = {n: np.broadcast_to(v.reshape(var_shape(shape, v.shape)) if n == "var" else v, shape)
         for n, v in zip(names, aux)}
    return base, main, a


def _fg(desc, xs):
    """(loss per element, tuple of d loss / d operand for the differentiable operands) in float64."""
    base, m, a = _split(desc, xs)
    at = desc.attr_dict
    with np.errstate(all="ignore"):
        if base == "binary_cross_entropy":
            x, y = m
            # the forward checks (NaN fails too), as torch's; its backward (and the Triton backward) does not
            for name, v in (("input", x), ("target", y)) if not desc.op.endswith("_backward") else ():
                if not np.all((v >= 0) & (v <= 1)):
                    raise InvalidProblemError(desc.op, name, "values in [0, 1]", "a value outside (or NaN)")
            w = a.get("weight", 1.0)
            lx, l1x = np.maximum(np.log(x), -100.0), np.maximum(np.log1p(-x), -100.0)
            f = -w * (y * lx + (1 - y) * l1x)
            return f, (w * (x - y) / np.maximum(x * (1 - x), 1e-12), w * (np.log1p(-x) - np.log(x)))
        if base == "binary_cross_entropy_with_logits":
            x, y = m
            w, pw = a.get("weight", 1.0), a.get("pos_weight", 1.0)
            lw = 1.0 + (pw - 1.0) * y
            spn = _sp(-x)
            return w * ((1 - y) * x + lw * spn), (w * (_sig(x) * lw - pw * y), w * ((pw - 1.0) * spn - x))
        if base == "kl_div":
            x, y = m
            if at["log_target"]:
                e = np.exp(y)
                return e * (y - x), (-e, e * (y - x + 1.0))
            ly = np.where(y != 0, np.log(np.where(y != 0, y, 1.0)), 0.0)
            return y * ly - y * x, (-y, ly + y / y - x)
        if base == "poisson_nll_loss":
            x, y = m
            if at["log_input"]:
                f, dx, dy = np.exp(x) - y * x, np.exp(x) - y, -x
            else:
                xe = x + at["eps"]
                f, dx, dy = x - y * np.log(xe), 1.0 - y / xe, -np.log(xe)
            if at["full"]:
                big = y > 1
                ys = np.where(big, y, 2.0)
                f = f + np.where(big, ys * np.log(ys) - ys + 0.5 * np.log(2 * np.pi * ys), 0.0)
                dy = dy + np.where(big, np.log(ys) + 0.5 / ys, 0.0)
            return f, (dx, dy)
        if base == "gaussian_nll_loss":
            x, y = m
            var = a["var"]
            if np.any(var < 0):
                raise InvalidProblemError(desc.op, "var", "non-negative variances", "a negative entry")
            v = np.maximum(var, at["eps"])
            dd = x - y
            f = 0.5 * (np.log(v) + dd * dd / v) + (0.5 * _LOG2PI if at["full"] else 0.0)
            return f, (dd / v, -dd / v, 0.5 * (1.0 / v - dd * dd / (v * v)))
        mg = at.get("margin", 0.0)
        if base == "hinge_embedding_loss":
            x, y = m
            f = np.where(y != 1, np.maximum(mg - x, 0.0), 0.0) + np.where(y != -1, x, 0.0)
            return f, (np.where(y != 1, -(mg - x >= 0).astype(np.float64), 0.0) + np.where(y != -1, 1.0, 0.0),)
        if base == "margin_ranking_loss":
            x1, x2, y = m
            v = -y * (x1 - x2) + mg
            act = (v >= 0).astype(np.float64)
            return np.maximum(v, 0.0), (-y * act, y * act, -(x1 - x2) * act)
        x, y = m   # soft_margin_loss
        return _sp(-y * x), (-y * _sig(-y * x),)


def _divisor(desc, shape):
    red = desc.attr("reduction")
    if red == "batchmean":
        return shape[0] if len(shape) else 1
    return int(np.prod(shape)) if red == "mean" else 1


def _fw(desc, *xs):
    f, _ = _fg(desc, xs)
    red = desc.attr("reduction")
    if red == "none":
        return f
    with np.errstate(all="ignore"):
        return np.asarray(f.sum() / _divisor(desc, f.shape))


def _bw(desc, g, *xs):
    _, ds = _fg(desc, xs)
    shape = xs[0].shape
    red = desc.attr("reduction")
    with np.errstate(all="ignore"):
        sc = g if red == "none" else np.asarray(g) / _divisor(desc, shape)
        return tuple(np.broadcast_to(dd * sc, shape) for dd in ds)


for _base in PW_EXTRA:
    register_reference(_base, _fw)
    register_reference(f"{_base}_backward", _bw)


# == row-wise margin losses ==========================================================================
def _bad_index(desc, name, lo, hi, t):
    bad = (t < lo) | (t >= hi)
    if np.any(bad):
        i = np.unravel_index(int(np.argmax(bad)), t.shape)
        raise InvalidProblemError(desc.op, name, f"class indices in [{lo}, {hi})", f"{name}{list(i)} = {int(t[i])}")


def _row_fg(desc, xs):
    """(per-row loss [R], tuple of d loss_r / d operand [R, ...] for the differentiable operands)."""
    base = desc.op.replace("_backward", "")
    at = desc.attr_dict
    with np.errstate(all="ignore"):
        if base == "cosine_embedding_loss":
            x1, x2, t = xs
            x1, x2 = x1.reshape(-1, x1.shape[-1]), x2.reshape(-1, x2.shape[-1])
            t = np.asarray(t, np.float64).reshape(-1)
            p = (x1 * x2).sum(1)
            m1, m2 = (x1 * x1).sum(1) + 1e-12, (x2 * x2).sum(1) + 1e-12
            den = np.sqrt(m1 * m2)
            cos = p / den
            neg = cos - at["margin"]
            f = np.where(t == 1, 1 - cos, 0.0) + np.where(t == -1, np.maximum(neg, 0.0), 0.0)
            dc = np.where(t == 1, -1.0, 0.0) + np.where((t == -1) & (neg >= 0), 1.0, 0.0)
            d1 = dc[:, None] * (x2 / den[:, None] - (cos / m1)[:, None] * x1)
            d2 = dc[:, None] * (x1 / den[:, None] - (cos / m2)[:, None] * x2)
            return f, (d1, d2)
        if base == "triplet_margin_loss":
            a, po, ne = (v.reshape(-1, v.shape[-1]) for v in xs)
            p, eps = at["p"], at["eps"]

            def dist(u, v):
                dd = u - v + eps
                nrm = (np.abs(dd) ** p).sum(1) ** (1.0 / p)
                gr = np.sign(dd) * np.abs(dd) ** (p - 1) / np.where(nrm == 0, 1.0, nrm)[:, None] ** (p - 1)
                return nrm, np.where(nrm[:, None] == 0, 0.0, gr)

            dp, gp = dist(a, po)
            dn, gn = dist(a, ne)
            cn, cs = np.ones_like(dn), np.zeros_like(dn)
            gs = np.zeros_like(gn)
            if at["swap"]:
                ds, gs = dist(po, ne)
                cn = np.where(dn < ds, 1.0, np.where(dn == ds, 0.5, 0.0))
                cs = 1.0 - cn
                dn = np.minimum(dn, ds)
            v = at["margin"] + dp - dn
            act = (v >= 0).astype(np.float64)[:, None]
            cn, cs = cn[:, None], cs[:, None]
            return np.maximum(v, 0.0), (act * (gp - cn * gn), act * (-gp - cs * gs), act * (cn * gn + cs * gs))
        if base == "multi_margin_loss":
            x, t = xs[0], xs[1]
            w = xs[2] if len(xs) > 2 else None
            c = x.shape[-1]
            x = x.reshape(-1, c)
            t = np.asarray(t).astype(np.int64).reshape(-1)
            _bad_index(desc, "target", 0, c, t)
            r = np.arange(x.shape[0])
            z = at["margin"] - x[r, t][:, None] + x
            z[r, t] = 0.0
            pos = z > 0
            wt = (w[t] if w is not None else np.ones(len(t)))[:, None]
            h = np.where(pos, z if at["p"] == 1 else z * z, 0.0) * wt / c
            dz = np.where(pos, 1.0 if at["p"] == 1 else 2 * z, 0.0) * wt / c
            dz[r, t] = 0.0
            dx = dz.copy()
            dx[r, t] = -dz.sum(1)
            return h.sum(1), (dx,)
        if base == "multilabel_margin_loss":
            x, t = xs
            c = x.shape[-1]
            x = x.reshape(-1, c)
            t = np.asarray(t).astype(np.int64).reshape(-1, c)
            _bad_index(desc, "target", -1, c, t)
            f = np.zeros(x.shape[0])
            dx = np.zeros_like(x)
            for i in range(x.shape[0]):
                stop = np.flatnonzero(t[i] < 0)
                ent = t[i, : stop[0] if stop.size else c]
                ist = np.zeros(c, bool)
                ist[ent] = True
                for j in ent:
                    z = 1.0 - x[i, j] + x[i]
                    act = (z > 0) & ~ist
                    f[i] += np.where(act, z, 0.0).sum() / c
                    dx[i] += act / c
                    dx[i, j] -= act.sum() / c
            return f, (dx,)
        # multilabel_soft_margin_loss
        x, y = xs[0], xs[1]
        c = x.shape[-1]
        w = np.broadcast_to(xs[2], x.shape) if len(xs) > 2 else np.ones(x.shape)
        x, y, w = x.reshape(-1, c), y.reshape(-1, c), w.reshape(-1, c)
        f = (w * (_sp(-x) + (1 - y) * x)).sum(1) / c
        return f, (w * (_sig(x) - y) / c, -w * x / c)


def _row_fw(desc, *xs):
    f, _ = _row_fg(desc, xs)
    red = desc.attr("reduction")
    if red == "none":
        return f.reshape(desc.outputs[0].shape)
    with np.errstate(all="ignore"):
        return np.asarray(f.sum() / f.size if red == "mean" else f.sum())


def _row_bw(desc, g, *xs):
    f, ds = _row_fg(desc, xs)
    red = desc.attr("reduction")
    with np.errstate(all="ignore"):
        if red == "none":
            sc = np.asarray(g, np.float64).reshape(-1)
        else:
            sc = np.full(f.shape, g / (f.size if red == "mean" else 1))
    return tuple((dd * sc[:, None]).reshape(xs[i].shape) for i, dd in zip(ROW_LOSSES[desc.op[:-9]].diff, ds))


for _base in ROW_LOSSES:
    register_reference(_base, _row_fw)
    register_reference(f"{_base}_backward", _row_bw)
