"""A compact line per JSON row of bench/sort_net_ab.py (stdin -> stdout; other lines pass through, cut to 200
characters): op, shape, dtype, k, impl, forced options, us, same_as_first, error."""
import json
import sys

for line in sys.stdin:
    try:
        r = json.loads(line)
    except ValueError:
        print(line.rstrip()[:200])
        continue
    print(r["op"], r["shape"], r["dtype"][6:], (r.get("attrs") or {}).get("k"), r["impl"], r.get("force"),
          round(r.get("us", 0)), r.get("same_as_first"), r.get("error", "")[:150])
