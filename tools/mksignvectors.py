#!/usr/bin/env python3
"""mksignvectors.py - the signed-bundle vectors (SPEC.md §20): testvectors/sign-v1/
(signature format 1.0, checkpoint signatures) and testvectors/sign-v2/ (signature
format 2.0, bundle signatures, §20.6).

usage: tools/mksignvectors.py [OUT]   (default: testvectors; writes OUT/sign-v1/ and OUT/sign-v2/)

Written from the spec alone, independent of libdcr: it signs frozen vectors
(testvectors/v1/ and testvectors/v1.3/, which never change) with Ed25519 from
libsodium and hashes with hashlib's SHA-256, both through nothing but their own
interfaces (libsodium and libxxhash by ctypes; XXH3-64 only for the section
checksums of §4.2). Ed25519 is deterministic and the keys come from fixed seeds, so
the same inputs give the same bytes: `make vectors-check` runs this again and
compares each folder. sign-v1/ is frozen: a change here must leave its bytes as
they are.

The two test keys' seeds are in the indexes: they are public, and sign nothing
but test vectors. Both folders use the same two keys.
"""
import ctypes
import ctypes.util
import hashlib
import json
import os
import struct
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
V1 = os.path.join(ROOT, "testvectors", "v1")
V13 = os.path.join(ROOT, "testvectors", "v1.3")
OUTDIR = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "testvectors")

sodium = ctypes.CDLL(ctypes.util.find_library("sodium") or "libsodium.so.23")
xxh = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
xxh.XXH3_64bits.restype = ctypes.c_uint64
xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
assert sodium.sodium_init() >= 0


def xxh3(b):
    return xxh.XXH3_64bits(b, len(b))


def keypair(label):
    seed = hashlib.sha256(label.encode()).digest()
    pk, sk = ctypes.create_string_buffer(32), ctypes.create_string_buffer(64)
    assert sodium.crypto_sign_seed_keypair(pk, sk, seed) == 0
    return {"seed": seed, "pk": pk.raw, "sk": sk.raw, "id": hashlib.sha256(pk.raw).digest()[:16]}


def ed25519(sk, message):
    sig = ctypes.create_string_buffer(64)
    assert sodium.crypto_sign_detached(sig, None, message, ctypes.c_ulonglong(len(message)), sk) == 0
    return sig.raw


TEST, OTHER = keypair("dcr sign-v1 test key"), keypair("dcr sign-v1 other key")

# ---- bundles: sections (§4.2) ----------------------------------------------------


def sections(b):
    """[(type, offset, extent)] from offset 64 to FOOT included"""
    out, at = [], 64
    while True:
        t = b[at:at + 4]
        length, = struct.unpack_from("<Q", b, at + 8)
        end = (at + 32 + length + 63) // 64 * 64
        out.append((t, at, end - at))
        if t == b"FOOT":
            return out
        at = end


def section(kind, payload, flags=0):
    head = kind + struct.pack("<HBBQQ", flags, 0, 0, len(payload), xxh3(payload))
    head += struct.pack("<Q", xxh3(head))
    raw = head + payload
    return raw + b"\0" * (-len(raw) % 64)


def fix_section(b, at):
    """recomputes the payload and header checks of the section at `at`"""
    length, = struct.unpack_from("<Q", b, at + 8)
    b[at + 16:at + 24] = struct.pack("<Q", xxh3(bytes(b[at + 32:at + 32 + length])))
    b[at + 24:at + 32] = struct.pack("<Q", xxh3(bytes(b[at:at + 24])))


def unsigned(b):
    """the bundle without its SIGN section, if it has one: the footer does not name SIGN"""
    s = sections(b)
    if s[-2][0] != b"SIGN":
        return b
    return b[:s[-2][1]] + b[s[-1][1]:]

# ---- checkpoints: tensors (§2.1) and their SHA-256 digests (§20.2) ---------------


def tensors(path):
    data = open(path, "rb").read()
    if path.endswith(".bin"):
        return {b"raw": data}
    n, = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    base = 8 + n
    return {k.encode(): data[base + v["data_offsets"][0]:base + v["data_offsets"][1]]
            for k, v in header.items() if k != "__metadata__"}


def tensor_digest(t):
    return hashlib.sha256(b"".join(hashlib.sha256(t[i:i + 4096]).digest()
                                   for i in range(0, len(t), 4096))).digest()


