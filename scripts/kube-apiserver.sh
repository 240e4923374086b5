#!/usr/bin/env bash
# Runs a real kube-apiserver (Kubernetes v1.37.2, built from the module
# proxy's k8s.io/kubernetes through kubetest/apiserver's wrapper module) on
# Strata and drives it with kubectl: namespaces, deployments, configmaps,
# secrets encrypted at rest, a CRD and its objects, `get --chunk-size`,
# `get -w`, deletion with each propagation policy, events (kept under etcd
# leases) and the apiserver's own leases. Three runs:
#
#   plain    one `strata serve`, --etcd-servers=http://...
#   mtls     one `strata serve` with TLS and client certificates
#            (--etcd-cafile/--etcd-certfile/--etcd-keyfile)
#   cluster  three members; the leader is killed with SIGKILL mid-scenario
#            and restarted; the scenario goes on
#
#   scripts/kube-apiserver.sh [plain|mtls|cluster]...   # default: all three
#
# The first build of kube-apiserver and kubectl takes long (tens of minutes
# on two cores); the binaries go to $KUBE_BIN (default
# /tmp/strata-kube/bin) and are reused. Every server listens on 127.0.0.1,
# on ports from 20000-32767. Prints one PASS/FAIL line per check and exits
# non-zero if any failed. Needs go, openssl, curl and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=${KUBE_WORK:-/tmp/strata-kube}
BIN=${KUBE_BIN:-$WORK/bin}
mkdir -p "$WORK" "$BIN"
RUNS=("$@")
[ ${#RUNS[@]} -gt 0 ] || RUNS=(plain mtls cluster)

fails=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
check() { # check NAME COMMAND...: PASS if the command succeeds
  local name=$1; shift
  if "$@" >>"$RUN/checks.log" 2>&1; then pass "$MODE: $name"; else fail "$MODE: $name (see $RUN/checks.log)"; fi
}

port() { # a loopback port in 20000-32767 that is free now
  local p
  for _ in $(seq 200); do
    p=$((20000 + RANDOM % 12768))
    if ! (echo >/dev/tcp/127.0.0.1/$p) 2>/dev/null; then echo $p; return; fi
  done
  echo "no free port" >&2; return 1
}

echo "== building kube-apiserver and kubectl v1.37.2 into $BIN"
if [ ! -x "$BIN/kube-apiserver" ] || [ ! -x "$BIN/kubectl" ]; then
  (cd kubetest/apiserver && time nice -n 10 go build -o "$BIN/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl)
fi
go build -o "$BIN/strata" ./cmd/strata
"$BIN/kube-apiserver" --version

echo "== certificates"
PKI=$WORK/pki
if [ ! -e "$PKI/admin.crt" ]; then
  mkdir -p "$PKI"
  (
    cd "$PKI"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 -subj "/CN=strata-kube-ca" 2>/dev/null
    sign() { # sign NAME SUBJECT [SAN]
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
      if [ -n "${3:-}" ]; then printf 'subjectAltName=%s\n' "$3" >"$1.ext"; else : >"$1.ext"; fi
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 30 -extfile "$1.ext" 2>/dev/null
    }
    sign apiserver "/CN=kube-apiserver" "IP:127.0.0.1,DNS:localhost"
    sign admin "/O=system:masters/CN=admin"
    sign etcd-server "/CN=strata" "IP:127.0.0.1,DNS:localhost"
    sign etcd-client "/CN=kube-apiserver-etcd-client"
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
fi
cat >"$WORK/encryption.yaml" <<EOF
apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: [secrets]
    providers:
      - aescbc:
          keys:
            - name: key1
              secret: $(head -c 32 /dev/urandom | base64)
      - identity: {}
EOF

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# start_strata NAME TOML: starts a member, records its pid in PID_<NAME>.
start_strata() {
  "$BIN/strata" serve --config "$2" >>"$RUN/$1.log" 2>&1 &
  eval "PID_$1=$!"
  PIDS+=($!)
}

# wait_etcd ENDPOINT: until the member answers /health (over TLS in mtls).
wait_etcd() {
  for _ in $(seq 600); do
    if curl -sf "${CURL_TLS[@]}" "$SCHEME://$1/health" >/dev/null; then return; fi
    sleep 0.1
  done
  echo "strata at $1 did not answer /health" >&2; return 1
}

# etcd_get KEY: the raw value of KEY and its lease, through the gRPC gateway.
etcd_get() {
  curl -sf "${CURL_TLS[@]}" "$SCHEME://${ENDPOINTS[0]}/v3/kv/range" \
    -d "{\"key\":\"$(printf %s "$1" | base64 -w0)\"}" |
    python3 -c 'import base64,json,sys; kv=json.load(sys.stdin).get("kvs",[{}])[0]; print(kv.get("lease","0")); sys.stdout.buffer.write(base64.b64decode(kv.get("value","")))'
}

# secret_encrypted KEY: Strata holds KEY as aescbc ciphertext, not the
# secret's plain text.
secret_encrypted() {
  etcd_get "$1" >"$RUN/raw.bin"
  grep -qa 'k8s:enc:aescbc:v1:key1' "$RUN/raw.bin" && ! grep -qa hunter2 "$RUN/raw.bin"
}

# has_lease KEY: KEY is attached to an etcd lease (events' TTL).
has_lease() {
  local lease
  lease=$(etcd_get "$1" | head -1)
  [ -n "$lease" ] && [ "$lease" != 0 ]
}

start_apiserver() {
  API_PORT=$(port)
  local etcd_urls=""
  for e in "${ENDPOINTS[@]}"; do etcd_urls+="${etcd_urls:+,}$SCHEME://$e"; done
  local tls=()
  if [ "$MODE" = mtls ]; then
    tls=(--etcd-cafile "$PKI/ca.crt" --etcd-certfile "$PKI/etcd-client.crt" --etcd-keyfile "$PKI/etcd-client.key")
  fi
  "$BIN/kube-apiserver" \
    --etcd-servers "$etcd_urls" "${tls[@]}" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --client-ca-file "$PKI/ca.crt" --authorization-mode RBAC \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-account-issuer https://kubernetes.default.svc \
    --service-cluster-ip-range 10.96.0.0/24 \
    --encryption-provider-config "$WORK/encryption.yaml" \
    --event-ttl 1h --endpoint-reconciler-type none \
    >"$RUN/kube-apiserver.log" 2>&1 &
  PID_API=$!
  PIDS+=($!)
  cat >"$RUN/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: strata, cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$PKI/ca.crt"}}]
users: [{name: admin, user: {client-certificate: "$PKI/admin.crt", client-key: "$PKI/admin.key"}}]
contexts: [{name: strata, context: {cluster: strata, user: admin}}]
current-context: strata
EOF
  export KUBECONFIG=$RUN/kubeconfig
  for _ in $(seq 1200); do
    if "$BIN/kubectl" get --raw /readyz >/dev/null 2>&1; then return; fi
    if ! kill -0 $PID_API 2>/dev/null; then tail -30 "$RUN/kube-apiserver.log"; return 1; fi
    sleep 0.1
  done
  echo "kube-apiserver not ready in 120s" >&2; tail -30 "$RUN/kube-apiserver.log"; return 1
}

k() { "$BIN/kubectl" "$@"; }

# The scenario; $1 is called between its two halves (the cluster run
# kills its leader there).
scenario() {
  local mid=$1 ns=strata-$MODE
  check "namespace create" k create namespace $ns
  check "namespace listed" sh -c "$BIN/kubectl get namespaces -o name | grep -qx namespace/$ns"

  check "deployment create" k -n $ns create deployment web --image=registry.invalid/web:1 --replicas=2
  check "deployment scale" k -n $ns scale deployment web --replicas=3
  check "deployment read back" sh -c "[ \"\$($BIN/kubectl -n $ns get deployment web -o jsonpath='{.spec.replicas}')\" = 3 ]"

  check "configmap create" k -n $ns create configmap cfg --from-literal=a=1
  check "configmap update" sh -c "$BIN/kubectl -n $ns patch configmap cfg -p '{\"data\":{\"a\":\"2\"}}' && [ \"\$($BIN/kubectl -n $ns get cm cfg -o jsonpath='{.data.a}')\" = 2 ]"

  check "secret create" k -n $ns create secret generic s1 --from-literal=password=hunter2
  check "secret reads back decrypted" sh -c "[ \"\$($BIN/kubectl -n $ns get secret s1 -o jsonpath='{.data.password}' | base64 -d)\" = hunter2 ]"
  check "secret encrypted at rest in Strata" secret_encrypted /registry/secrets/$ns/s1

  # The watch starts before the second half: it must see its changes.
  "$BIN/kubectl" -n $ns get configmaps -w --output-watch-events >"$RUN/watch.out" 2>&1 &
  local wpid=$!
  PIDS+=($wpid)
  sleep 2

  "$mid"

  check "CRD create" k apply -f - <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: crontabs.stable.example.com}
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, properties: {cronSpec: {type: string}}}
EOF
  check "CRD established" k wait --for condition=established --timeout=60s crd/crontabs.stable.example.com
  check "CRD object create" sh -c "for i in 1 2 3; do printf 'apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: c%s}\nspec: {cronSpec: \"* * * * */%s\"}\n' \$i \$i | $BIN/kubectl -n $ns apply -f - || exit 1; done"
  check "CRD objects listed" sh -c "[ \"\$($BIN/kubectl -n $ns get crontabs -o name | wc -l)\" = 3 ]"

  check "40 configmaps" sh -c "for i in \$(seq 40); do $BIN/kubectl -n $ns create configmap many-\$i --from-literal=i=\$i >/dev/null || exit 1; done"
  check "get --chunk-size=7 pages through all" sh -c "$BIN/kubectl -n $ns get configmaps --chunk-size=7 -o name -v=6 2>$RUN/chunk.log >$RUN/chunk.out; [ \$(grep -c '^configmap/many-' $RUN/chunk.out) = 40 ] && [ \$(grep -c 'continue=' $RUN/chunk.log) -ge 5 ]"

  check "delete --cascade=background" k -n $ns delete configmap many-1 --cascade=background
  # Orphan and foreground deletion leave a finalizer for the garbage
  # collector (kube-controller-manager, not run here) to remove: check that
  # the apiserver stored it, without waiting for the object to go.
  check "delete --cascade=orphan marks the object" sh -c "$BIN/kubectl -n $ns delete deployment web --cascade=orphan --wait=false && $BIN/kubectl -n $ns get deployment web -o jsonpath='{.metadata.finalizers}' | grep -q orphan"
  check "delete --cascade=foreground marks the object" sh -c "$BIN/kubectl -n $ns create configmap fg --from-literal=x=1 && $BIN/kubectl -n $ns delete configmap fg --cascade=foreground --wait=false && $BIN/kubectl -n $ns get configmap fg -o jsonpath='{.metadata.finalizers}' | grep -q foregroundDeletion"

  check "event create" k -n $ns create -f - <<EOF
