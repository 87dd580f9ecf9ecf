"""Host time per CPU drop-in call and a tiny model step under bt.mode() vs eager (CPU stand-in for
`baracuda bench --host` when no GPU is available).  python bench/host_cpu_check.py LABEL"""
import time, statistics, torch, sys
import baracuda.torch as bt
torch.manual_seed(0)
x = torch.randn(16, 16); y = torch.randn(16, 16)
def t(fn, n=3000):
    for _ in range(200): fn()
    rs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n): fn()
        rs.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(rs)
res = {}
res["add"] = t(lambda: bt.add(x, y))
res["exp"] = t(lambda: bt.exp(x))
res["softmax"] = t(lambda: bt.softmax(x, -1))
res["sum"] = t(lambda: bt.sum(x, -1))
res["torch add"] = t(lambda: torch.add(x, y))
xg = x.clone().requires_grad_()
res["add fw+bw"] = t(lambda: bt.add(xg, y).sum().backward(), 1000)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4))
inp, tgt = torch.randn(8, 16), torch.randint(0, 4, (8,))
def step():
    model.zero_grad(); torch.nn.functional.cross_entropy(model(inp), tgt).backward()
def mstep():
    with bt.mode():
        step()
res["model eager step"] = t(step, 200)
res["model bt.mode step"] = t(mstep, 200)
print(sys.argv[1], {k: round(v, 1) for k, v in res.items()})
