"""Bundles of model directories (checkpoint sets, SPEC.md §2.3) applied in memory to
the weights a worker holds: dcr.load_checkpoint reads a directory, and
Bundle.apply_to patches the weight arrays alone, raw members (config.json, the
tokenizer, the index) left out, across a chain whose steps change weights, move a
tensor to another shard and grow the vocabulary."""

import json
import os

import numpy as np
import pytest

import dcr

HIDDEN = 64


def bf16(rng, shape):
    """BF16 bits (as uint16) of small random weights."""
    return (rng.standard_normal(shape).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def step(rng, tensors, rate=0.05):
    """One training step: a few elements of every tensor move by one ulp."""
    out = {}
    for name, a in tensors.items():
        a = a.copy()
        flat = a.reshape(-1)
        hit = rng.random(flat.size) < rate
        flat[hit] = flat[hit] + rng.choice(np.array([1, 0xFFFF], np.uint16), int(hit.sum()))
        out[name] = a
    return out


def write_model(path, tensors, shard_of, vocab, note):
    """A Hugging Face layout: four shards, their index, config.json, tokenizer files."""
    os.makedirs(os.path.join(path, "tokenizer"))
    names = [f"model-{i + 1:05d}-of-00004.safetensors" for i in range(4)]
    for i, fn in enumerate(names):
        part = {k: v for k, v in tensors.items() if shard_of[k] == i}
        dcr.save_safetensors(part, os.path.join(path, fn), {"format": "pt"}, dtypes={k: "BF16" for k in part})
    index = {"metadata": {"total_size": sum(v.nbytes for v in tensors.values())},
             "weight_map": {k: names[shard_of[k]] for k in sorted(tensors)}}
    files = {
        "model.safetensors.index.json": json.dumps(index, indent=2),
        "config.json": json.dumps({"vocab_size": vocab, "hidden_size": HIDDEN, "note": note}, indent=2),
        "tokenizer.json": json.dumps({"vocab": {f"t{i}": i for i in range(vocab)}}),
        "tokenizer/special_tokens_map.json": '{"eos_token": "t0"}',
    }
    for rel, text in files.items():
        with open(os.path.join(path, rel), "w") as f:
            f.write(text)


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """Five model directories and the four bundles between them:
    1: weights change; 2: weights and config change, a tensor moves to shard 4;
    3: the vocabulary grows by 32 rows (embed_tokens, lm_head, tokenizer.json
    resized); 4: weights change."""
    root = tmp_path_factory.mktemp("sets")
    rng = np.random.default_rng(5)
    vocab = 512
    tensors = {"model.embed_tokens.weight": bf16(rng, (vocab, HIDDEN)), "lm_head.weight": bf16(rng, (vocab, HIDDEN))}
    for layer in range(4):
        for part in ("q_proj", "k_proj", "mlp.up_proj"):
            tensors[f"model.layers.{layer}.{part}.weight"] = bf16(rng, (HIDDEN, HIDDEN))
    tensors["model.norm.weight"] = bf16(rng, (HIDDEN,))
    order = sorted(tensors)
    shard_of = {k: i * 4 // len(order) for i, k in enumerate(order)}
    moved = "model.layers.0.k_proj.weight"
    assert shard_of[moved] != 3
    dirs = []
    for k in range(5):
        if k:
            tensors = step(rng, tensors)
        if k == 2:
            shard_of[moved] = 3
        if k == 3:
            vocab += 32
            for name in ("model.embed_tokens.weight", "lm_head.weight"):
                tensors[name] = np.concatenate([tensors[name], bf16(rng, (32, HIDDEN))])
        d = root / f"step{k}"
        write_model(str(d), tensors, shard_of, vocab, "step 2 config" if k >= 2 else "first")
        dirs.append(d)
    bundles = [dcr.Bundle(dcr.encode_bytes(dirs[k], dirs[k + 1], chunk_size=4096)[0]) for k in range(4)]
    return dirs, bundles


def same(held, want):
    """Every tensor of want, byte for byte, and no other."""
    assert sorted(held) == sorted(want)
    for name, a in want.items():
        assert np.asarray(held[name]).tobytes() == a.tobytes(), name


def test_load_checkpoint_reads_a_directory(chain):
    dirs, _ = chain
    w = dcr.load_checkpoint(dirs[0])
    assert "config.json" not in w and len(w) == 2 + 12 + 1
    assert w.dtypes["lm_head.weight"] == "BF16" and w["lm_head.weight"].shape == (512, HIDDEN)
    shard = dcr.load_safetensors(dirs[0] / "model-00004-of-00004.safetensors")
    for name, a in shard.items():
        assert w[name].tobytes() == a.tobytes()
    r = dcr.load_checkpoint(dirs[0], raw=True)
    assert r["config.json"].tobytes() == (dirs[0] / "config.json").read_bytes()
    assert r["tokenizer/special_tokens_map.json"].dtype == np.uint8
    f = dcr.load_checkpoint(dirs[0] / "model-00001-of-00004.safetensors")  # a file: load_safetensors
    assert sorted(f) == sorted(dcr.load_safetensors(dirs[0] / "model-00001-of-00004.safetensors"))


def test_set_bundles_kinds(chain):
    _, bundles = chain
    assert all(b.info.kind == "set" for b in bundles)
    grow = {t.name: t for t in bundles[2].tensors}
    assert grow["lm_head.weight"].status == "resized" and grow["tokenizer.json"].status == "resized"
    assert grow["config.json"].raw_member and not grow["lm_head.weight"].raw_member


@pytest.mark.parametrize("level", ["full", "chunk", "none"])
def test_chain_applies_to_weights_alone(chain, level):
    dirs, bundles = chain
    held = dcr.load_checkpoint(dirs[0])
    # any view of the right bytes will do: uint8, flat uint16, the loaded uint16
    held["model.embed_tokens.weight"] = held["model.embed_tokens.weight"].view(np.uint8)
    held["lm_head.weight"] = held["lm_head.weight"].reshape(-1)
    for k, b in enumerate(bundles):
        before = held["lm_head.weight"]
        st = b.apply_to(held, level)
        assert not st.already_target
        same(held, dcr.load_checkpoint(dirs[k + 1]))
        assert (held["lm_head.weight"] is before) == (k != 2)  # grown: a new array
        if level != "none":
            assert b.apply_to(held, level).already_target  # received twice: harmless
            same(held, dcr.load_checkpoint(dirs[k + 1]))


def test_chain_with_raw_members_given(chain):
    dirs, bundles = chain
    held = dcr.load_checkpoint(dirs[0], raw=True)
    for k, b in enumerate(bundles):
        b.apply_to(held, "full")
        same(held, dcr.load_checkpoint(dirs[k + 1], raw=True))


@pytest.mark.parametrize("level", ["full", "chunk"])
def test_wrong_base_is_refused_before_any_change(chain, level):
    dirs, bundles = chain
    for k in (1, 2, 3):  # a step skipped: the arrays are the step before the bundle's base
        held = dcr.load_checkpoint(dirs[k - 1])
        arrays = dict(held)
        snap = {n: a.copy() for n, a in held.items()}
        # one with a tensor of another size (the vocabulary not grown yet) is a
        # request that cannot be carried out, found before the library is called
        with pytest.raises(dcr.ArgumentError if k == 3 else dcr.BaseMismatchError):
            bundles[k].apply_to(held, level)
        assert all(held[n] is arrays[n] for n in arrays) and sorted(held) == sorted(arrays)
        same(held, snap)


def test_one_wrong_weight_is_refused_at_full(chain):
    dirs, bundles = chain
    held = dcr.load_checkpoint(dirs[2])
    held["model.norm.weight"][0] ^= 1  # a tensor the grown step does not change: only "full" reads it
    snap = {n: a.copy() for n, a in held.items()}
    with pytest.raises(dcr.BaseMismatchError, match="model.norm.weight"):
        bundles[2].apply_to(held, "full")
    same(held, snap)