apiVersion: v1
kind: Event
metadata: {name: ev1}
involvedObject: {kind: ConfigMap, name: cfg, namespace: $ns}
reason: Tested
message: written through kube-apiserver to Strata
type: Normal
EOF
  check "event listed" sh -c "$BIN/kubectl -n $ns get events -o name | grep -q ev1"
  check "event kept under an etcd lease" has_lease /registry/events/$ns/ev1
  check "apiserver identity lease renewed" sh -c "$BIN/kubectl -n kube-system get leases -o name | grep -q apiserver-"

  sleep 2
  kill $wpid 2>/dev/null || true
  check "get -w saw changes from both halves" sh -c "grep -Eq '^ADDED +many-40 ' $RUN/watch.out && grep -Eq '^DELETED +many-1 ' $RUN/watch.out"
}

nothing() { :; }

kill_leader() {
  local lead
  lead=$(curl -sf "$SCHEME://${ENDPOINTS[0]}/v3/maintenance/status" -d '{}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["leader"])')
  for i in 1 2 3; do
    local id
    id=$(curl -sf "$SCHEME://${ENDPOINTS[$((i - 1))]}/v3/maintenance/status" -d '{}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["member_id"])') || continue
    if [ "$id" = "$lead" ]; then
      eval "local pid=\$PID_s$i"
      echo "-- SIGKILL to s$i (the leader, pid $pid)"
      kill -9 "$pid"
      KILLED=$i
      return
    fi
  done
  echo "-- no leader found: killing s1"; kill -9 "$PID_s1"; KILLED=1
}

