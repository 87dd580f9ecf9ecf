"""Distance family: cosine_similarity, pairwise_distance, cdist, pdist and their backward ops."""
from . import distance  # noqa: F401
