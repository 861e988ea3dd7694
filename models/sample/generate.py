"""The generated TpuGraphs sample: real directory tree, real keys and dtypes, known cost model.

Runtimes come from a memory-traffic cost model a TPU compiler would recognise, so a ranker has
something real to learn: tensors are padded to 8x128 tiles along their two most-minor dimensions
(layout decides which dimensions those are), a consumer whose input layout differs from its
producer's output layout pays for a copy, dot/conv prefer their contracting/feature dimension
minor-most, and tile configs trade per-tile overhead against padding waste and on-chip spills.
Measurement noise is multiplicative, as is the per-machine factor that tile normalizers remove.
"""
from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from models.sample import synth_graph as sg
from features.cache.store import atomic_dir, write_atomically
from features.npz.find import collection_dir
from features.schema import SPLITS, TILE_MINOR, TILE_SECOND_MINOR, tiled_extent

BYTES_PER_NS = 100.0
SAMPLE_MARKER = "SAMPLE.json"


@dataclass(frozen=True)
class SampleSpec:
    """Sizes of the generated dataset; the defaults keep the whole default run to a few minutes."""

    seed: int = 0
    tile_graphs: tuple[int, int, int] = (60, 12, 12)
    tile_nodes: tuple[int, int] = (4, 24)
    tile_configs: tuple[int, int] = (16, 200)
    layout_graphs: tuple[int, int, int] = (10, 4, 4)
    xla_nodes: tuple[int, int] = (150, 400)
    nlp_nodes: tuple[int, int] = (60, 160)
    layout_configs: tuple[int, int] = (300, 1500)
    test_layout_configs: int = 1000
    noise: float = 0.003  # duplicate configs in the real data differ by up to ~0.4%


# ---------------------------------------------------------------- layout configs and runtimes

def _perms(rng: np.random.Generator, n: int, rank: int) -> np.ndarray:
    return np.argsort(rng.random((n, rank)), axis=1).astype(np.int8)


def section_ranks(graph: sg.SynthGraph, node: int) -> tuple[int, int, int]:
    """Ranks of the output, input and kernel tensors a configurable node's config describes."""
    nd = graph.nodes[node]
    r_in = len(graph.nodes[nd.operands[0]].shape)
    r_ker = len(graph.nodes[nd.operands[1]].shape) if nd.opcode in (sg.CONV, sg.DOT) else 0
    return len(nd.shape), r_in, r_ker


def layout_configs(rng: np.random.Generator, graph: sg.SynthGraph, config_ids: np.ndarray,
                   n_configs: int, search: str) -> np.ndarray:
    """(c, nc, 18) int8. 'random': every section drawn independently; 'default': a genetic-search
    population of few mutations away from the all-default config, which also recurs 40 times."""
    cfg = np.full((n_configs, config_ids.size, 18), -1, np.int8)
    p_change = 0.75 if search == "random" else min(0.5, 2.0 / max(config_ids.size, 1))
    for k, node in enumerate(config_ids):
        touched = rng.random(n_configs) < p_change
        for s, rank in enumerate(section_ranks(graph, int(node))):
            if rank == 0:
                continue
            rows = touched & (rng.random(n_configs) < (0.8 if search == "random" else 0.5))
            cfg[rows, k, 6 * s:6 * s + rank] = _perms(rng, int(rows.sum()), rank)
    if search == "default":
        cfg[: min(40, n_configs)] = -1
    return cfg[rng.permutation(n_configs)]


def _padded(shape: tuple[int, ...]) -> np.ndarray:
    # Index -1 (an unused layout slot) then reads a harmless 1.
    return np.array(list(shape) + [1] * (7 - len(shape)), np.float64)


def tiled_bytes(shape: tuple[int, ...], layout: np.ndarray, elem_bytes: int) -> np.ndarray:
    """Bytes after padding the two most-minor dims to 8x128 tiles; layout (c, 6)."""
    dims = _padded(shape)
    minor, second = dims[layout[:, 0]], dims[layout[:, 1]]
    vol = float(np.prod(shape)) * elem_bytes
    second_pad = np.where(layout[:, 1] >= 0, tiled_extent(second, TILE_SECOND_MINOR) / second, 1.0)
    return vol * (tiled_extent(minor, TILE_MINOR) / minor) * second_pad


def _default_layout(node: sg.Node, n: int) -> np.ndarray:
    row = np.full(6, -1, np.int8)
    row[: len(node.layout)] = node.layout
    return np.broadcast_to(row, (n, 6))


