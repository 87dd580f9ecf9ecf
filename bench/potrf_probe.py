"""Why cuSOLVER's Cholesky of a 4096^2 matrix trails torch's (GPU, issue #19): potrf on the same column-major copy
with the upper (baracuda's route: the row-major lower factor is the column-major upper one) and the lower fill mode,
the buffer-size query and the workspace allocation timed apart, against torch.linalg.cholesky.  CUDA events, median
of 7 after 2 warm-ups.   python bench/potrf_probe.py"""
import torch

from baracuda._core.dtypes import as_dtype
from baracuda.bench.timing import median_ms
from baracuda.backends.nvidia.cusolver_lib import LOWER, UPPER, handle, routine, workspace


def timed(fn):
    return median_ms(fn, reps=7, warmup=2)


for dt_t in (torch.float32, torch.float64):
    n = 4096
    b = torch.randn(n, n, device="cuda", dtype=dt_t)
    a = b @ b.mT / n + torch.eye(n, device="cuda", dtype=dt_t)
    dt = as_dtype(dt_t)
    h = handle(0)
    info = torch.zeros(1, dtype=torch.int32, device="cuda")
    res = {"torch": timed(lambda: torch.linalg.cholesky(a))}
    for name, uplo in (("upper", UPPER), ("lower", LOWER)):
        lwork = routine("potrf_buffer_size", dt)(h, uplo, n, a.data_ptr(), n)
        ws = workspace(lwork * a.element_size(), a.device)
        c = a.clone()

        def run(uplo=uplo, ws=ws, lwork=lwork, c=c):
            c.copy_(a)
            routine("potrf", dt)(h, uplo, n, c.data_ptr(), n, ws.data_ptr(), lwork, info.data_ptr())
        res[f"potrf_{name}"] = timed(run)
        res[f"lwork_{name}"] = lwork
    res["copy"] = timed(lambda: c.copy_(a))
    print(dt_t, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in res.items()}, flush=True)