restart_killed() {
  echo "-- restarting s$KILLED"
  start_strata s$KILLED "$RUN/s$KILLED.toml"
  check "killed member s$KILLED serves again" wait_etcd "${ENDPOINTS[$((KILLED - 1))]}"
}

# new_leader waits (up to 20 s) until a surviving member reports a leader
# other than the killed one: writes issued inside the election fail with
# "request timed out" on etcd too, and kubectl create does not retry them.
new_leader() {
  for _ in $(seq 1 40); do
    for i in 1 2 3; do
      [ "$i" = "$KILLED" ] && continue
      local lead
      lead=$(curl -sf "$SCHEME://${ENDPOINTS[$((i - 1))]}/v3/maintenance/status" -d '{}' | python3 -c 'import json,sys; print(json.load(sys.stdin).get("leader", 0))') || continue
      if [ -n "$lead" ] && [ "$lead" != 0 ] && [ "$lead" != "$KILLED_ID" ]; then return 0; fi
    done
    sleep 0.5
  done
  return 1
}

cluster_mid() {
  KILLED_ID=$(curl -sf "$SCHEME://${ENDPOINTS[0]}/v3/maintenance/status" -d '{}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["leader"])')
  kill_leader
  check "a new leader is elected" new_leader
  check "writes go on with the leader down" k -n strata-$MODE create configmap during-kill --from-literal=x=1
  restart_killed
}

