"""The cost-model API and `rank`: submit's orders, clear errors, and the graph-static cache."""
from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import pipeline
from features.npz.find import list_npz
from features.npz.graph import DataFormatError
from features.schema import COLLECTIONS, GRAPH_KEYS
from models.sample.generate import write_npz
from models.api import CostModel, rank_file
from models.training.run_files import latest_run
from models.training.runs import TrainConfig
from tests.conftest import QUICK

README = Path(__file__).resolve().parents[1] / "README.md"


def _arrays(path: Path) -> dict:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def _candidates(arrays: dict) -> dict:
    keys = GRAPH_KEYS + ("node_config_feat", "config_feat")
    return {k: arrays[k] for k in keys if k in arrays}


@pytest.fixture(scope="module")
def model(trained_run) -> CostModel:
    return CostModel.load(trained_run)


@pytest.mark.parametrize("seeds", [TrainConfig.seeds, 1])
@pytest.mark.slow
def test_arrays_rank_exactly_like_submit_on_every_test_file(trained, trained_run, tiny_npz,
                                                           tmp_path, seeds):
    _, common = trained
    if seeds != TrainConfig.seeds:   # the shared run has the default seeds
        own = tmp_path / "cache"    # a cache of its own: other tests read the shared one's newest
        shutil.copytree(Path(common[common.index("--cache-dir") + 1]) / "features",
                        own / "features")
        common = [*common, "--cache-dir", str(own)]     # the last --cache-dir wins
        assert pipeline.main(["train", "--ranker", "lambdarank", *common, *QUICK,
                              "--seeds", str(seeds)]) == 0
        trained_run = latest_run(own / "runs")
    model = CostModel.load(trained_run)
    out = tmp_path / "submission.csv"
    assert pipeline.main(["submit", *common, "--run", str(trained_run), "--out", str(out)]) == 0
    with open(out, newline="") as fh:
        submitted = dict(list(csv.reader(fh))[1:])
    checked = 0
    for collection in COLLECTIONS:
        for f in list_npz(tiny_npz, collection, "test"):
            ranking = model.rank(**_candidates(_arrays(f)), collection=collection, name=f.stem)
            order = ranking.order[:5] if collection == "tile:xla" else ranking.order
            assert ";".join(map(str, order)) == submitted[f"{collection}:{f.stem}"], f
            assert np.all(np.diff(ranking.scores[ranking.order]) <= 0)
            np.testing.assert_array_equal(rank_file(model, f).order, ranking.order)
            checked += 1
    assert checked == len(submitted)


