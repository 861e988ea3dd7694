"""`pipeline.py rank`'s output: a Ranking (models.api) as a table or as JSON."""
from __future__ import annotations

import json

from features.schema import is_tile
from models.api import Ranking
from models.metrics import TILE_TOP_K


def format_ranking(ranking: Ranking, *, top: int | None = None, as_json: bool = False) -> str:
    """The top configs (default: 5 for tile, all for layout) as a table or as JSON."""
    if top is None and is_tile(ranking.collection):
        top = TILE_TOP_K
    picks = ranking.top(top)
    if as_json:
        return json.dumps({"collection": ranking.collection,
                           "n_candidates": int(ranking.order.size),
                           "configs": [i for i, _ in picks], "scores": [s for _, s in picks]})
    lines = [f"{ranking.collection}: {len(picks)} of {ranking.order.size} configs, "
             f"predicted fastest first (score: higher = faster)",
             f"{'rank':>5} {'config':>7} {'score':>8}"]
    lines += [f"{r:>5} {i:>7} {s:>8.4f}" for r, (i, s) in enumerate(picks, 1)]
    return "\n".join(lines)