def tensor_digests(base, target):
    """entry order (names bytewise), base before target (§20.2)"""
    b, t = tensors(os.path.join(V1, base)), tensors(os.path.join(V1, target))
    out = []
    for name in sorted(set(b) | set(t)):
        if name in b:
            out.append(tensor_digest(b[name]))
        if name in t:
            out.append(tensor_digest(t[name]))
    return out

# ---- the table and the SIGN payload (§20.2, §20.3) --------------------------------


def table(b, digests, **bad):
    s = sections(b)
    sign_at = s[-1][1]  # FOOT: an unsigned bundle
    covered = s[:-1]
    t = bytearray(bad.get("domain", b"DCR-SIGN-TABLE-1"))
    t += bad.get("header", b[:64])
    t += struct.pack("<QQQQ", bad.get("sign_offset", sign_at), len(covered), len(digests),
                     bad.get("reserved", 0))
    for kind, at, extent in covered:
        t += kind + struct.pack("<IQQ", 0, at, extent) + hashlib.sha256(b[at:at + extent]).digest()
    for d in digests:
        t += d
    return t


def record(key, message):
    return bytes([1]) + b"\0" * 7 + key["id"] + ed25519(key["sk"], bytes(message))


def payload(t, records, major=1, minor=0):
    return struct.pack("<HHIQ", major, minor, len(records), len(t)) + bytes(t) + b"".join(records)


def signed(b, p):
    """b (unsigned) with SIGN payload p before its footer"""
    return b[:-64] + section(b"SIGN", p) + b[-64:]


def by_id(*keys):
    return sorted(keys, key=lambda k: k["id"])



def read(root, path):
    with open(os.path.join(root, path), "rb") as f:
        return f.read()

# ---- a folder of vectors ------------------------------------------------------------


