#!/usr/bin/env bash
# cluster_qps.sh: the cluster rows of the QPS table, etcd v2.1's benchmark
# shape (hey on the v2 keys API, one key, reads and writes, 64 and 256 byte
# values, 1, 64 and 256 clients) against a 3-member Strata cluster and a
# 3-member etcd 3.4 (Debian's etcd-server, --enable-v2) on loopback, in
# alternating passes, with the medians, the Strata/etcd ratio, the CPU
# seconds per 1000 requests of all three members of each cluster, and
# hey's own (the load tool shares the cores).
#
#   go build -o /tmp/strata ./cmd/strata
#   scripts/cluster_qps.sh /tmp/strata [passes]      # default 3 passes
#
# Two targets, as in etcd's table:
#   leader  every request to the leader: one hey with C clients, N requests.
#   all     requests spread over the three members: three hey processes at
#           once, one per member, each with a third of the clients and of
#           the requests (64 clients: 22+21+21); QPS is the sum of the three
#           hey rates, p90 the largest of the three p90s. With one client
#           the members take turns (N/3 requests on each, one after the
#           other) and QPS is N over the three runs' summed duration.
#           Writes to a follower are forwarded to the leader by both.
#
# Environment: TARGETS ("leader all"), OPS ("read write"), SIZES ("64 256"),
# CLIENTS ("1 64 256") select rows; N (20000; 2000 with one client) the
# requests per run.
#
# Needs hey, etcd and etcdctl on PATH. Every write is fsynced on a majority
# by both (Strata's raft log, etcd's WAL). Ports 21379-23380 (Strata) and
# 31379-33380 (etcd) must be free. Results are printed as a Markdown table.
set -euo pipefail
STRATA=${1:?usage: cluster_qps.sh STRATA_BINARY [PASSES]}
PASSES=${2:-3}
TARGETS=${TARGETS:-leader all}
OPS=${OPS:-read write}
SIZES=${SIZES:-64 256}
CLIENTS=${CLIENTS:-1 64 256}
for p in hey etcd etcdctl; do command -v $p >/dev/null || { echo "$p not on PATH" >&2; exit 1; }; done
DIR=$(mktemp -d /tmp/cluster-qps.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT

start_strata() {
  local i
  for i in 1 2 3; do
    {
      printf 'db_path = "%s/strata/d%s"\n[server]\nlisten = "127.0.0.1:2%s379"\n' "$DIR" $i $i
      printf '[cluster]\nname = "s%s"\nlisten_peer = "127.0.0.1:2%s380"\n' $i $i
      for j in 1 2 3; do
        printf '[[cluster.members]]\nname = "s%s"\npeer_url = "http://127.0.0.1:2%s380"\nclient_url = "http://127.0.0.1:2%s379"\n' $j $j $j
      done
    } > "$DIR/s$i.toml"
    "$STRATA" serve --config "$DIR/s$i.toml" > "$DIR/s$i.log" 2>&1 &
    SPIDS[$i]=$!; PIDS+=($!)
  done
}

start_etcd() {
  local i ic="e1=http://127.0.0.1:31380,e2=http://127.0.0.1:32380,e3=http://127.0.0.1:33380"
  for i in 1 2 3; do
    etcd --name e$i --data-dir "$DIR/etcd/d$i" --enable-v2=true \
      --listen-client-urls http://127.0.0.1:3${i}379 --advertise-client-urls http://127.0.0.1:3${i}379 \
      --listen-peer-urls http://127.0.0.1:3${i}380 --initial-advertise-peer-urls http://127.0.0.1:3${i}380 \
      --initial-cluster $ic --initial-cluster-token qps --initial-cluster-state new > "$DIR/e$i.log" 2>&1 &
    EPIDS[$i]=$!; PIDS+=($!)
  done
}

# leader ENDPOINTS: the client address of the member that leads.
leader() {
  local out
  for _ in $(seq 1 100); do
    out=$(ETCDCTL_API=3 etcdctl --endpoints="$1" endpoint status 2>/dev/null | awk -F', ' '$5 == "true" {print $1}')
    [ -n "$out" ] && { echo "$out"; return; }
    sleep 0.2
  done
  echo "no leader among $1" >&2; exit 1
}

cpu_ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14+$15}' /proc/$p/stat))); done; echo $t; }

# hey_run OUT N C URL OP VALUE: one hey run; writes "QPS P90_MS SECONDS
# HEY_CPU_SECONDS" to OUT (hey's own user+system time, bash's time).
hey_run() {
  local out=$1 n=$2 c=$3 url=$4 op=$5 value=$6 res cpu TIMEFORMAT='%U %S'
  if [ "$op" = read ]; then
    cpu=$( { time hey -n "$n" -c "$c" "$url" > "$out.hey"; } 2>&1 )
  else
    cpu=$( { time hey -n "$n" -c "$c" -m PUT -T application/x-www-form-urlencoded -d "value=$value" "$url" > "$out.hey"; } 2>&1 )
  fi
  res=$(cat "$out.hey")
  if echo "$res" | grep -q '^Error distribution'; then
    echo "hey $url: errors:" >&2; echo "$res" | sed -n '/^Error distribution/,$p' >&2
  fi
  echo "$res" | awk -v cpu="$cpu" '/Requests\/sec/ {q=$2} /Total:/ && !t {t=$2} / 90% in/ {p=$3*1000} END {split(cpu, c, " "); print q, p, t, c[1] + c[2]}' > "$out"
}

