"""One line per bench/image_ab.py row (its JSON lines on stdin): fw / bw ms of torch, torch.compile and ours, the
speedups and errors."""
import json
import sys

for line in sys.stdin:
    if not line.startswith("{"):
        print(line.rstrip())
        continue
    r = json.loads(line)
    cells = []
    for who in ("torch", "compile", "ours"):
        v = r.get(who, {})
        cells.append(f"{who} " + (f"{v['fw_ms']*1e3:7.1f}/{v['bw_ms']*1e3:7.1f}" if "fw_ms" in v else v.get("error", "?")[:60]))
    o = r.get("ours", {})
    print(f"{r['row'][:58]:58s} " + " | ".join(cells) + f" us  x{r.get('speedup_fw', 0):.2f}/x{r.get('speedup_bw', 0):.2f}"
          f" err {o.get('err_y', float('nan')):.1e} {[round(e, 4) for e in o.get('err_grads', [])]} {r.get('timing')}")
