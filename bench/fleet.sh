#!/usr/bin/env bash
# fleet.sh - refitting a fleet of rollout workers (issue #34): per-step latency
# from publishing a step at an origin to every worker holding the new weights,
# verified, with dcr bundles against full checkpoints through the same relays.
#
#   bash bench/fleet.sh [DCR] [--size 256M] [--workers 4] [--nodes 2]
#                       [--rates 0.01,0.03] [--steps 2] [--overlap 2] [--warm dcr|all|none] [--json]
#                       [--verify chunk|full] [--format 1.1] [--dir DIR]
#
# Needs: `make` (DCR, default build/dcr, and the libdcr.so.1 beside it), nginx
# and Debian's python3 with numpy (sh tools/deps.sh installs both; PYTHON names
# another interpreter, default /usr/bin/python3 as `make python-test` uses),
# bash, curl and this machine's loopback interface. The Python package
# is used from python/ of this tree, bound to DCR's libdcr.so.1.
#
# The fleet, on loopback:
#   origin   stock nginx serving the published files; its egress is limited
#            (limit_rate) so that one full checkpoint takes 10 s to leave it:
#            the training cluster's uplink, the slow link of the tree
#   mid      a caching relay (tests/http/relay.conf.in: proxy_cache with
#            proxy_cache_lock, one upstream fetch however many ask) in front of
#            the origin, fetching whole objects: limit_rate is per request and
#            lets each request send its first second's worth at once, so 1 MiB
#            slices would never be slowed
#   nodes    NODES node-local relays (the same, caching 1 MiB slices with the
#            slice module) in front of the mid: the workers of one node share
#            one, so a node pulls each object from the mid once, not once a worker
#   workers  WORKERS long-lived Python processes (bench/fleet_worker.py), worker i
#            on node i mod NODES, each holding the weights in memory
#
# For each rate the publisher (this script) makes a pair with `dcr synth` (state 0,
# and state 1 with about RATE of the BF16 values changed) and encodes both
# directions, so that steps chain: step k takes state k-1 to state k, the odd steps
# 0 -> 1, the even ones back 1 -> 0 (as many values change), and the state each
# worker holds is always the bundle's base. Everything is made before timing; a
# step is published by linking its file into the origin's directory under a new
# name (rR-stepK.dcr, rR-stepK.safetensors: no relay has it cached). Per step:
#   dcr   the workers are loaded with state 0 (untimed), then told the bundle's
#         URL at their node relay: dcr.Bundle(URL).apply_to(weights,
#         verify=VERIFY) fetches the index and the changed chunks by range
#         requests and patches the arrays held, and the worker checks that the
#         bundle's target state is the step's (the id `dcr id` gives the
#         publisher's file). --verify chunk (the default, the library's): every
#         changed chunk's base digest is checked before anything is written and
#         its result's after; the chunks not carried are the base's, proven by
#         the verified load and every step since, so the weights are the target
#         state. --verify full: every tensor's base hash before and target hash
#         after, which proves it on its own (and reads every byte held)
#   full  the same states as whole checkpoints: each worker downloads the
#         safetensors file from its node relay to disk, loads it with
#         dcr.load_safetensors and checks the file's dcr.state_id
# The step's time runs from the link at the origin to the last worker's answer.
# --warm dcr (the default): the publisher pushes each bundle down the tree before
# telling the workers, inside the step's time: a GET of its first byte at the mid
# (which fetches the whole object from the origin into its cache, and sends one
# byte), then one GET at each node relay at once; the workers then find it
# cached. Full checkpoints are not pushed, which would cost them the overlap of
# their hops (each relay streams what it receives on to the next): they go
# through the tree as the workers pull them. --warm all pushes both, --warm none
# neither; then workers pull bundles cold, and concurrent misses wait on a relay's
# cache lock, which nginx checks every 500 ms: up to 0.5 s at each of the two
# levels.
# Reported per rate: the mean over steps of that time for each (dcr_s, full_s)
# and their ratio; the means over steps of the slowest worker's own time
# (worker_*_s: fetch and apply, or download, load and id) and of the slowest
# worker's first part (worker_dcr_open_s: opening the bundle, its index fetched
# through the relays; worker_full_download_s: the download); and from the nginx
# access logs the body bytes the origin sent (origin_bytes_*, and origin_*_x:
# that over the bytes published, 1.00 when the tree sends each object across
# the slow link once) and those the mid relay sent to the node relays
# (mid_bytes_*: NODES times the bytes published; mid_dcr_x:
# the dcr bytes the mid sent over those published times NODES, 1.00 when each node
# pulls each bundle across its link once, however many workers it has: issue #34
# item 3, one fetch per node).
#
#
# The overlap (issue #34 item 2), after the steps: worker 0 alone, its weights
# reloaded with state 0, reads from a second origin without limit_rate behind one
# link (bench/link.py: all of a reader's requests share its rate, as they share a
# real link; nginx's limit_rate caps each request alone) whose rate makes the
# bundle's fetch take about as long as its apply: the worker times an apply from
# the local file (applytime, the calibration), the link is set to the bundle's
# bytes over that time, then --overlap times (default 2; 0: none) the worker
# times, one after the other, the apply from the local file, the bundle's
# download (one GET) and the apply from the URL, which fetches and applies at once
# (fleet_worker.py overlap). Reported: the means of the three (overlap_apply_s,
# overlap_fetch_s, overlap_streamed_s) and the streamed time over the larger of
# the other two (overlap_x_max: 1.0 is a perfect overlap, their sum over their
# maximum, overlap_sum_x_max, none).
#
# Output: a markdown table, or with --json {"results": [{...}, ...]}; progress on
# stderr. --dir keeps the work directory (pairs, logs, caches) at DIR. Exits 1 if
# a worker failed a step (verified false).
set -eu
DCR=build/dcr
SIZE=256M WORKERS=4 NODES=2 RATES=0.01,0.03 STEPS=2 OVERLAP=2 WARM=dcr JSON=0 DIR='' VERIFY=chunk FORMAT=''
LINK_S=10 # seconds one full checkpoint takes to leave the origin
while [ $# -gt 0 ]; do
  case $1 in
    --size) SIZE=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --rates) RATES=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --overlap) OVERLAP=$2; shift 2 ;;
    --json) JSON=1; shift ;;
    --warm)
      case $2 in dcr | all | none) WARM=$2 ;; *) echo "fleet.sh: --warm dcr, all or none, not $2" >&2; exit 2 ;; esac
      shift 2 ;;
    --verify)
      case $2 in chunk | full) VERIFY=$2 ;; *) echo "fleet.sh: --verify chunk or full, not $2" >&2; exit 2 ;; esac
      shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --format) FORMAT=$2; shift 2 ;; # dcr encode --format: the bundles' version
    -*) echo "fleet.sh: unknown option $1" >&2; exit 2 ;;
    *) DCR=$1; shift ;;
  esac
