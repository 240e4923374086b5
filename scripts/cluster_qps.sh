#!/usr/bin/env bash
# cluster_qps.sh: the cluster rows of the QPS table, etcd v2.1's benchmark
# shape (hey on the v2 keys API, one key, reads and writes, 64 and 256 byte
# values, 1, 64 and 256 clients, requests sent to the leader) against a
# 3-member Strata cluster and a 3-member etcd 3.4 (Debian's etcd-server,
# --enable-v2) on loopback, in alternating passes, with the medians, the
# Strata/etcd ratio and the CPU seconds per 1000 requests of all three
# members of each cluster.
#
#   go build -o /tmp/strata ./cmd/strata
#   scripts/cluster_qps.sh /tmp/strata [passes]      # default 3 passes
#
# Needs hey, etcd and etcdctl on PATH. Every write is fsynced on a majority
# by both (Strata's raft log, etcd's WAL). Ports 21379-23380 (Strata) and
# 31379-33380 (etcd) must be free. Results are printed as a Markdown table.
set -euo pipefail
STRATA=${1:?usage: cluster_qps.sh STRATA_BINARY [PASSES]}
PASSES=${2:-3}
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

declare -A QPS CPU
start_strata; start_etcd
SL=$(leader 127.0.0.1:21379,127.0.0.1:22379,127.0.0.1:23379)
EL=$(leader 127.0.0.1:31379,127.0.0.1:32379,127.0.0.1:33379)
HZ=$(getconf CLK_TCK)
echo "strata leader $SL, etcd leader $EL; $PASSES passes" >&2
for pass in $(seq 1 "$PASSES"); do
  order="strata etcd"; [ $((pass % 2)) = 0 ] && order="etcd strata"
  for op in read write; do
    for size in 64 256; do
      value=$(head -c "$size" /dev/zero | tr '\0' a)
      for c in 1 64 256; do
        n=$([ "$c" = 1 ] && echo 2000 || echo 20000)
        for srv in $order; do
          if [ $srv = strata ]; then addr=$SL; pids="${SPIDS[*]}"; else addr=$EL; pids="${EPIDS[*]}"; fi
          url="http://$addr/v2/keys/foo"
          curl -s -X PUT "$url" -d "value=$value" >/dev/null
          c0=$(cpu_ticks $pids)
          if [ $op = read ]; then
            r=$(hey -n $n -c $c "$url" | awk '/Requests\/sec/ {print $2}')
          else
            r=$(hey -n $n -c $c -m PUT -T application/x-www-form-urlencoded -d "value=$value" "$url" | awk '/Requests\/sec/ {print $2}')
          fi
          c1=$(cpu_ticks $pids)
          key="$op $size $c $srv"
          QPS[$key]="${QPS[$key]:-} $r"
          CPU[$key]="${CPU[$key]:-} $(echo "$c0 $c1 $n $HZ" | awk '{printf "%.3f", ($2-$1)/$4*1000/$3}')"
          echo "pass $pass: $key: $r req/s" >&2
        done
      done
    done
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "| op | value | clients | Strata QPS | etcd 3.4 QPS | Strata/etcd | Strata CPU s/1000 | etcd CPU s/1000 |"
echo "|---|---|---|---|---|---|---|---|"
for op in read write; do for size in 64 256; do for c in 1 64 256; do
  s=$(echo "${QPS[$op $size $c strata]}" | median); e=$(echo "${QPS[$op $size $c etcd]}" | median)
  sc=$(echo "${CPU[$op $size $c strata]}" | median); ec=$(echo "${CPU[$op $size $c etcd]}" | median)
  printf "| %s | %s B | %s | %.0f | %.0f | %.2f | %.3f | %.3f |\n" $op $size $c "$s" "$e" "$(echo "$s $e" | awk '{print $1/$2}')" "$sc" "$ec"
done; done; done