class Corpus:
    """the vectors and files of one folder (sign-v1/, sign-v2/)"""

    def __init__(self, name):
        self.name, self.vectors, self.files = name, [], {}

    def add(self, vid, bundle, result="valid", error=None, stage=None, keys=("test",), base=None, target=None,
            covers=(), description=""):
        """base and target: checkpoints of testvectors/v1/, by their path there"""
        path = vid + ".dcr"
        self.files[path] = bytes(bundle)
        v = {"id": vid, "bundle": path, "sha256": hashlib.sha256(bundle).hexdigest(),
             "keys": ["keys/%s.pub" % k for k in keys], "result": result, "error": error, "stage": stage,
             "unsigned": "valid"}
        if base:
            v["base"] = "../v1/" + base
        if target:
            v["target"] = "../v1/" + target
        v["covers"] = list(covers)
        v["description"] = description
        self.vectors.append(v)

    def bad(self, vid, bundle, covers, description, stage="signature", **kw):
        self.add(vid, bundle, "invalid", "DCR_E_SIGNATURE", stage, covers=covers, description=description, **kw)

    def write(self, out, format_version, spec, generator, usage, without):
        self.files["keys/test.pub"] = pubkey_file(TEST)
        self.files["keys/other.pub"] = pubkey_file(OTHER)
        index = {
            "format": "DCR signatures (SIGN section)",
            "format_version": format_version,
            "spec": spec,
            "generator": generator,
            "usage": usage,
            "keys": {"test": {"seed": TEST["seed"].hex(), "key_id": TEST["id"].hex(), "public_key": TEST["pk"].hex()},
                     "other": {"seed": OTHER["seed"].hex(), "key_id": OTHER["id"].hex(),
                               "public_key": OTHER["pk"].hex()},
                     "note": "test keys from fixed seeds (SHA-256 of 'dcr sign-v1 test key', 'dcr sign-v1 other key'): "
                             "public, never to sign anything but these vectors"},
            "requirements_without_vectors": without,
            "counts": {"valid": sum(v["result"] == "valid" for v in self.vectors),
                       "invalid": sum(v["result"] == "invalid" for v in self.vectors)},
            "vectors": self.vectors,
        }
        self.files["index.json"] = (json.dumps(index, indent=1, ensure_ascii=True) + "\n").encode()
        folder = os.path.join(out, self.name)
        for path, data in self.files.items():
            full = os.path.join(folder, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(data)
        print("mksignvectors: %d vectors (%d valid, %d invalid) in %s" % (
            len(self.vectors), index["counts"]["valid"], index["counts"]["invalid"], folder))


def pubkey_file(k):
    import base64
    return ("dcr-ed25519-public-key v1\n%s\n%s\n" % (k["id"].hex(), base64.b64encode(k["pk"]).decode())).encode()


MB, MT = "ckpt/model-base.safetensors", "ckpt/model-target.safetensors"

# ---- sign-v1/: checkpoint signatures, signature format 1.0 (frozen) ------------------


def digest_flips(t0, s):
    """for each section of `s` but FOOT: (type, vector name, offset, the table t0 with
    one bit of that section's signed digest flipped)"""
    for i, (kind, where, _) in enumerate(s[:-1]):
        t = bytearray(t0)
        t[112 + 56 * i + 24] ^= 0x01
        n = sum(1 for k, _, _ in s[:i] if k == kind)
        yield kind, kind.decode() + ("-%d" % n if kind == b"CHNK" else ""), where, t


def changed_after_signing(bad, one, s):
    """the vectors of a signed bundle `one` (sections `s` of the unsigned one) changed
    after it was signed, its XXH3 checks made right: a chunk, the header, a section
    inserted (R-SIG-3), whichever signature format"""
    tampered = bytearray(one)
    chnk = [w for k, w, _ in s if k == b"CHNK"][1]
    tampered[chnk + 32 + 24] ^= 0x01  # the chunk record's target_check
    fix_section(tampered, chnk)
    bad("invalid/chunk-changed", tampered, ["R-SIG-3"],
        "the second CHNK's target_check changed and its section checksums made right: the structure is valid, "
        "the section is not the signed one")
    hdr = bytearray(one)
    hdr[10] = 2  # minor 0 -> 2: a reader of 1.2 accepts it, and reads it the same
    hdr[56:64] = struct.pack("<Q", xxh3(bytes(hdr[:56])))
    bad("invalid/header-changed", hdr, ["R-SIG-3"], "the bundle header's minor version changed from 0 to 2")
    ins = one[:s[-1][1]] + section(b"XTRA", b"inserted") + one[s[-1][1]:]
    bad("invalid/section-inserted", ins, ["R-SIG-3"],
        "an ancillary section inserted between INDX and SIGN: the signature covers one section fewer")


def sign_v1():
    c = Corpus("sign-v1")
    add, bad = c.add, c.bad
    model = read(V1, "valid/model.dcr")
    md = tensor_digests(MB, MT)
    mt = table(model, md)
    one = signed(model, payload(mt, [record(TEST, mt)]))
    add("valid/model-signed", one, base=MB, target=MT, covers=["R-SIG-1", "R-SIG-2", "R-SIG-3", "R-SIG-6", "§20.2"],
        description="testvectors/v1/valid/model.dcr signed by the test key; its base and target have the signed digests")
    two = signed(model, payload(mt, [record(k, mt) for k in by_id(TEST, OTHER)]))
    add("valid/model-signed-twice", two, covers=["R-SIG-2", "R-SIG-7"],
        description="signed by the test key and the other key, in key id order; the test key trusted")
    add("valid/model-signed-twice-other-trusted", two, keys=("other",), covers=["R-SIG-2"],
        description="the same bundle, the other key trusted: a signature by a key not trusted is neither used nor refused")
    add("valid/model-signed-minor-7", signed(model, payload(mt, [record(TEST, mt)], minor=7)), covers=["R-SIG-1"],
        description="signature format 1.7: a verifier of 1.0 accepts any minor version of the SIGN payload")
    raw = read(V1, "valid/raw.dcr")
    rt = table(raw, tensor_digests("ckpt/raw-base.bin", "ckpt/raw-target.bin"))
    add("valid/raw-signed", signed(raw, payload(rt, [record(TEST, rt)])), base="ckpt/raw-base.bin",
        target="ckpt/raw-target.bin", covers=["R-SIG-3", "R-SIG-6"],
        description="a raw bundle signed: one tensor named raw on each side")
    anc = unsigned(read(V1, "valid/ancillary-sections.dcr"))
    at = table(anc, tensor_digests("ckpt/enc-base.safetensors", "ckpt/enc-target.safetensors"))
    add("valid/ancillary-signed", signed(anc, payload(at, [record(TEST, at)])), covers=["R-SIG-3"],
        description="unknown ancillary sections, one zstd-compressed, signed like any other section")

    # a reader that requires signatures
    add("invalid/unsigned", model, "invalid", "DCR_E_SIGNATURE", "signature", covers=["R-SIG-4", "R-SIG-5"],
        description="testvectors/v1/valid/model.dcr as it is: no SIGN section (a stripped signature)")
    add("invalid/v1-ancillary-sections", read(V1, "valid/ancillary-sections.dcr"),
        "invalid", "DCR_E_SIGNATURE", "signature", covers=["R-SIG-1", "R-SIG-5"],
        description="the frozen 1.0 vector whose SIGN section holds the bytes 'reserved': valid for a reader that "
                    "does not check signatures, malformed for one that does")
    sig = bytearray(one)
    sign_at = sections(sig)[-2][1]
    sig[sign_at + 32 + struct.unpack_from("<Q", sig, sign_at + 8)[0] - 1] ^= 0x01  # the signature's last byte
    fix_section(sig, sign_at)
    bad("invalid/bad-signature", sig, ["R-SIG-2"], "one bit of the Ed25519 signature flipped")
    bad("invalid/wrong-key", signed(model, payload(mt, [record(OTHER, mt)])), ["R-SIG-2", "R-SIG-8"],
        "signed by the other key only; the test key trusted")
    rec = by_id(TEST, OTHER)
    mixed = [bytearray(record(k, mt)) for k in rec]
    mixed[[k["id"] for k in rec].index(OTHER["id"])][-1] ^= 0x80
    bad("invalid/one-of-two-bad", signed(model, payload(mt, mixed)), ["R-SIG-2"],
        "a good signature by the test key and a bad one by the other key, both trusted: every trusted one must verify",
        keys=("test", "other"))

    # the table against the bundle: each section of the model bundle
    s = sections(model)
    for kind, name, where, t in digest_flips(mt, s):
        bad("invalid/digest-" + name, signed(model, payload(t, [record(TEST, t)])), ["R-SIG-3"],
            "the signed SHA-256 digest of %s at offset %d is not that section's (signed as it is)" % (name, where))
    changed_after_signing(bad, one, s)
    bad("invalid/sign-offset-wrong", signed(model, payload(t2 := table(model, md, sign_offset=64), [record(TEST, t2)])),
        ["R-SIG-3"], "the table's sign_offset is 64 (signed as it is)")
    bad("invalid/header-copy-wrong",
        signed(model, payload(t3 := table(model, md, header=b"\0" * 64), [record(TEST, t3)])),
        ["R-SIG-3"], "the table's copy of the bundle header is zeros (signed as it is)")
    bad("invalid/digest-count-wrong", signed(model, payload(t4 := table(model, md + [b"\0" * 32]), [record(TEST, t4)])),
        ["R-SIG-3"], "one tensor digest too many, the table's lengths consistent (signed as it is)")

    # the SIGN payload by itself (§20.3 steps 1-8)
    bad("invalid/payload-short", signed(model, b"\1\0\1\0\0\0\0\0"), ["R-SIG-1"], "a SIGN payload of 8 bytes")
    bad("invalid/major-2", signed(model, payload(mt, [record(TEST, mt)], major=2)), ["R-SIG-1"],
        "signature format 2.0: a verifier of 1.x cannot know what it signs")
    bad("invalid/no-signatures", signed(model, payload(mt, [])), ["R-SIG-1"], "a table and no signature")
    bad("invalid/table-length-wrong", signed(model, payload(mt, [record(TEST, mt)])[:-1]), ["R-SIG-1"],
        "the payload one byte short of its table and signature")
    bad("invalid/domain-wrong",
        signed(model, payload(t5 := table(model, md, domain=b"DCR-SIGN-TABLE-2"), [record(TEST, t5)])),
        ["R-SIG-1"], "the table starts with DCR-SIGN-TABLE-2 (signed as it is)")
    bad("invalid/table-reserved", signed(model, payload(t6 := table(model, md, reserved=1), [record(TEST, t6)])),
        ["R-SIG-1"], "the table's reserved u64 is 1 (signed as it is)")
    t7 = bytearray(mt)
    t7[112 + 4] = 1
    bad("invalid/section-record-reserved", signed(model, payload(t7, [record(TEST, t7)])), ["R-SIG-1"],
        "the first section record's reserved field is 1 (signed as it is)")
    r8 = bytearray(record(TEST, mt))
    r8[0] = 2
    bad("invalid/algorithm-2", signed(model, payload(mt, [r8])), ["R-SIG-1"], "a signature of algorithm 2")
    r9 = bytearray(record(TEST, mt))
    r9[7] = 1
    bad("invalid/record-reserved", signed(model, payload(mt, [r9])), ["R-SIG-1"],
        "a signature record's reserved byte 7 is 1")
    bad("invalid/key-ids-unordered",
        signed(model, payload(mt, [record(k, mt) for k in reversed(by_id(TEST, OTHER))])),
        ["R-SIG-1"], "two signatures in decreasing key id order")
    bad("invalid/same-key-twice", signed(model, payload(mt, [record(TEST, mt), record(TEST, mt)])), ["R-SIG-1"],
        "the test key's signature twice")

    # checkpoints against the signed tensor digests
    for side, k, ck in ((0, "base", MB), (1, "target", MT)):
        d = list(md)
        d[0 if side == 0 else 1] = bytes(32)  # the first entry has both sides: its base digest is 0, target 1
        t = table(model, d)
        bad("invalid/%s-digest-wrong" % k, signed(model, payload(t, [record(TEST, t)])), ["R-SIG-6"],
            "the signed SHA-256 digest of the first %s tensor is zeros: the %s given does not have it" % (k, k),
            stage=k, **{k: ck})
    add("invalid/base-not-the-base", one, "invalid", "DCR_E_BASE_MISMATCH", "base", base=MT, covers=["R-SIG-6"],
        description="the model bundle's target given as its base: not its tensors")

    c.write(OUTDIR, "1.0", "SPEC.md §20",
            "tools/mksignvectors.py (hashlib; libsodium and libxxhash by ctypes), from the frozen "
            "testvectors/v1/ bundles and checkpoints",
            "for each vector, open `bundle` as a reader that requires signatures and trusts the public keys "
            "`keys` (dcr verify BUNDLE --pubkey KEY...), and, where given, check `base` and `target` against "
            "the signed tensor digests (--base, --target). A valid vector passes; an invalid one fails with "
            "`error` at `stage`: structure, signature, base or target. `unsigned`: the outcome for a reader "
            "that does not check signatures (dcr validate BUNDLE): every vector is a valid bundle",
            {"R-SIG-9": "a writer's duty (sign only a bundle checked whole, against its own base and target): "
                        "tests/cli_sign_test.sh signs with a wrong base and target and expects refusal"})

# ---- sign-v2/: bundle signatures, signature format 2.0 (§20.6) ----------------------

DOMAIN1, DOMAIN2 = b"DCR-SIGN-TABLE-1", b"DCR-SIGN-TABLE-2"


def table2(b, digests=(), **bad):
    """a bundle signature's table (§20.6): domain DCR-SIGN-TABLE-2, no tensor digest"""
    bad.setdefault("domain", DOMAIN2)
    return table(b, list(digests), **bad)


def bundle_signed(b, t, keys=(TEST,), major=2, minor=0):
    """b (unsigned) with a SIGN payload of `major` over table t, by `keys` in key id order"""
    return signed(b, payload(t, [record(k, t) for k in by_id(*keys)], major=major, minor=minor))


def sign_v2():
    c = Corpus("sign-v2")
    add, bad = c.add, c.bad
    model = read(V1, "valid/model.dcr")
    mt = table2(model)
    one = bundle_signed(model, mt)
    add("valid/model-signed", one, covers=["R-SIG-1", "R-SIG-2", "R-SIG-3", "§20.6", "§20.2"],
        description="testvectors/v1/valid/model.dcr bundle-signed by the test key: payload 2.0, its table "
                    "DCR-SIGN-TABLE-2 with the header and the 8 sections before SIGN and no tensor digest (N = 0)")
    two = bundle_signed(model, mt, keys=(TEST, OTHER))
    add("valid/model-signed-twice", two, covers=["R-SIG-2", "R-SIG-7", "§20.6"],
        description="bundle-signed by the test key and the other key over one table, in key id order; "
                    "the test key trusted")
    add("valid/model-signed-twice-other-trusted", two, keys=("other",), covers=["R-SIG-2", "R-SIG-8"],
        description="the same bundle, the other key trusted: a signature by a key not trusted is neither used "
                    "nor refused")
    add("valid/model-signed-minor-5", bundle_signed(model, mt, minor=5), covers=["R-SIG-1", "§20.5"],
        description="signature format 2.5: a verifier of 2.0 accepts any minor version of a major-2 payload")
    raw = read(V1, "valid/raw.dcr")
    add("valid/raw-signed", bundle_signed(raw, table2(raw)), covers=["R-SIG-3", "§20.6"],
        description="testvectors/v1/valid/raw.dcr (a raw bundle: one tensor named raw on each side) bundle-signed")
    banded = unsigned(read(V13, "valid/banded-model.dcr"))
    add("valid/banded-model-signed", bundle_signed(banded, table2(banded)), covers=["R-SIG-3", "§20.6"],
        description="testvectors/v1.3/valid/banded-model.dcr (bundle format 1.3, DELTA_BANDED chunks; its base and "
                    "target are testvectors/v1.3/ckpt/model-*.safetensors) bundle-signed: the signature format does "
                    "not depend on the bundle format's minor version")
    anc = unsigned(read(V1, "valid/ancillary-sections.dcr"))
    add("valid/ancillary-signed", bundle_signed(anc, table2(anc)), covers=["R-SIG-3"],
        description="testvectors/v1/valid/ancillary-sections.dcr without its SIGN section, bundle-signed: unknown "
                    "ancillary sections, one zstd-compressed, signed like any other section")

    # a reader that requires signatures
    add("invalid/unsigned", model, "invalid", "DCR_E_SIGNATURE", "signature", covers=["R-SIG-4", "R-SIG-5"],
        description="testvectors/v1/valid/model.dcr as it is: no SIGN section (a stripped signature)")
    sig = bytearray(one)
    sign_at = sections(sig)[-2][1]
    sig[sign_at + 32 + struct.unpack_from("<Q", sig, sign_at + 8)[0] - 1] ^= 0x01  # the signature's last byte
    fix_section(sig, sign_at)
    bad("invalid/bad-signature", sig, ["R-SIG-2"],
        "one bit of the Ed25519 signature flipped (SIGN's section checksums made right)")
    bad("invalid/wrong-key", bundle_signed(model, mt, keys=(OTHER,)), ["R-SIG-2", "R-SIG-8"],
        "bundle-signed by the other key only; the test key trusted")
    rec = by_id(TEST, OTHER)
    mixed = [bytearray(record(k, mt)) for k in rec]
    mixed[[k["id"] for k in rec].index(OTHER["id"])][-1] ^= 0x80
    bad("invalid/one-of-two-bad", signed(model, payload(mt, mixed, major=2)), ["R-SIG-2"],
        "a good bundle signature by the test key and a bad one by the other key, both trusted: every trusted one "
        "must verify", keys=("test", "other"))

    # the table against the bundle (R-SIG-3): each section of the model bundle
    s = sections(model)
    for kind, name, where, t in digest_flips(mt, s):
        extra = (": IDEN holds the XXH3-128 hashes of the base and target tensors, all a bundle signature says "
                 "of them (§20.6)") if kind == b"IDEN" else ""
        bad("invalid/digest-" + name, bundle_signed(model, t), ["R-SIG-3"],
            "the signed SHA-256 digest of %s at offset %d is not that section's (signed as it is)%s"
            % (name, where, extra))
    changed_after_signing(bad, one, s)
    bad("invalid/sign-offset-wrong", bundle_signed(model, table2(model, sign_offset=64)), ["R-SIG-3"],
        "the table's sign_offset is 64 (signed as it is)")
    bad("invalid/header-copy-wrong", bundle_signed(model, table2(model, header=b"\0" * 64)), ["R-SIG-3"],
        "the table's copy of the bundle header is zeros (signed as it is)")
    bad("invalid/major-1-no-digests", bundle_signed(model, table2(model, domain=DOMAIN1), major=1), ["R-SIG-3"],
        "a checkpoint signature (major 1, DCR-SIGN-TABLE-1) whose table has no tensor digest (N = 0, its lengths "
        "consistent; signed as it is): the payload is well formed, but the model bundle's entries have 8 sides")

    # the SIGN payload by itself (§20.3), for major 2
    bad("invalid/major-3", bundle_signed(model, mt, major=3), ["R-SIG-1", "§20.5"],
        "the bundle signature's payload as major 3: a verifier of 2.x cannot know what a later major signs")
    bad("invalid/domain-1", bundle_signed(model, table2(model, domain=DOMAIN1)), ["R-SIG-1"],
        "a major-2 payload whose table starts with DCR-SIGN-TABLE-1, N = 0 (signed as it is): step 5")
    md = tensor_digests(MB, MT)
    bad("invalid/tensor-digests", bundle_signed(model, table2(model, md)), ["R-SIG-1"],
        "a major-2 payload, DCR-SIGN-TABLE-2, whose table has the %d right tensor digests of the model's base and "
        "target, N = %d and the lengths consistent (signed as it is): step 7, N = 0 for major 2" % (len(md), len(md)))
    bad("invalid/no-signatures", signed(model, payload(mt, [], major=2)), ["R-SIG-1"],
        "a major-2 table and no signature: step 3")
    bad("invalid/table-length-wrong", signed(model, payload(mt, [record(TEST, mt)], major=2)[:-1]), ["R-SIG-1"],
        "the major-2 payload one byte short of its table and signature: step 4")
    bad("invalid/table-reserved", bundle_signed(model, table2(model, reserved=1)), ["R-SIG-1"],
        "the major-2 table's reserved u64 is 1 (signed as it is): step 6")
    t8 = bytearray(mt)
    t8[112 + 4] = 1
    bad("invalid/section-record-reserved", bundle_signed(model, t8), ["R-SIG-1"],
        "the major-2 table's first section record's reserved field is 1 (signed as it is): step 8")
    bad("invalid/key-ids-unordered",
        signed(model, payload(mt, [record(k, mt) for k in reversed(by_id(TEST, OTHER))], major=2)), ["R-SIG-1"],
        "two bundle signatures in decreasing key id order: step 9")

    # checkpoints against a bundle signature (R-SIG-10): there are no signed tensor digests
    add("invalid/base-unsigned", one, "invalid", "DCR_E_SIGNATURE", "base", base=MB, covers=["R-SIG-10"],
        description="valid/model-signed with its own base given to check: a bundle signature signs no tensor "
                    "digest, so the base stage fails, though the base is the right one (its XXH3 hashes are "
                    "IDEN's, which must not stand in for a signed digest)")
    add("invalid/target-unsigned", one, "invalid", "DCR_E_SIGNATURE", "target", target=MT, covers=["R-SIG-10"],
        description="valid/model-signed with its own target given to check (no base): the target stage fails")
    add("invalid/base-and-target-unsigned", one, "invalid", "DCR_E_SIGNATURE", "base", base=MB, target=MT,
        covers=["R-SIG-10", "R-ORD-2"],
        description="valid/model-signed with its own base and target given: the base stage fails first, and the "
                    "target stage is not run")
    add("invalid/base-not-the-base", one, "invalid", "DCR_E_SIGNATURE", "base", base=MT, covers=["R-SIG-10"],
        description="valid/model-signed with its target given as its base: against a bundle signature the base "
                    "stage fails with DCR_E_SIGNATURE whatever the checkpoint (a checkpoint signature gives "
                    "DCR_E_BASE_MISMATCH here, sign-v1/invalid/base-not-the-base)")

    c.write(OUTDIR, "2.0", "SPEC.md §20.6 (with §20.1-§20.5)",
            "tools/mksignvectors.py (hashlib; libsodium and libxxhash by ctypes), from the frozen "
            "testvectors/v1/ and testvectors/v1.3/ bundles and checkpoints",
            "for each vector, open `bundle` as a reader of bundle signatures (signature format 2.0) that requires "
            "signatures and trusts the public keys `keys` (dcr verify BUNDLE --pubkey KEY...), and, where given, "
            "check `base` and `target` against the signature (--base, --target): a bundle signature signs no "
            "tensor digest, so that check fails (R-SIG-10). A valid vector passes; an invalid one fails with "
            "`error` at `stage`: structure, signature, base or target. `unsigned`: the outcome for a reader that "
            "does not check signatures (dcr validate BUNDLE): every vector is a valid bundle. The keys are "
            "sign-v1's",
            {})


sign_v1()
sign_v2()