done
case $DCR in /*) ;; *) DCR=$PWD/$DCR ;; esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/tests/http/nginx_lib.sh"
ngx_need fleet.sh
[ -x "$DCR" ] || { echo "fleet.sh: no $DCR (make)" >&2; exit 1; }
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH} DCR_LIBRARY
DCR_LIBRARY=$(dirname "$DCR")/libdcr.so.1
# a worker that cannot start would leave this script waiting on its FIFO
PYTHON=${PYTHON:-/usr/bin/python3}
"$PYTHON" -c 'import dcr' ||
  { echo "fleet.sh: $PYTHON cannot import dcr with $DCR_LIBRARY (numpy: sh tools/deps.sh; the library: make)" >&2; exit 1; }
W=${DIR:-$(mktemp -d "${TMPDIR:-/tmp}/dcr-bench-fleet.XXXXXX")}
mkdir -p "$W/www"
W=$(cd "$W" && pwd)
WORKER_PIDS=()
LINK_PID=
cleanup() {
  local p
  [ -z "$LINK_PID" ] || { kill "$LINK_PID" 2>/dev/null; wait "$LINK_PID" 2>/dev/null || true; }
  # a worker may be busy with a step (after an interrupt): kill rather than ask
  for p in "${WORKER_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${WORKER_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  ngx_stop_all
  [ -n "$DIR" ] || rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cd "$W"
say() { echo "fleet.sh: $*" >&2; }

IFS=', ' read -r -a RATE_LIST <<<"$RATES"
for rate in "${RATE_LIST[@]}"; do
  say "rate $rate: a $SIZE pair and its two bundles"
  mkdir -p "r$rate"
  "$DCR" synth "r$rate/0.st" "r$rate/1.st" --size "$SIZE" --rate "$rate" -q -f
  "$DCR" encode "r$rate/0.st" "r$rate/1.st" -o "r$rate/1.dcr" -q -f ${FORMAT:+--format "$FORMAT"}
  "$DCR" encode "r$rate/1.st" "r$rate/0.st" -o "r$rate/0.dcr" -q -f ${FORMAT:+--format "$FORMAT"}
  for state in 0 1; do "$DCR" id "r$rate/$state.st" | cut -d' ' -f1 >"r$rate/$state.id"; done
done
CKPT_BYTES=$(stat -c %s "r${RATE_LIST[0]}/0.st")

# limit_rate lets a request send its first second's bytes at once, then
# LIMIT a second: one request for the whole checkpoint takes CKPT/LIMIT - 1 s
NGX_LIMIT_RATE=$((CKPT_BYTES / (LINK_S + 1)))
ngx_up "$W/origin" origin "$W/www"
# one request an object (no slices), so that the allowance is paid once
NGX_SLICE=0 ngx_up "$W/mid" relay "$NGX_PORT"
MID=$NGX_PORT
NODE_PORTS=()
for n in $(seq 0 $((NODES - 1))); do
  ngx_up "$W/node$n" relay "$MID"
  NODE_PORTS+=("$NGX_PORT")
done

mkfifo done.fifo
exec {DONE}<>done.fifo # read-write: opening it never waits for a writer
CMD=()
for i in $(seq 0 $((WORKERS - 1))); do
  mkfifo "w$i.cmd"
  "$PYTHON" "$ROOT/bench/fleet_worker.py" "w$i" "w$i.cmd" done.fifo "$W" "$VERIFY" &
  WORKER_PIDS+=($!)
  exec {fd}>"w$i.cmd"
  CMD+=("$fd")
done
say "$WORKERS workers on $NODES nodes; origin limited to $NGX_LIMIT_RATE bytes/s ($CKPT_BYTES-byte checkpoint in ${LINK_S} s)"

# tell TAG LINE: sends worker i the line LINE with @PORT@ its node relay's port, then
# waits for every worker's answer; appends them to answers.log under TAG
tell() {
  local tag=$1 line=$2 i answer
  for i in "${!CMD[@]}"; do
    echo "${line//@PORT@/${NODE_PORTS[i % NODES]}}" >&"${CMD[i]}"
  done
  # bash runs the INT/TERM trap once read returns: an interrupt stops the run
  # after the step in flight (shorter read timeouts, polled, crashed bash 5.2
  # when the trap exits)
  for _ in "${CMD[@]}"; do
    read -r -t 600 -u "$DONE" answer || { say "no answer from a worker in 600 s"; exit 1; }
    echo "$tag $answer" >>answers.log
  done
}

# tell_one TAG LINE: the same for worker 0 alone; ANSWER is its answer
tell_one() {
  echo "$2" >&"${CMD[0]}"
  read -r -t 600 -u "$DONE" ANSWER || { say "no answer from worker 0 in 600 s"; exit 1; }
  echo "$1 $ANSWER" >>answers.log
}

# warm NAME: GETs NAME's first byte at the mid relay (proxy_cache fetches the whole
# object whatever the range asked), then NAME at every node relay at once
warm() {
  local port pids=() p
  curl -sSf -r 0-0 -o /dev/null "http://127.0.0.1:$MID/$1"
  for port in "${NODE_PORTS[@]}"; do
    curl -sSf -o /dev/null "http://127.0.0.1:$port/$1" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
}

for rate in "${RATE_LIST[@]}"; do
  tell "$rate setup 0" "load $W/r$rate/0.st"
  for kind in dcr full; do
    for step in $(seq "$STEPS"); do
      state=$((step % 2))
      case $kind in
        dcr) file=r$rate/$state.dcr name=r$rate-step$step.dcr ;;
        full) file=r$rate/$state.st name=r$rate-step$step.safetensors ;;
      esac
      id=$(cat "r$rate/$state.id")
      t0=$EPOCHREALTIME
      ln "$file" "www/$name"
      if [ "$WARM" = all ] || [ "$WARM" = "$kind" ]; then warm "$name"; fi
      tell "$rate $kind $step" "$kind http://127.0.0.1:@PORT@/$name $id"
      t1=$EPOCHREALTIME
      echo "$rate $kind $step $(stat -c %s "$file") $t0 $t1" >>steps.log
      say "rate $rate $kind step $step: $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') s"
    done
  done
done

if [ "$OVERLAP" -gt 0 ]; then
  NGX_LIMIT_RATE=0 ngx_up "$W/fast" origin "$W/www"
  FAST=$NGX_PORT
  for rate in "${RATE_LIST[@]}"; do
    tell_one "$rate setup overlap" "load $W/r$rate/0.st"
    tell_one "$rate applytime 0" "applytime $W/r$rate/1.dcr"
    bytes=$(stat -c %s "r$rate/1.dcr")
    link=$(echo "$ANSWER" | awk -v b="$bytes" '$NF == "ok" && $3 > 0 { printf "%d", b / $3 }')
    [ -n "$link" ] || { say "overlap: worker 0 could not time the apply: $ANSWER"; exit 1; }
    port=$(free_port)
    "$PYTHON" "$ROOT/bench/link.py" "$port" "$FAST" "$link" &
    LINK_PID=$!
    for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
    say "rate $rate overlap: link at $link bytes/s (the bundle's $bytes bytes in the apply's time)"
    for k in $(seq "$OVERLAP"); do
      state=$((k % 2))
      ln "r$rate/$state.dcr" "www/r$rate-overlap$k.dcr"
      tell_one "$rate overlap $k" "overlap $W/r$rate/$state.dcr http://127.0.0.1:$port/r$rate-overlap$k.dcr http://127.0.0.1:$port/r$rate-overlap$k.dcr $(cat "r$rate/$state.id")"
      say "rate $rate overlap $k: $ANSWER"
    done
    echo "$rate $link" >>links.log
    kill "$LINK_PID"; wait "$LINK_PID" 2>/dev/null || true
    LINK_PID=
  done
fi
touch links.log

# summary: one line a rate, from steps.log ("RATE KIND STEP BYTES T0 T1"),
# answers.log ("RATE KIND STEP" then a worker's answer: its own seconds are field
# 6, its first part's field 7) and the access logs (log_format dcr: the request path is field 2, the body
# bytes field 5)
awk -v steps="$STEPS" -v json="$JSON" -v size="$SIZE" -v workers="$WORKERS" -v nodes="$NODES" -v warm="$WARM" -v verify="$VERIFY" -v format="${FORMAT:-default}" '
  FILENAME == "steps.log" {
    if (!(($1) in seen)) { seen[$1] = 1; order[++nr] = $1 }
    t[$1, $2] += ($6 - $5) / steps; pub[$1, $2] += $4
    list[$1, $2] = list[$1, $2] (list[$1, $2] == "" ? "" : ", ") sprintf("%.3f", $6 - $5)
    next
  }
  FILENAME == "answers.log" {
    if ($NF != "ok") bad[$1] = 1
    if ($2 == "overlap") { ov[$1] += 1; ovs[$1] += $6; ova[$1] += $7; ovf[$1] += $8 }
    if ($2 != "dcr" && $2 != "full") next
    if ($6 > slow[$1, $2, $3]) slow[$1, $2, $3] = $6
    if ($7 > part[$1, $2, $3]) part[$1, $2, $3] = $7
    next
  }
  FILENAME == "links.log" { link[$1] = $2; next }
  {
    split($2, p, "[/-]")
    bytes[FILENAME ~ /^origin/ ? "origin" : "mid", substr(p[2], 2), $2 ~ /\.dcr$/ ? "dcr" : "full"] += $5
  }
  END {
    if (!json) {
      print "| rate | dcr s | full s | speedup | verified | bundle bytes | worker dcr s | worker full s | origin bytes dcr (x published) | origin bytes full (x published) | mid bytes dcr (x published x nodes) | overlap: apply s, fetch s, streamed s (x max) |"
      print "|---|---|---|---|---|---|---|---|---|---|---|---|"
    }
    for (i = 1; i <= nr; i++) {
      r = order[i]
      for (key in slow) {
        split(key, q, SUBSEP)
        if (q[1] == r) { ws[r, q[2]] += slow[key] / steps; wp[r, q[2]] += part[key] / steps }
      }
      v = bad[r] ? "false" : "true"
      od = bytes["origin", r, "dcr"]; of = bytes["origin", r, "full"]
      md = bytes["mid", r, "dcr"]; mx = md / (pub[r, "dcr"] * nodes)
      n = ov[r] ? ov[r] : 1; oa = ova[r] / n; of_ = ovf[r] / n; os_ = ovs[r] / n
      omax = oa > of_ ? oa : of_; ox = omax > 0 ? os_ / omax : 0; osum = omax > 0 ? (oa + of_) / omax : 0
      if (json) {
        printf "%s{\"rate\": %s, \"dcr_s\": %.3f, \"full_s\": %.3f, \"speedup\": %.1f, \"verified\": %s, ", (i > 1 ? ", " : ""), r, t[r, "dcr"], t[r, "full"], t[r, "full"] / t[r, "dcr"], v
        printf "\"bundle_bytes\": %.0f, \"checkpoint_bytes\": %.0f, ", pub[r, "dcr"] / steps, pub[r, "full"] / steps
        printf "\"origin_bytes_dcr\": %.0f, \"origin_bytes_full\": %.0f, \"origin_dcr_x\": %.2f, \"origin_full_x\": %.2f, ", od, of, od / pub[r, "dcr"], of / pub[r, "full"]
        printf "\"mid_bytes_dcr\": %.0f, \"mid_bytes_full\": %.0f, \"mid_dcr_x\": %.2f, ", md, bytes["mid", r, "full"], mx
        printf "\"overlap_runs\": %d, \"overlap_link_bytes_s\": %.0f, \"overlap_apply_s\": %.3f, \"overlap_fetch_s\": %.3f, \"overlap_streamed_s\": %.3f, \"overlap_x_max\": %.2f, \"overlap_sum_x_max\": %.2f, ", ov[r], link[r], oa, of_, os_, ox, osum
        printf "\"worker_dcr_s\": %.3f, \"worker_full_s\": %.3f, ", ws[r, "dcr"], ws[r, "full"]
        printf "\"worker_dcr_open_s\": %.3f, \"worker_full_download_s\": %.3f, ", wp[r, "dcr"], wp[r, "full"]
        printf "\"dcr_steps_s\": [%s], \"full_steps_s\": [%s], ", list[r, "dcr"], list[r, "full"]
        printf "\"size\": \"%s\", \"workers\": %d, \"nodes\": %d, \"steps\": %d, \"warm\": \"%s\", \"verify\": \"%s\", \"format\": \"%s\"}", size, workers, nodes, steps, warm, verify, format
      } else {
        printf "| %s | %.2f | %.2f | %.1fx | %s | %.0f | %.2f | %.2f | %.0f (%.2f) | %.0f (%.2f) | %.0f (%.2f) | %s |\n", r, t[r, "dcr"], t[r, "full"], t[r, "full"] / t[r, "dcr"], v, pub[r, "dcr"] / steps, ws[r, "dcr"], ws[r, "full"], od, od / pub[r, "dcr"], of, of / pub[r, "full"], md, mx, ov[r] ? sprintf("%.2f, %.2f, %.2f (%.2fx)", oa, of_, os_, ox) : "-"
      }
    }
  }' steps.log answers.log links.log origin/access.log mid/access.log >summary.txt
if [ "$JSON" = 1 ]; then echo "{\"results\": [$(cat summary.txt)]}"; else cat summary.txt; fi
! grep -q ' error: ' answers.log
