"""Hubness: how much a chunk's vector resembles the vectors of the rest of its document.

In a high-dimensional embedding space some points ("hubs") are near many others and so
near many queries (Radovanovic, Nanopoulos and Ivanovic, JMLR 2010): in a manual, a chunk
that restates the manual's general topic ("students tick the boxes of their answer
sheets") has a high cosine with nearly every question about it. CSLS (Conneau et al.,
ICLR 2018, "Word translation without parallel data") scores cos(q, x) - r(x)/2 with r(x)
the mean cosine of x with its K nearest neighbours; `hubness` gives r(x), with the
neighbours taken among the chunks of the same document, so a document's values do not
change when other documents join the collection.

Cost: one [m, m] product per document of m chunks, in row blocks (memory O(BLOCK * m)).
"""
from __future__ import annotations

import numpy as np

K = 10          # neighbours, as in CSLS
BLOCK = 1024    # rows of the similarity matrix held at once


def hubness(vectors: np.ndarray, groups: np.ndarray, k: int = K) -> np.ndarray:
    """[n] mean cosine of each unit vector [n, dim] with its k nearest others of the same
    group (fewer when the group is smaller; 0 for a group of one)."""
    out = np.zeros(len(vectors), np.float32)
    for group in np.unique(groups):
        members = np.flatnonzero(groups == group)
        kk = min(k, len(members) - 1)
        if kk < 1:
            continue
        v = vectors[members]
        for start in range(0, len(members), BLOCK):
            sims = v[start:start + BLOCK] @ v.T                       # [b, m]
            rows = np.arange(sims.shape[0])
            sims[rows, start + rows] = -np.inf                        # not its own neighbour
            out[members[start:start + BLOCK]] = np.partition(sims, -kk, axis=1)[:, -kk:].mean(axis=1)
    return out