for MODE in "${RUNS[@]}"; do
  RUN=$WORK/run-$MODE
  rm -rf "$RUN"; mkdir -p "$RUN"
  echo "== $MODE"
  SCHEME=http; CURL_TLS=()
  ENDPOINTS=()
  case $MODE in
    plain | mtls)
      ENDPOINTS=(127.0.0.1:$(port))
      {
        echo "db_path = \"$RUN/s1\""
        echo "[server]"
        echo "listen = \"${ENDPOINTS[0]}\""
        if [ "$MODE" = mtls ]; then
          echo "cert_file = \"$PKI/etcd-server.crt\""
          echo "key_file = \"$PKI/etcd-server.key\""
          echo "client_ca_file = \"$PKI/ca.crt\""
        fi
      } >"$RUN/s1.toml"
      if [ "$MODE" = mtls ]; then
        SCHEME=https
        CURL_TLS=(--cacert "$PKI/ca.crt" --cert "$PKI/etcd-client.crt" --key "$PKI/etcd-client.key")
      fi
      start_strata s1 "$RUN/s1.toml"
      wait_etcd "${ENDPOINTS[0]}"
      start_apiserver
      scenario nothing
      ;;
    cluster)
      PEERS=()
      for i in 1 2 3; do ENDPOINTS+=(127.0.0.1:$(port)); PEERS+=(127.0.0.1:$(port)); done
      for i in 1 2 3; do
        {
          echo "db_path = \"$RUN/s$i\""
          echo "[server]"
          echo "listen = \"${ENDPOINTS[$((i - 1))]}\""
          echo "[cluster]"
          echo "name = \"s$i\""
          echo "listen_peer = \"${PEERS[$((i - 1))]}\""
          for j in 1 2 3; do
            printf '[[cluster.members]]\nname = "s%s"\npeer_url = "http://%s"\nclient_url = "http://%s"\n' $j "${PEERS[$((j - 1))]}" "${ENDPOINTS[$((j - 1))]}"
          done
        } >"$RUN/s$i.toml"
        start_strata s$i "$RUN/s$i.toml"
      done
      for e in "${ENDPOINTS[@]}"; do wait_etcd "$e"; done
      start_apiserver
      scenario cluster_mid
      ;;
    *) echo "unknown run $MODE: allowed are plain, mtls and cluster" >&2; exit 2 ;;
  esac
  kill -9 "$PID_API" 2>/dev/null || true
  cleanup
  PIDS=()
done

echo "== $fails checks failed"
[ $fails = 0 ]
