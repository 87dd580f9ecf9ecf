"""Print a ResNet timeline's marks and kernel totals (bench/step_timeline.py --resnet's JSON), eager and mode, with
the ``top`` kernels of each by time.
    python bench/timeline_summary.py TIMELINE.json [top]"""
import json
import sys

d = json.load(open(sys.argv[1]))
top = int(sys.argv[2]) if len(sys.argv) > 2 else 0
a, b = d["eager"], d["mode"]
print("marks eager", a["marks"], "\nmarks mode", b["marks"])
for tag, k in (("E", a["kernels_ms"]), ("M", b["kernels_ms"])):
    print(tag, "total", round(sum(k.values()), 2))
    for n, v in sorted(k.items(), key=lambda t: -t[1])[:top]:
        print(f"{tag} {v:8.3f}  {n[:100]}")
