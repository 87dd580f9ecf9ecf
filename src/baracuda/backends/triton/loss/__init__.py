"""Loss family.  cross_entropy / nll_loss: ce_kernels.py (kernels), cross_entropy.py (plans), ce_nd.py (N-D
inputs with few classes), ce_coop.py (the single-read GPU backward); cross_entropy_with_grad (ce_with_grad.py);
linear_cross_entropy (linear_ce.py); ctc_loss (ctc.py); regression losses (pointwise.py); the other pointwise
losses (pointwise_template.py: BCE, KL, NLL variants, hinge/soft margin, margin ranking); the row margin losses
(margin.py)."""
from . import ce_with_grad, cross_entropy, ctc, linear_ce, margin, pointwise, pointwise_template  # noqa: F401
