"""Quick first look (not committed): fwd / fwd+bwd TF/s of ours (triton), cuDNN (frontend), torch SDPA."""
import json, sys, time, torch, traceback
import torch.nn.functional as F
import baracuda as bc, baracuda.torch as bt
from baracuda._core.sku import Backend
out = {}
def tm(fn, n=10):
    for _ in range(3): fn()
    torch.cuda.synchronize(); ts=[]
    for _ in range(n):
        a,b=torch.cuda.Event(enable_timing=True),torch.cuda.Event(enable_timing=True); a.record(); fn(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b)*1e-3)
    return sorted(ts)[len(ts)//2]
cases = [("b4h32s4096d128c", 4,32,32,4096,128,True), ("b4h32s4096d128", 4,32,32,4096,128,False),
         ("gqa32/8 b2s8192c", 2,32,8,8192,128,True), ("d64 b4h32s4096c",4,32,32,4096,64,True), ("d256 b4h16s4096c",4,16,16,4096,256,True)]
for name,B,Hq,Hk,S,D,causal in cases:
    q=torch.randn(B,Hq,S,D,device='cuda',dtype=torch.bfloat16,requires_grad=True)
    k=torch.randn(B,Hk,S,D,device='cuda',dtype=torch.bfloat16,requires_grad=True)
    v=torch.randn(B,Hk,S,D,device='cuda',dtype=torch.bfloat16,requires_grad=True)
    fl = 4*B*Hq*S*S*D*(0.5 if causal else 1)
    do = torch.randn(B,Hq,S,D,device='cuda',dtype=torch.bfloat16)
    row = {}
    ref = F.scaled_dot_product_attention(q,k,v,is_causal=causal, enable_gqa=Hq!=Hk)
    for who, fn in [("torch", lambda: F.scaled_dot_product_attention(q,k,v,is_causal=causal, enable_gqa=Hq!=Hk)),
                    ("triton", lambda: bt.nn.functional.scaled_dot_product_attention(q,k,v,is_causal=causal, enable_gqa=Hq!=Hk)),
                    ("cudnn", lambda: bt.nn.functional.scaled_dot_product_attention(q,k,v,is_causal=causal, enable_gqa=Hq!=Hk))]:
        try:
            pref = bc.PlanPreference(prefer=(Backend.CUDNN,) if who=="cudnn" else (Backend.TRITON,))
            with bc.preference(pref):
                with torch.no_grad(): y = fn()
                err = (y.float()-ref.float()).abs().max().item()
                with torch.no_grad(): tf = tm(fn)
                def fb():
                    y = fn(); torch.autograd.grad(y, (q,k,v), do)
                tfb = tm(fb, 5)
            row[who] = dict(fwd_tflops=fl/tf/1e12, bwd_tflops=2.5*fl/(tfb-tf)/1e12, fwd_ms=tf*1e3, fwdbwd_ms=tfb*1e3, maxerr=err)
            if who!="torch":
                row[who]["sku"] = str(bc.Plan.select(bc.Descriptor.like("sdpa", q.detach(), k.detach(), v.detach(), causal="top_left" if causal else "none"), bc.as_device("cuda"), pref).sku)
        except Exception as e:
            row[who] = dict(error=traceback.format_exc()[-800:])
        print(name, who, row[who], flush=True)
    out[name]=row
    json.dump(out, open(sys.argv[1],'w'), indent=1)
