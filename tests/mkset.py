#!/usr/bin/env python3
"""mkset.py - lay a safetensors checkpoint out as a Hugging Face model directory, for
the tests and benchmarks of checkpoint sets (SPEC.md 2.3). Standard library only.

usage: mkset.py SRC.safetensors OUT_DIR [--shards N] [--reverse] [--move NAME]
                [--grow NAME:ROWS] [--seed S] [--config TEXT] [--no-extras]

Writes OUT_DIR/model-0000i-of-0000N.safetensors (the tensors in name order, cut
into N shards of about equal size), model.safetensors.index.json (metadata and
weight_map, as transformers writes it), config.json, generation_config.json,
tokenizer.json and tokenizer/special_tokens_map.json (a member in a
subdirectory). --reverse fills the shards in reverse name order (the same tensors,
sharded otherwise); --move NAME puts that tensor in the last shard; --grow
NAME:ROWS appends ROWS rows of seeded random bytes to that tensor's first
dimension (a vocabulary grown); --config replaces config.json's text.
"""
import json
import os
import random
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None)
    tensors = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        tensors[name] = (t["dtype"], list(t["shape"]), data[b:e])
    return meta, tensors


def write(path, meta, items):
    header, blobs, at = {}, [], 0
    if meta is not None:
        header["__metadata__"] = meta
    for name, (dtype, shape, blob) in items:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def main(argv):
    args, opts = [], {"shards": 4, "seed": 1, "grow": None, "move": None, "reverse": False,
                      "config": None, "extras": True}
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in ("--shards", "--seed", "--grow", "--move", "--config"):
            opts[a[2:]] = argv[i + 1]
            i += 2
            continue
        if a == "--reverse":
            opts["reverse"] = True
        elif a == "--no-extras":
            opts["extras"] = False
        else:
            args.append(a)
        i += 1
    if len(args) != 2:
        sys.exit(__doc__)
    src, out = args
    meta, tensors = read(src)
    rng = random.Random(int(opts["seed"]))
    if opts["grow"]:
        name, rows = opts["grow"].rsplit(":", 1)
        dtype, shape, blob = tensors[name]
        row = len(blob) // shape[0]
        blob += bytes(rng.getrandbits(8) for _ in range(int(rows) * row))
        tensors[name] = (dtype, [shape[0] + int(rows)] + shape[1:], blob)
    names = sorted(tensors, reverse=opts["reverse"])
    if opts["move"]:
        names.remove(opts["move"])
    count = int(opts["shards"])
    total = sum(len(tensors[n][2]) for n in names)
    shards, current, size = [], [], 0
    for n in names:
        current.append(n)
        size += len(tensors[n][2])
        if size >= total * (len(shards) + 1) / count and len(shards) < count - 1:
            shards.append(current)
            current = []
    shards.append(current)
    while len(shards) < count:
        shards.append([])
    if opts["move"]:
        shards[-1].append(opts["move"])
    os.makedirs(out, exist_ok=True)
    weight_map = {}
    for k, names_k in enumerate(shards):
        file = "model-%05d-of-%05d.safetensors" % (k + 1, count)
        write(os.path.join(out, file), meta, [(n, tensors[n]) for n in names_k])
        for n in names_k:
            weight_map[n] = file
    index = {"metadata": {"total_size": sum(len(t[2]) for t in tensors.values())},
             "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
    if not opts["extras"]:
        return
    config = opts["config"] or json.dumps({"architectures": ["LlamaForCausalLM"],
                                           "hidden_size": 192, "torch_dtype": "bfloat16"})
    with open(os.path.join(out, "config.json"), "w") as f:
        f.write(config)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        f.write('{"do_sample": true, "temperature": 0.6}\n')
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump({"model": {"vocab": {"tok%d" % i: i for i in range(2000)}}}, f)
    os.makedirs(os.path.join(out, "tokenizer"), exist_ok=True)
    with open(os.path.join(out, "tokenizer", "special_tokens_map.json"), "w") as f:
        f.write('{"eos_token": "</s>"}\n')


if __name__ == "__main__":
    main(sys.argv)