# load TARGET OP N C VALUE ADDRS...: one measured run; prints "QPS P90_MS
# HEY_CPU_SECONDS" (the CPU of every hey process of the run).
load() {
  local target=$1 op=$2 n=$3 c=$4 value=$5; shift 5
  local addrs=("$@") i k
  if [ "$target" = leader ]; then
    hey_run "$DIR/r0" "$n" "$c" "http://${addrs[0]}/v2/keys/foo" "$op" "$value"
    awk '{print $1, $2, $4}' "$DIR/r0"; return
  fi
  if [ "$c" = 1 ]; then # one client: the members in turn
    for i in 0 1 2; do
      hey_run "$DIR/r$i" $(( n / 3 )) 1 "http://${addrs[$i]}/v2/keys/foo" "$op" "$value"
    done
    cat "$DIR/r0" "$DIR/r1" "$DIR/r2" | awk -v n=$(( n / 3 * 3 )) '{t += $3; h += $4; if ($2 > p) p = $2} END {print n / t, p, h}'
    return
  fi
  local hp=()
  for i in 0 1 2; do
    k=$(( c / 3 + (i < c % 3 ? 1 : 0) ))
    hey_run "$DIR/r$i" $(( n / 3 )) "$k" "http://${addrs[$i]}/v2/keys/foo" "$op" "$value" &
    hp+=($!)
  done
  wait "${hp[@]}"
  cat "$DIR/r0" "$DIR/r1" "$DIR/r2" | awk '{q += $1; h += $4; if ($2 > p) p = $2} END {print q, p, h}'
}

declare -A QPS P90 CPU HEY
start_strata; start_etcd
SE=127.0.0.1:21379,127.0.0.1:22379,127.0.0.1:23379
EE=127.0.0.1:31379,127.0.0.1:32379,127.0.0.1:33379
SL=$(leader $SE)
EL=$(leader $EE)
# Members in order: the leader first, then the others.
SALL=("$SL" $(echo $SE | tr ',' '\n' | grep -vx "$SL"))
EALL=("$EL" $(echo $EE | tr ',' '\n' | grep -vx "$EL"))
HZ=$(getconf CLK_TCK)
echo "strata leader $SL, etcd leader $EL; $PASSES passes" >&2
for pass in $(seq 1 "$PASSES"); do
  order="strata etcd"; [ $((pass % 2)) = 0 ] && order="etcd strata"
  for target in $TARGETS; do
    for op in $OPS; do
      for size in $SIZES; do
        value=$(head -c "$size" /dev/zero | tr '\0' a)
        for c in $CLIENTS; do
          n=${N:-$([ "$c" = 1 ] && echo 2000 || echo 20000)}
          for srv in $order; do
            if [ $srv = strata ]; then addrs=("${SALL[@]}"); pids="${SPIDS[*]}"; else addrs=("${EALL[@]}"); pids="${EPIDS[*]}"; fi
            curl -s -X PUT "http://${addrs[0]}/v2/keys/foo" -d "value=$value" >/dev/null
            c0=$(cpu_ticks $pids)
            read -r r p h < <(load "$target" "$op" "$n" "$c" "$value" "${addrs[@]}")
            c1=$(cpu_ticks $pids)
            key="$target $op $size $c $srv"
            QPS[$key]="${QPS[$key]:-} $r"
            P90[$key]="${P90[$key]:-} $p"
            CPU[$key]="${CPU[$key]:-} $(echo "$c0 $c1 $n $HZ" | awk '{printf "%.3f", ($2-$1)/$4*1000/$3}')"
            HEY[$key]="${HEY[$key]:-} $(echo "$h $n" | awk '{printf "%.3f", $1*1000/$2}')"
            echo "pass $pass: $key: $r req/s, p90 $p ms" >&2
          done
        done
      done
    done
  done
  # Between passes both clusters are rechecked: a leader may have moved.
  SL=$(leader $SE); EL=$(leader $EE)
  SALL=("$SL" $(echo $SE | tr ',' '\n' | grep -vx "$SL"))
  EALL=("$EL" $(echo $EE | tr ',' '\n' | grep -vx "$EL"))
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "| to | op | value | clients | Strata QPS | etcd 3.4 QPS | Strata/etcd | Strata p90 (ms) | etcd p90 (ms) | Strata CPU s/1000 | etcd CPU s/1000 | hey CPU s/1000 |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for target in $TARGETS; do for op in $OPS; do for size in $SIZES; do for c in $CLIENTS; do
  k="$target $op $size $c"
  s=$(echo "${QPS[$k strata]}" | median); e=$(echo "${QPS[$k etcd]}" | median)
  sp=$(echo "${P90[$k strata]}" | median); ep=$(echo "${P90[$k etcd]}" | median)
  sc=$(echo "${CPU[$k strata]}" | median); ec=$(echo "${CPU[$k etcd]}" | median)
  hc=$(echo "${HEY[$k strata]} ${HEY[$k etcd]}" | median)
  printf "| %s | %s | %s B | %s | %.0f | %.0f | %.2f | %.1f | %.1f | %.3f | %.3f | %.3f |\n" $target $op $size $c "$s" "$e" "$(echo "$s $e" | awk '{print $1/$2}')" "$sp" "$ep" "$sc" "$ec" "$hc"
done; done; done; done