def _rank_json(capsys, *args) -> dict:
    assert pipeline.main(["rank", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_rank_command_with_and_without_config_runtime(trained, trained_run, tiny_npz, tmp_path,
                                                      capsys):
    cache, _ = trained
    run = ["--run", str(trained_run), "--cache-dir", str(cache)]
    src = list_npz(tiny_npz, "layout:nlp:default", "valid")[0]   # real, positive runtimes
    inferred = _rank_json(capsys, str(src), *run)
    assert inferred["collection"] == "layout:nlp:default"
    arrays = _arrays(src)
    assert inferred["n_candidates"] == arrays["config_runtime"].size == len(inferred["configs"])
    for variant, runtime in (("missing", None), ("zeros", np.zeros_like(arrays["config_runtime"]))):
        path = tmp_path / f"{variant}.npz"
        write_npz(path, {k: v for k, v in {**arrays, "config_runtime": runtime}.items()
                         if v is not None})
        got = _rank_json(capsys, str(path), *run, "--collection", "layout:nlp:default")
        assert got == inferred
    tile = _rank_json(capsys, str(list_npz(tiny_npz, "tile:xla", "valid")[0]), *run)
    assert tile["collection"] == "tile:xla" and len(tile["configs"]) == 5
    assert pipeline.main(["rank", str(src), *run, "--top", "3"]) == 0
    table = capsys.readouterr().out
    assert f"3 of {arrays['config_runtime'].size} configs" in table
    assert re.search(rf"^\s+1\s+{inferred['configs'][0]}\s", table, re.M)


def test_rank_refuses_a_file_of_the_wrong_kind(trained, trained_run, tiny_npz, capsys):
    cache, _ = trained
    tile_file = list_npz(tiny_npz, "tile:xla", "test")[0]
    code = pipeline.main(["rank", str(tile_file), "--run", str(trained_run), "--cache-dir",
                          str(cache), "--collection", "layout:xla:random"])
    assert code == 2 and "tile candidates cannot be ranked" in capsys.readouterr().err


@pytest.fixture(scope="module")
def layout_graph(tiny_npz) -> dict:
    return _candidates(_arrays(list_npz(tiny_npz, "layout:xla:random", "test")[0]))


def _with(arrays: dict, **changes) -> dict:
    return {k: v for k, v in {**arrays, **changes}.items() if v is not None}


def _slot_set_to(ncf: np.ndarray, value: float) -> np.ndarray:
    bad = ncf.astype(np.float32)
    bad[3, 1, 4] = value
    return bad


@pytest.mark.parametrize("change, message", [
    (lambda a: {"node_feat": a["node_feat"][:, :139]}, "key 'node_feat': expected shape"),
    (lambda a: {"node_config_feat": a["node_config_feat"][:, :, :17]},
     "expected shape (c, nc, 18)"),
    (lambda a: {"node_config_feat": a["node_config_feat"][:, 1:]},
     "axis 1 of node_config_feat must be the"),
    (lambda a: {"node_config_feat": _slot_set_to(a["node_config_feat"], 6)},
     "expected integers in -1..5, found"),
    (lambda a: {"node_config_feat": _slot_set_to(a["node_config_feat"], 0.5)},
     "expected integers in -1..5"),
    (lambda a: {"node_config_feat": _slot_set_to(a["node_config_feat"], -2).astype(np.int8)},
     "expected integers in -1..5, found -2 at index (3, 1, 4)"),   # int8: checked, not copied
    (lambda a: {"node_config_feat": a["node_config_feat"][:0]},
     "expected at least one candidate config"),
    (lambda a: {"node_config_ids": a["node_config_ids"] + a["node_feat"].shape[0]},
     "key 'node_config_ids': expected node ids"),
    (lambda a: {"node_config_ids": None}, "missing array(s) ['node_config_ids']"),
    (lambda a: {"config_feat": np.zeros((4, 24), np.float32)}, "exactly one of 'config_feat'"),
    (lambda a: {"node_opcode": a["node_opcode"].astype(np.float32)}, "an integer dtype"),
])
def test_bad_arrays_raise_clear_errors(model, layout_graph, change, message):
    with pytest.raises(DataFormatError, match=re.escape(message)) as exc:
        model.rank(**_with(layout_graph, **change(layout_graph)), name="tuner-graph")
    assert str(exc.value).startswith("tuner-graph")


def test_bad_tile_arrays_and_zero_tile_candidates(model, tiny_npz):
    tile = _candidates(_arrays(list_npz(tiny_npz, "tile:xla", "test")[0]))
    c = tile["config_feat"].shape[0]
    with pytest.raises(DataFormatError, match=re.escape(
            f"axis 1 of config_feat must be the 24 tile config features; got 23 (shape ({c}, "
            f"23))")) as exc:
        model.rank(**_with(tile, config_feat=tile["config_feat"][:, :23]))
    assert "Did you pass" not in str(exc.value)
    with pytest.raises(DataFormatError, match=re.escape(
            f"axis 1 of config_feat must be the 24 tile config features; got {c} (shape (24, "
            f"{c})). Did you pass (24, c)? Candidates go first: (c, 24)")):
        model.rank(**_with(tile, config_feat=tile["config_feat"].T))
    with pytest.raises(DataFormatError, match="at least one candidate config"):
        model.rank(**_with(tile, config_feat=tile["config_feat"][:0]))


def test_a_shape_error_names_the_axis_and_where_its_length_comes_from(model, layout_graph):
    """Candidates as (nc, c, 18): the count must be read from node_config_ids, not from the
    array's own first axis (which gave 'expected shape (nc, nc, 18)')."""
    ncf = layout_graph["node_config_feat"]
    c, nc = ncf.shape[:2]
    assert c != nc
    swapped = np.ascontiguousarray(ncf.transpose(1, 0, 2))
    with pytest.raises(DataFormatError) as exc:
        model.rank(**_with(layout_graph, node_config_feat=swapped), name="tuner-graph")
    assert str(exc.value) == (
        f"tuner-graph: axis 1 of node_config_feat must be the {nc} configurable nodes listed "
        f"in node_config_ids; got {c} (shape ({nc}, {c}, 18)). Did you pass (nc, c, 18)? "
        f"Candidates go first: (c, nc, 18)")
    # A wrong node count (not a transposition) says where the expected count comes from.
    fewer_ids = layout_graph["node_config_ids"][:-2]
    with pytest.raises(DataFormatError) as exc:
        model.rank(**_with(layout_graph, node_config_ids=fewer_ids), name="tuner-graph")
    assert str(exc.value) == (
        f"tuner-graph: axis 1 of node_config_feat must be the {nc - 2} configurable nodes "
        f"listed in node_config_ids; got {nc} (shape ({c}, {nc}, 18))")


def test_warm_calls_reuse_graph_tables_and_equal_cold_calls(trained_run, layout_graph):
    ncf = layout_graph["node_config_feat"]
    graph = {k: layout_graph[k] for k in GRAPH_KEYS}
    warm = CostModel.load(trained_run)
    warm.rank(**graph, node_config_feat=ncf[:60])
    got = warm.rank(**graph, node_config_feat=ncf[60:])     # new candidates, same graph
    assert (warm.cache.misses, warm.cache.hits) == (1, 1)
    cold = CostModel.load(trained_run).rank(**graph, node_config_feat=ncf[60:],
                                            reference=ncf[:60])
    np.testing.assert_array_equal(got.scores, cold.scores)
    # Another graph (one node feature changed) is another entry.
    warm.rank(**{**graph, "node_feat": graph["node_feat"] * 1.5}, node_config_feat=ncf)
    assert (warm.cache.misses, warm.cache.hits) == (2, 1)


@pytest.mark.parametrize("kind", ["layout", "layout:nlp:default", "tile"])
@pytest.mark.slow
def test_a_config_scores_the_same_in_any_batch(trained_run, layout_graph, tiny_npz, kind):
    """The score of a config depends on the graph and the config, not on the batch around it
    (layout:nlp:default: with the node learner, whose row scores carry over between calls)."""
    collection = {"layout": "layout:xla:random", "tile": "tile:xla"}.get(kind, kind)
    if kind == "layout":
        arrays, key = dict(layout_graph), "node_config_feat"
    elif kind == "layout:nlp:default":
        arrays = _candidates(_arrays(list_npz(tiny_npz, kind, "test")[0]))
        key = "node_config_feat"
    else:
        arrays, key = _candidates(_arrays(list_npz(tiny_npz, "tile:xla", "test")[0])), "config_feat"
    configs = arrays.pop(key)
    reference = configs[::2]
    rng = np.random.default_rng(0)
    target = 7
    scores = []
    for size in (1, 10, configs.shape[0]):
        model = CostModel.load(trained_run)     # a fresh model each time: no state carried over
        others = rng.choice(np.delete(np.arange(configs.shape[0]), target), size - 1, replace=False)
        batch = np.concatenate([[target], others])
        rng.shuffle(batch)
        ranking = model.rank(**arrays, **{key: configs[batch]}, reference=reference,
                             collection=collection)
        scores.append(ranking.scores[np.flatnonzero(batch == target)[0]])
    assert scores[0] == pytest.approx(scores[1], abs=1e-12) == pytest.approx(scores[2], abs=1e-12)
    # Without a reference, the first call's candidates become the graph's: later calls agree.
    model = CostModel.load(trained_run)
    model.rank(**arrays, **{key: reference}, collection=collection)
    later = model.rank(**arrays, **{key: configs[[target]]}, collection=collection).scores[0]
    assert later == pytest.approx(scores[0], abs=1e-12)


def test_the_cache_keeps_the_most_recent_graphs(trained_run, layout_graph):
    model = CostModel.load(trained_run, cache_size=1)
    other = {**layout_graph, "node_feat": layout_graph["node_feat"] * 1.5}
    for arrays in (layout_graph, layout_graph, other, layout_graph):
        model.rank(**arrays)
    assert (model.cache.misses, model.cache.hits) == (3, 1)


def test_the_readme_example_runs_as_written(trained_run, tiny_root, tmp_path, monkeypatch,
                                            capsys):
    text = README.read_text()
    code = re.search(r"## Library API.*?```python\n(.*?)```", text, re.S).group(1)
    cache = tmp_path / "data_cache"
    (cache / "runs").mkdir(parents=True)
    shutil.copytree(trained_run, cache / "runs" / trained_run.name)
    (cache / "sample").symlink_to(tiny_root)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    assert capsys.readouterr().out.startswith("best found:")
    saved = CostModel.load(cache / "tuner")            # resumes with the 20 measurements
    learnt, = saved.state().graphs
    assert learnt.runtimes.size == 20


def test_scores_never_depend_on_a_path_or_a_name(trained_run, tiny_npz, tmp_path, monkeypatch):
    """The same bytes rank the same inside the tree and elsewhere, and the same arrays under any
    name: the statistics sample of a large file is drawn from its size, not its name."""
    import features.rows.per_config as per_config
    monkeypatch.setattr(per_config, "STAT_CONFIGS", 25)   # these files are small: sample them
    inside = list_npz(tiny_npz, "layout:xla:random", "test")[0]
    outside = tmp_path / "elsewhere.npz"
    shutil.copyfile(inside, outside)
    model = CostModel.load(trained_run)
    a = rank_file(model, inside)                        # its collection from its place in the tree
    b = rank_file(CostModel.load(trained_run), outside)   # the same one from its keys
    np.testing.assert_array_equal(a.scores, b.scores)
    arrays = _candidates(_arrays(inside))
    named = [CostModel.load(trained_run).rank(**arrays, name=name).scores
             for name in ("graph", "another name")]
    np.testing.assert_array_equal(named[0], named[1])
