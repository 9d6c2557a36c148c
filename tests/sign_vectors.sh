#!/usr/bin/env bash
# sign_vectors.sh DCR DIR - the signed-bundle vectors (DIR = testvectors/sign-v1,
# SPEC.md §20, or testvectors/sign-v2, bundle signatures, §20.6) through the CLI:
# each vector with `dcr verify --json` (a reader that requires signatures,
# trusting the vector's keys, checking its base and target where given), which
# must give its result, error and stage; and with
# `dcr validate` (a reader that does not check signatures), which must find every
# vector a valid bundle (R-SIG-5). Where validate takes --require-signature, the
# vectors without base or target must give their outcome there too.
set -u
DCR=${1:?usage: sign_vectors.sh DCR DIR}
DIR=${2:?usage: sign_vectors.sh DCR DIR}
python3 - "$DCR" "$DIR" <<'PY'
import json, os, subprocess, sys
dcr, root = sys.argv[1], sys.argv[2]
index = json.load(open(os.path.join(root, "index.json")))
validate_requires = "--require-signature" in subprocess.run([dcr, "validate", "--help"], capture_output=True, text=True).stdout
failed = passed = 0
def check(ok, what):
    global failed, passed
    if ok: passed += 1
    else: failed += 1; print("not ok - " + what)
for v in index["vectors"]:
    path = lambda p: os.path.join(root, p)
    args = [dcr, "verify", "--json", path(v["bundle"])]
    for k in v["keys"]: args += ["--pubkey", path(k)]
    if "base" in v: args += ["--base", path(v["base"])]
    if "target" in v: args += ["--target", path(v["target"])]
    r = subprocess.run(args, capture_output=True, text=True)
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        check(False, "%s: dcr verify printed no JSON (exit %d): %s" % (v["id"], r.returncode, r.stderr.strip()))
        continue
    err = doc["error"]
    got = ("valid", None, None) if doc["verified"] else ("invalid", err["code"], err["stage"])
    want = (v["result"], v["error"], v["stage"])
    check(got == want and r.returncode == (0 if v["result"] == "valid" else 1),
          "%s: dcr verify gives %s (exit %d), the vector %s%s" % (v["id"], got, r.returncode, want,
                                                                  "; " + err["message"] if err else ""))
    r = subprocess.run([dcr, "validate", path(v["bundle"])], capture_output=True, text=True)
    check(r.returncode == 0, "%s: not a valid bundle for a reader that does not check signatures: %s" % (v["id"], r.stderr.strip()))
    if validate_requires and "base" not in v and "target" not in v:
        args = [dcr, "validate", "--json", path(v["bundle"])]
        for k in v["keys"]: args += ["--require-signature", path(k)]
        doc = json.loads(subprocess.run(args, capture_output=True, text=True).stdout)
        first = doc["errors"][0] if doc["errors"] else None
        got = ("valid", None, None) if doc["valid"] else ("invalid", first["code"], first["stage"])
        check(got == want, "%s: dcr validate --require-signature gives %s, the vector %s" % (v["id"], got, want))
print("sign vectors: %d passed, %d failed (%d vectors%s)" % (passed, failed, len(index["vectors"]),
      "" if validate_requires else "; validate has no --require-signature yet"))
sys.exit(1 if failed else 0)
PY