def _effective(section: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    is_default = (section < 0).all(axis=1, keepdims=True)
    return np.where(is_default, fallback, section)


def layout_runtime(graph: sg.SynthGraph, config_ids: np.ndarray, cfg: np.ndarray,
                   rng: np.random.Generator, noise: float) -> np.ndarray:
    """Runtime in ns of every config under the cost model; (c,) float64."""
    c = cfg.shape[0]
    pos = {int(u): k for k, u in enumerate(config_ids)}
    eff_out: dict[int, np.ndarray] = {}

    def out_of(v: int) -> np.ndarray:
        return eff_out.get(v, _default_layout(graph.nodes[v], c))

    eb = graph.elem_bytes
    cost = np.zeros(c)
    for u in sorted(pos):
        k, nd = pos[u], graph.nodes[u]
        eff_out[u] = _effective(cfg[:, k, 0:6], _default_layout(nd, c))
        cost += tiled_bytes(nd.shape, eff_out[u], eb)
        cost += _operand_cost(graph, nd.operands[0], cfg[:, k, 6:12], out_of, copy_weight=2.0)
        if nd.opcode in (sg.CONV, sg.DOT):
            cost += _operand_cost(graph, nd.operands[1], cfg[:, k, 12:18], out_of, copy_weight=1.0)
        cost += _role_cost(graph, nd, cfg[:, k], out_of)
        plain_users = sum(1 for w in graph.consumers[u] if w not in pos)
        changed = (eff_out[u] != _default_layout(nd, c)).any(axis=1)
        cost += changed * min(plain_users, 2) * float(np.prod(nd.shape)) * eb
    base = 1000.0 + sum(float(np.prod(n.shape)) for n in graph.nodes) * eb
    return (base + cost) / BYTES_PER_NS * np.exp(rng.normal(0.0, noise, c))


def _operand_cost(graph, producer: int, section: np.ndarray, out_of, copy_weight: float):
    produced = out_of(producer)
    eff = _effective(section, produced)
    shape, eb = graph.nodes[producer].shape, graph.elem_bytes
    copy = (eff != produced).any(axis=1) * copy_weight * float(np.prod(shape)) * eb
    return tiled_bytes(shape, eff, eb) + copy


def _role_cost(graph, nd: sg.Node, cfg_k: np.ndarray, out_of) -> np.ndarray:
    """dot wants its contracting (last) input dim minor-most; conv its feature dims."""
    x = graph.nodes[nd.operands[0]]
    eff_in = _effective(cfg_k[:, 6:12], out_of(nd.operands[0]))
    bytes_in = float(np.prod(x.shape)) * graph.elem_bytes
    if nd.opcode == sg.DOT:
        return 0.5 * bytes_in * (eff_in[:, 0] != len(x.shape) - 1)
    if nd.opcode == sg.CONV:
        w = graph.nodes[nd.operands[1]]
        eff_ker = _effective(cfg_k[:, 12:18], out_of(nd.operands[1]))
        bytes_ker = float(np.prod(w.shape)) * graph.elem_bytes
        return 0.5 * bytes_in * (eff_in[:, 0] != 3) + 0.3 * bytes_ker * (eff_ker[:, 0] != 3)
    return np.zeros(cfg_k.shape[0])


def choose_config_nodes(rng: np.random.Generator, graph: sg.SynthGraph,
                        n_wanted: int | None = None) -> np.ndarray:
    """Configurable node ids, deliberately unsorted (the spec does not promise order)."""
    cand = np.array([i for i, n in enumerate(graph.nodes) if n.opcode in sg.CONFIGURABLE_OPS])
    if n_wanted is None:
        n_wanted = max(1, int(round(0.9 * cand.size))) if cand.size else 0
    return rng.choice(cand, size=min(n_wanted, cand.size), replace=False).astype(np.int64)


# ---------------------------------------------------------------- tile configs and runtimes

def _pow2_choices(rng, dim: int, n: int) -> np.ndarray:
    """Powers of two from 8 (or the dim's own size) up to the dim, as an autotuner would try."""
    top = min(int(np.ceil(np.log2(max(dim, 1)))), 9)
    return 2.0 ** rng.integers(min(3, top), top + 1, n)


def tile_configs(rng: np.random.Generator, graph: sg.SynthGraph, n: int) -> np.ndarray:
    """(c, 24) float32: kernel/output/input bounds, each 6 slots + sum + product (empty -> 0)."""
    feat = np.zeros((n, 24), np.float32)
    out_shape = graph.nodes[-1].shape
    for d, dim in enumerate(out_shape):
        feat[:, 8 + d] = _pow2_choices(rng, dim, n)
    conv = _conv_weight(graph)
    if conv is not None:
        for d, dim in enumerate(conv.shape):
            feat[:, d] = _pow2_choices(rng, dim, n)
    for base, rank in ((0, 0 if conv is None else 4), (8, len(out_shape)), (16, 0)):
        feat[:, base + 6] = feat[:, base:base + 6].sum(axis=1)
        feat[:, base + 7] = np.prod(feat[:, base:base + rank], axis=1) if rank else 0.0
    return feat


def _conv_weight(graph: sg.SynthGraph) -> sg.Node | None:
    convs = [n for n in graph.nodes if n.opcode == sg.CONV]
    return graph.nodes[convs[-1].operands[1]] if convs else None


def tile_runtime(graph: sg.SynthGraph, feat: np.ndarray) -> np.ndarray:
    """Noise-free runtime in ns: per-tile overhead + padded tile traffic + spill penalty."""
    root = graph.nodes[-1]
    shape = np.array(root.shape, np.float64)
    tiles = feat[:, 8:8 + shape.size].astype(np.float64)
    n_tiles = np.prod(np.ceil(shape / tiles), axis=1)
    padded = tiles.copy()
    minor = root.layout[0]
    padded[:, minor] = tiled_extent(padded[:, minor], TILE_MINOR)
    if shape.size > 1:
        second = root.layout[1]
        padded[:, second] = tiled_extent(padded[:, second], TILE_SECOND_MINOR)
    tile_bytes = np.prod(padded, axis=1) * graph.elem_bytes
    per_tile = 40.0 + tile_bytes / BYTES_PER_NS * (1 + 1.5 * np.maximum(0, tile_bytes / 2**20 - 1))
    conv = _conv_weight(graph)
    if conv is not None:
        kb = feat[:, 0:4].astype(np.float64)
        n_tiles = n_tiles * np.prod(np.ceil(np.array(conv.shape) / kb), axis=1)
        per_tile = per_tile + np.prod(kb, axis=1) * graph.elem_bytes / BYTES_PER_NS
    return n_tiles * per_tile


# ---------------------------------------------------------------- files and the tree

def write_npz(path: Path, arrays: dict[str, np.ndarray], *, chunk_rows: int = 2048) -> None:
    """Write a compressed npz atomically, streaming big arrays (int8 node_config_feat is written
    as the float32 real files hold, one chunk at a time, so no float32 copy exists in memory)."""
    def write(tmp: Path) -> None:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as zf:
            for key, arr in arrays.items():
                dtype = np.dtype(np.float32) if key == "node_config_feat" else arr.dtype
                with zf.open(key + ".npy", "w", force_zip64=True) as fp:
                    header = {"descr": np.lib.format.dtype_to_descr(dtype),
                              "fortran_order": False, "shape": arr.shape}
                    np.lib.format.write_array_header_1_0(fp, header)
                    for start in range(0, max(arr.shape[0], 1), chunk_rows):
                        fp.write(np.ascontiguousarray(arr[start:start + chunk_rows],
                                                      dtype).tobytes())
    write_atomically(path, write)


def layout_arrays(graph: sg.SynthGraph, config_ids: np.ndarray, cfg: np.ndarray,
                  runtime: np.ndarray | None) -> dict[str, np.ndarray]:
    c = cfg.shape[0]
    rt = np.zeros(c, np.int64) if runtime is None else np.maximum(1, runtime).astype(np.int64)
    return {"node_feat": sg.node_feat(graph), "node_opcode": _opcodes(graph),
            "edge_index": sg.edge_index(graph), "node_config_ids": config_ids,
            "node_config_feat": cfg, "config_runtime": rt,
            "node_splits": sg.split_points(graph).reshape(1, -1)}


def _opcodes(graph: sg.SynthGraph) -> np.ndarray:
    return np.array([n.opcode for n in graph.nodes], np.uint8)


def tile_arrays(rng, graph: sg.SynthGraph, n_configs: int, split: str, noise: float):
    feat = tile_configs(rng, graph, n_configs)
    arrays = {"node_feat": sg.node_feat(graph), "node_opcode": _opcodes(graph),
              "edge_index": sg.edge_index(graph), "config_feat": feat}
    if split == "test":
        arrays["config_runtime"] = np.zeros(n_configs, np.int64)
        arrays["config_runtime_normalizers"] = np.ones(n_configs, np.int64)
        return arrays
    true = tile_runtime(graph, feat)
    machine = np.exp(rng.normal(0.0, 0.05, n_configs))  # cancels in runtime / normalizer
    default = true[rng.integers(n_configs)]
    arrays["config_runtime"] = np.maximum(1, true * machine * np.exp(
        rng.normal(0.0, noise, n_configs))).astype(np.int64)
    arrays["config_runtime_normalizers"] = np.maximum(1, default * machine).astype(np.int64)
    return arrays


def _name(rng, collection: str, split: str, i: int) -> str:
    if split == "test":
        return rng.bytes(16).hex()
    if collection == "tile":
        prog = ["alexnet_train_batch_32", "resnet_v2_152_batch_64", "bert_classifier"][i % 3]
        return f"{prog}_{int(rng.integers(-2**62, 2**62)):x}"
    if collection == "xla":
        model = ["resnet50", "inception_v3", "unet_3d", "efficientnet", "mask_rcnn"][i % 5]
        return f"{model}_gen{i}_{split}.4x4.fp16"
    model = ["bert", "albert", "electra", "gpt2", "t5"][i % 5]   # five architecture families
    batch, mode = 16 * (1 + i % 4), ["train", "test"][i % 2]
    return f"{model}_gen{i}_{split}_en_base_batch_size_{batch}_{mode}"


def _rng(spec: SampleSpec, *key: int) -> np.random.Generator:
    return np.random.default_rng([spec.seed, *key])


def _write_tile(npz_root: Path, spec: SampleSpec) -> None:
    for s, (split, count) in enumerate(zip(SPLITS, spec.tile_graphs)):
        out = npz_root / collection_dir("tile:xla") / split
        out.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            rng = _rng(spec, 0, s, i)
            graph = sg.build_graph(rng, int(rng.integers(*spec.tile_nodes)), ["xla", "nlp"][i % 2])
            n = int(rng.integers(*spec.tile_configs))
            write_npz(out / f"{_name(rng, 'tile', split, i)}.npz",
                      tile_arrays(rng, graph, n, split, spec.noise))


def _write_layout(npz_root: Path, spec: SampleSpec, source: str) -> None:
    nodes = spec.xla_nodes if source == "xla" else spec.nlp_nodes
    for s, (split, count) in enumerate(zip(SPLITS, spec.layout_graphs)):
        for i in range(count):
            rng = _rng(spec, 1 if source == "xla" else 2, s, i)
            graph = sg.build_graph(rng, int(rng.integers(*nodes)), source)
            ids = choose_config_nodes(rng, graph)
            name = _name(rng, source, split, i)  # shared by default and random, as in the real data
            for search in ("default", "random"):
                n = (spec.test_layout_configs if split == "test"
                     else int(rng.integers(*spec.layout_configs)))
                cfg = layout_configs(rng, graph, ids, n, search)
                runtime = None if split == "test" else layout_runtime(graph, ids, cfg, rng,
                                                                      spec.noise)
                out = npz_root / collection_dir(f"layout:{source}:{search}") / split
                out.mkdir(parents=True, exist_ok=True)
                write_npz(out / f"{name}.npz", layout_arrays(graph, ids, cfg, runtime))


def ensure_sample(root: Path, spec: SampleSpec = SampleSpec()) -> Path:
    """Generate the sample under `root` once (atomically); return its `npz_all/npz` directory."""
    root = Path(root)
    if _holds(root, spec):
        return root / "npz_all" / "npz"
    # another command generating the same sample at once: the first one published is kept
    with atomic_dir(root, "the generated sample", lambda d: _holds(d, spec)) as tmp:
        npz_root = tmp / "npz_all" / "npz"
        _write_tile(npz_root, spec)
        for source in ("xla", "nlp"):
            _write_layout(npz_root, spec, source)
        (tmp / SAMPLE_MARKER).write_text(json.dumps(_spec_json(spec), indent=1))
    return root / "npz_all" / "npz"


def _holds(root: Path, spec: SampleSpec) -> bool:
    """Whether `root` holds the complete sample of `spec` (its marker is written last)."""
    try:
        return json.loads((root / SAMPLE_MARKER).read_text()) == _spec_json(spec)
    except (FileNotFoundError, ValueError):
        return False


def _spec_json(spec: SampleSpec) -> dict:
    """The marker: settings plus the generator's code, so an edit regenerates the sample."""
    code = hashlib.sha256()
    for name in ("generate.py", "synth_graph.py"):
        code.update(Path(__file__).with_name(name).read_bytes())
    return {"spec": json.loads(json.dumps(asdict(spec))), "code": code.hexdigest()}
