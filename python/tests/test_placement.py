"""Bundle.apply_to with dcr.Place: a tensor-parallel rank's slices and fused
parameters patched where they lie (dcr_patch_placed), checked against slicing the
target, with numpy arrays and torch tensors."""

from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import dcr

H, I, KV = 64, 192, 32  # hidden, intermediate, k/v rows (grouped-query attention)


def bf16(rng: np.random.Generator, shape: Tuple[int, ...]) -> np.ndarray:
    f = rng.normal(0, 0.02, size=shape).astype(np.float32)
    return (f.view(np.uint32) >> 16).astype(np.uint16)


def one_step(rng: np.random.Generator, a: np.ndarray, rate: float = 0.04) -> np.ndarray:
    b = a.copy()
    m = rng.random(a.shape) < rate
    b[m] = (b[m].astype(np.int32) + rng.choice([-1, 1], size=int(m.sum()))).astype(np.uint16)
    return b


def model(seed: int = 7) -> Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    shapes = {"q": (H, H), "k": (KV, H), "v": (KV, H), "o": (H, H), "gate": (I, H), "up": (I, H),
              "down": (H, I), "norm": (H,), "experts": (4, 16, 8)}
    base = {n: bf16(rng, s) for n, s in shapes.items()}
    return base, {n: one_step(rng, a) for n, a in base.items()}


def bundle(tmp_path: Any, base: Dict[str, np.ndarray], target: Dict[str, np.ndarray], **options: Any) -> dcr.Bundle:
    out = tmp_path / f"step-{options.get('format', 'default')}-{options.get('chunk_size', 0)}.dcr"
    dtypes = {n: "BF16" for n in base}
    dcr.encode_tensors(base, target, out, base_dtypes=dtypes, target_dtypes=dtypes, **options)
    return dcr.Bundle(out)


class Rank:
    """Rank `rank` of `tp` as a vLLM-like engine lays out its parameters: fused qkv
    and gate_up (column-parallel: the rank's rows of each, stacked), o and down
    row-parallel (the rank's columns), norm replicated, experts split by expert."""

    def __init__(self, src: Dict[str, np.ndarray], rank: int = 0, tp: int = 2, new=np.copy):
        self.rank, self.tp = rank, tp
        rows = lambda n: slice(rank * n // tp, (rank + 1) * n // tp)  # noqa: E731
        self.qkv = new(np.concatenate([src["q"][rows(H)], src["k"][rows(KV)], src["v"][rows(KV)]]))
        self.gate_up = new(np.concatenate([src["gate"][rows(I)], src["up"][rows(I)]]))
        self.o = new(src["o"][:, rows(H)])
        self.down = new(src["down"][:, rows(I)])
        self.norm = new(src["norm"])
        self.experts = new(src["experts"][rows(4)])

    def places(self) -> Dict[str, Any]:
        r, tp = self.rank, self.tp
        span = lambda n: (r * n // tp, (r + 1) * n // tp)  # noqa: E731
        q, kv, i = H // tp, KV // tp, I // tp
        return {
            "q": dcr.Place(self.qkv, rows=span(H)),
            "k": dcr.Place(self.qkv, rows=span(KV), at=(q, 0)),
            "v": dcr.Place(self.qkv, rows=span(KV), at=(q + kv, 0)),
            "gate": dcr.Place(self.gate_up, rows=span(I)),
            "up": dcr.Place(self.gate_up, rows=span(I), at=(i, 0)),
            "o": dcr.Place(self.o, cols=span(H)),
            "down": dcr.Place(self.down, cols=span(I)),
            "norm": self.norm,
            "experts": dcr.Place(self.experts, rows=span(4)),
        }

    def arrays(self) -> List[Any]:
        return [self.qkv, self.gate_up, self.o, self.down, self.norm, self.experts]


def as_numpy(a: Any) -> np.ndarray:
    if hasattr(a, "numpy"):  # torch: BF16 has no numpy dtype, its bits do
        return a.view(torch.int16).numpy().view(np.uint16) if a.dtype == torch.bfloat16 else a.numpy()
    return np.asarray(a)


def same(a: Rank, b: Rank) -> bool:
    return all(np.array_equal(as_numpy(x), as_numpy(y)) for x, y in zip(a.arrays(), b.arrays()))


@pytest.mark.parametrize("rank", [0, 1])
def test_rank_format_1_1_without_base(tmp_path: Any, rank: int) -> None:
    base, target = model()
    b = bundle(tmp_path, base, target, format="1.1")
    worker = Rank(base, rank)
    stats = b.apply_to(worker.places())
    assert same(worker, Rank(target, rank))
    assert stats.chunks_unchecked > 0  # the row-parallel slices: held in part, not checkable
    assert stats.chunks_patched > stats.chunks_unchecked  # norm, whole: checked


def test_default_format_needs_the_whole_base_for_a_part(tmp_path: Any) -> None:
    base, target = model()
    b = bundle(tmp_path, base, target)
    assert b.info.format_version >= (1, 3)
    worker = Rank(base)
    with pytest.raises(dcr.ArgumentError, match="held|whole"):
        b.apply_to(worker.places())
    assert same(worker, Rank(base))  # nothing written
    stats = b.apply_to(worker.places(), base=base)  # a node's whole host copy
    assert same(worker, Rank(target))
    assert stats.chunks_unchecked == 0 and stats.bytes_checked > 0
    assert all(np.array_equal(base[n], a) for n, a in model()[0].items())  # the base is only read


def test_sliced_tensors_decode_alone_in_the_default_format(tmp_path: Any) -> None:
    """encode(sliced=...): the tensors ranks hold in part are coded without ranks, the
    rest as the default format codes them; a rank then applies with no whole base."""
    base, target = model()
    parts = ["k", "v", "o", "down", "experts"]  # held in part; q, gate, up: whole 4 KiB chunks
    out = tmp_path / "sliced.dcr"
    dtypes = {n: "BF16" for n in base}
    stats = dcr.encode_tensors(base, target, out, base_dtypes=dtypes, target_dtypes=dtypes, sliced=parts,
                               chunk_size=4096)
    b = dcr.Bundle(out)
    assert b.info.format_version == (1, 3)
    ranked = {"DELTA_BANDED", "DELTA_CLASSED"}
    names = {t.index: t.name for t in b.tensors}
    assert all(c.encoding not in ranked for c in b.chunks if names[c.tensor] in parts)
    assert any(c.encoding in ranked for c in b.chunks if names[c.tensor] == "gate")
    whole = bundle(tmp_path, base, target, chunk_size=4096)
    assert stats.bundle_size > whole.info.bundle_size  # the price of decoding alone
    worker = Rank(base)
    st = b.apply_to(worker.places())
    assert same(worker, Rank(target)) and st.chunks_unchecked > 0
    with pytest.raises(dcr.ArgumentError, match="matches no tensor"):
        dcr.encode_tensors(base, target, base_dtypes=dtypes, target_dtypes=dtypes, sliced=["nothing.*"])


def test_cli_encode_sliced(tmp_path: Any) -> None:
    from conftest import cli

    base, target = model()
    dtypes = {n: "BF16" for n in base}
    bp, tp = tmp_path / "b.safetensors", tmp_path / "t.safetensors"
    dcr.save_safetensors(base, bp, dtypes=dtypes)
    dcr.save_safetensors(target, tp, dtypes=dtypes)
    cli("encode", bp, tp, "-o", tmp_path / "s.dcr", "--sliced", "down", "--sliced", "[kv]", "--chunk-size", "4K")
    b = dcr.Bundle(tmp_path / "s.dcr")
    names = {t.index: t.name for t in b.tensors}
    assert {c.encoding for c in b.chunks if names[c.tensor] in ("down", "k", "v")}.isdisjoint(
        {"DELTA_BANDED", "DELTA_CLASSED"})
    p = cli("encode", bp, tp, "-o", tmp_path / "x.dcr", "--sliced", "nothing", check=False)
    assert p.returncode != 0 and "matches no tensor" in p.stderr


def test_changes_iterates_the_default_format(tmp_path: Any) -> None:
    base, target = model()
    b = bundle(tmp_path, base, target)
    got = {n: a.copy() for n, a in base.items()}
    ops = []
    for ch in b.changes(base=base):
        flat = got[ch.name].reshape(-1)
        ops.append(ch.op)
        ch.apply(flat[ch.offset // 2:(ch.offset + ch.length) // 2])
    assert "delta" in ops and all(np.array_equal(got[n], target[n]) for n in base)


def test_wholly_held_chunks_are_checked_before_anything_is_written(tmp_path: Any) -> None:
    base, target = model()
    worker = Rank(base)
    worker.qkv[3, 5] ^= 0x0100  # a wrong base in a held, checkable block
    before = [a.copy() for a in worker.arrays()]
    b = bundle(tmp_path, base, target, chunk_size=4096, format="1.1")  # q's rank-0 rows: one whole chunk
    with pytest.raises(dcr.BaseMismatchError):
        b.apply_to(worker.places())
    assert all(np.array_equal(x, y) for x, y in zip(before, worker.arrays()))
    # the default format with a whole base given: the held block differs from it
    with pytest.raises(dcr.BaseMismatchError):
        bundle(tmp_path, base, target).apply_to(worker.places(), base=base)
    assert all(np.array_equal(x, y) for x, y in zip(before, worker.arrays()))


@pytest.mark.parametrize("fmt", ["1.1", None])
def test_chunks_held_across_blocks_are_checked(tmp_path: Any, fmt: Any) -> None:
    """Every chunk of "down" held by one worker in two column blocks (both ranks'
    slices): checked from the blocks, a piece at a time, before anything is written;
    a wrong byte in either block refuses the bundle; applied twice, it is seen."""
    base, target = model()
    b = bundle(tmp_path, base, target, **({"format": fmt} if fmt else {}))

    def halves(src: Dict[str, np.ndarray]) -> List[np.ndarray]:
        return [src["down"][:, : I // 2].copy(), src["down"][:, I // 2:].copy()]

    def places(held: List[np.ndarray]) -> Dict[str, Any]:
        return {"down": [dcr.Place(held[0], cols=(0, I // 2)), dcr.Place(held[1], cols=(I // 2, I))]}

    for k in (0, 1):
        held = halves(base)
        held[k][H - 1, 3] ^= 0x0001
        before = [a.copy() for a in held]
        with pytest.raises(dcr.BaseMismatchError, match="held blocks"):
            b.apply_to(places(held))
        assert all(np.array_equal(x, y) for x, y in zip(before, held))
    held = halves(base)
    stats = b.apply_to(places(held))
    assert stats.chunks_unchecked == 0 and all(np.array_equal(x, y) for x, y in zip(held, halves(target)))
    again = b.apply_to(places(held), base=base)  # blocks at the target, whole base given: still seen
    assert again.already_target and again.bytes_written == 0


def test_applied_twice_is_recognized(tmp_path: Any) -> None:
    base, target = model()
    b = bundle(tmp_path, base, target)
    worker = Rank(base)
    b.apply_to(worker.places(), base=base)
    again = b.apply_to(worker.places(), base=base)
    assert again.already_target and again.bytes_written == 0
    assert same(worker, Rank(target))


def test_chunks_not_held_are_not_decoded(tmp_path: Any) -> None:
    base, target = model()
    b = bundle(tmp_path, base, target, chunk_size=4096, format="1.1")
    gate = base["gate"][: I // 4].copy()  # rows 0..47: the first chunks of gate only
    stats = b.apply_to({"gate": dcr.Place(gate, rows=(0, I // 4))})
    assert np.array_equal(gate, target["gate"][: I // 4])
    assert stats.chunks_not_held > 0


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda a: [dcr.Place(a, rows=(0, 40)), dcr.Place(a, rows=(30, 64), at=(0, 0))], "same elements"),
        (lambda a: dcr.Place(a, rows=(0, 65)), "not a block"),
        (lambda a: dcr.Place(a, rows=(0, 64), at=(1, 0)), "does not fit"),
        (lambda a: dcr.Place(a.view(np.uint8)), "elements have 1 bytes"),
        (lambda a: dcr.Place(a[:, ::2], cols=(0, 32)), "not contiguous"),
    ],
)
def test_bad_placements_are_refused(tmp_path: Any, bad: Any, match: str) -> None:
    base, target = model()
    b = bundle(tmp_path, base, target, format="1.1")
    q = base["q"].copy()
    with pytest.raises(dcr.ArgumentError, match=match):
        b.apply_to({"q": bad(q)})
    assert np.array_equal(q, base["q"])


def test_placements_sharing_memory_are_refused(tmp_path: Any) -> None:
    base, target = model()
    b = bundle(tmp_path, base, target, format="1.1")
    buf = np.concatenate([base["q"], base["o"]])
    with pytest.raises(dcr.ArgumentError, match="overlaps"):
        b.apply_to({"q": dcr.Place(buf, rows=(0, H)), "o": dcr.Place(buf, rows=(0, H), at=(H // 2, 0))})


try:
    import torch
except ImportError:  # tools/deps.sh installs python3-torch; without it the tests above still run
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed (python3-torch)")


def to_torch(a: np.ndarray) -> Any:
    return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)


@needs_torch
def test_torch_state_dict_in_place(tmp_path: Any) -> None:
    rng = np.random.default_rng(3)
    sd = {"w.bf16": to_torch(bf16(rng, (96, 80))),
          "w.f16": torch.from_numpy(rng.normal(0, 0.02, (64, 48)).astype(np.float16)),
          "w.f32": torch.from_numpy(rng.normal(0, 0.02, (40, 30)).astype(np.float32))}
    nxt = {}
    for n, t in sd.items():
        u = t.clone()
        flat = u.view(-1)
        idx = torch.from_numpy(rng.choice(flat.numel(), flat.numel() // 50, replace=False))
        if u.dtype == torch.bfloat16:
            bits = flat.view(torch.int16)
            bits[idx] += 1
        else:
            flat[idx] = flat[idx] * 1.001
        nxt[n] = u
    out = tmp_path / "sd.dcr"
    dcr.encode_tensors(sd, nxt, out)
    held = {n: t.clone() for n, t in sd.items()}
    dcr.Bundle(out).apply_to(held, verify="full")
    for n in sd:
        assert torch.equal(held[n].view(torch.uint8), nxt[n].view(torch.uint8)), n


@needs_torch
@pytest.mark.parametrize("fmt", ["1.1", None])
def test_torch_rank_with_fused_parameters(tmp_path: Any, fmt: Any) -> None:
    base, target = model()
    b = bundle(tmp_path, base, target, **({"format": fmt} if fmt else {}))
    worker = Rank(base, 0, 2, new=to_torch)
    whole = {n: to_torch(a) for n, a in base.items()} if fmt is None else None
    b.apply_to(worker.places(), base=whole)
    want = Rank(target, 0, 2, new=to_torch)
    assert same(worker, want)


@needs_torch
@pytest.mark.parametrize("fmt", ["1.1", None])
def test_torch_scatter_of_changes_into_places(tmp_path: Any, fmt: Any) -> None:
    """The device path: changes() scattered by dcr.scatter with torch index
    operations (CUDA tensors where a GPU exists; CPU tensors here)."""
    base, target = model()
    b = bundle(tmp_path, base, target, chunk_size=4096, **({"format": fmt} if fmt else {}))
    worker = Rank(base, 1, 2, new=to_torch)
    places = worker.places()
    places["norm"] = dcr.Place(worker.norm)
    shapes = {t.name: t.target.shape for t in b.tensors}
    held = 0
    for ch in b.changes(base=base):
        held += dcr.scatter(ch, places[ch.name], shapes[ch.name])
    assert held > 0
    assert same(worker, Rank(target, 1, 2, new=to_torch))


@needs_torch
@pytest.mark.parametrize("dtype, esize", [("F32", 4), ("I64", 8), ("U8", 1)])
def test_torch_scatter_every_element_size(tmp_path: Any, dtype: str, esize: int) -> None:
    rng = np.random.default_rng(11)
    np_dtype = {1: np.uint8, 4: np.uint32, 8: np.uint64}[esize]
    a = rng.integers(0, 1 << (8 * esize - 2), size=(24, 40), dtype=np.uint64).astype(np_dtype)
    t = a.copy()
    m = rng.random(a.shape) < 0.1
    t[m] += np.array(1, np_dtype)  # one unit: the delta encodings
    t[0, :3] = np.array([0, (1 << (8 * esize)) - 1, 5], dtype=np.uint64).astype(np_dtype)  # wrap-arounds
    out = tmp_path / f"e{esize}.dcr"
    dcr.encode_tensors({"w": a}, {"w": t}, out, base_dtypes={"w": dtype}, target_dtypes={"w": dtype}, format="1.1")
    held = torch.from_numpy(a[:, 10:30].copy().view({1: np.int8, 4: np.int32, 8: np.int64}[esize]))
    for ch in dcr.Bundle(out).changes():
        dcr.scatter(ch, dcr.Place(held, cols=(10, 30)), (24, 40))
    assert np.array_equal(held.numpy().view(np_dtype), t[:, 10:30])
