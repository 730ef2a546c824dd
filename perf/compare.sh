#!/usr/bin/env bash
# perf/compare.sh — rampart vs nginx as a TLS reverse proxy, in one run.
#
# Both proxies front the same upstream (a separate 1-worker nginx returning a ~100 byte body)
# with the same certificate, and are loaded in interleaved rounds. The figure of merit is
# requests per proxy CPU-second (utime+stime of the proxy's processes, from /proc/PID/stat),
# which is robust to the load generator and upstream sharing the 2 cores. See perf/README.md.
#
# Protocols: h1 (wrk), h2 (h2load), h3 (perf/h3load, rampart only: nginx 1.22 has no HTTP/3),
# or all three in one run (PROTO=all), each with its own interleaved rounds.
#
# CHAIN=1 adds a third proxy to every round: a second rampart with the full request chain on
# (JWT auth with required scopes, a per-tenant quota, header rules, the access log to a file,
# tracing), and every load tool sends the same bearer token to all three. The summary then gives
# nginx, bare rampart and chained rampart side by side: the "Q per instance" figure.
#
# HAPROXY=1 (default: when haproxy is installed) adds haproxy as one more proxy (h1, h2).
# PIN=1 pins every proxy to CPU PROXY_CPU and the load tool and the upstream to LOAD_CPU (taskset).
# RATES="500 1000 2000" makes every timed run open loop: perf/openload at each offered rate, for each
# of MODES ("ka new": keep-alive, a new connection per request), latency measured from the due time;
# NEW_RATES (default: RATES) are the rates of the "new" mode (a handshake per request costs more).
# H2_VARIANT=1 adds proxy "rampart-h2" to the h2 rounds: the bare rampart with h2_server: rampart
# (l7/h2) on its listener; H2_SERVER=std|rampart sets h2_server on the other rampart listeners.
# BASELINE=path adds proxy "baseline" to every round: the bare rampart again, run from another
# binary (e.g. one built from main), for an A/B of a change in the same run; the summary then
# gives rampart/baseline per protocol.
# RUNS_DIR=dir writes dir/runs.tsv (one line per timed run) and each run's raw output for perf/report.
#
# Knobs (env): DURATION=10s CONNS=64 STREAMS=10 THREADS=2 ROUNDS=3 PROTO=h1|h2|h3|all CHAIN=0|1
#              H2_VARIANT=0|1 HAPROXY=0|1 PIN=0|1 PROXY_CPU=0 LOAD_CPU=1 RATES= NEW_RATES= MODES="ka new" RUNS_DIR= OPENLOAD=path
#              RAMPART=path H3LOAD=path KEEP=1 RAMPART_PROTOCOLS="h2, http1, h3" H2_SERVER=std|rampart
#              PORTS: RAMPART_PORT=18443 NGINX_PORT=18444 UPSTREAM_PORT=18081 ADMIN_PORT=19901
#                     CHAIN_PORT=18445 CHAIN_ADMIN_PORT=19902 (CHAIN=1 only) HAPROXY_PORT=18446
#                     H2_PORT=18447 H2_ADMIN_PORT=19903 (H2_VARIANT=1 only)
#                     BASELINE_PORT=18448 BASELINE_ADMIN_PORT=19904 (BASELINE only)
set -euo pipefail

: "${DURATION:=10s}" "${CONNS:=64}" "${STREAMS:=10}" "${THREADS:=2}" "${ROUNDS:=3}" "${PROTO:=h1}"
: "${RAMPART_PORT:=18443}" "${NGINX_PORT:=18444}" "${UPSTREAM_PORT:=18081}" "${ADMIN_PORT:=19901}"
: "${CHAIN:=0}" "${CHAIN_PORT:=18445}" "${CHAIN_ADMIN_PORT:=19902}" "${HAPROXY_PORT:=18446}"
: "${H2_VARIANT:=0}" "${H2_PORT:=18447}" "${H2_ADMIN_PORT:=19903}"
: "${BASELINE:=}" "${BASELINE_PORT:=18448}" "${BASELINE_ADMIN_PORT:=19904}"
: "${PIN:=0}" "${PROXY_CPU:=0}" "${LOAD_CPU:=1}" "${RATES:=}" "${MODES:=ka new}" "${RUNS_DIR:=}" "${NEW_RATES:=$RATES}"
if [ -z "${HAPROXY:-}" ]; then if command -v haproxy >/dev/null; then HAPROXY=1; else HAPROXY=0; fi; fi
# rampart's listener serves h3 in every run, so h1/h2 figures don't depend on PROTO; its h1/h2
# responses then carry an Alt-Svc header, which wrk and h2load ignore. Drop h3 here to compare.
: "${RAMPART_PROTOCOLS:=h2, http1, h3}"
: "${WARMUP:=2s}" # each proxy's warm-up per protocol
: "${H2_SERVER:=std}" # rampart's HTTP/2 server (listener h2_server): std (x/net/http2) or rampart (l7/h2)
case "$H2_SERVER" in std | rampart) ;; *) echo "compare.sh: H2_SERVER must be std or rampart, not '$H2_SERVER'" >&2; exit 1 ;; esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { # also marks the report (once there is one) as failed
  echo "compare.sh: $*" >&2
  if [ -n "${report:-}" ]; then echo "FAILED: $*" >>"$report"; fi
  exit 1
}

# ---- preflight: tools, knobs, free ports ------------------------------------------------
case "$PROTO" in h1 | h2 | h3) protos=("$PROTO") ;; all) protos=(h1 h2 h3) ;; *) die "PROTO must be h1, h2, h3 or all, not '$PROTO'" ;; esac
case "$CHAIN" in 0 | "") chain=false ;; 1) chain=true ;; *) die "CHAIN must be 0 or 1, not '$CHAIN'" ;; esac
case "$HAPROXY" in 0) haproxy=false ;; 1) haproxy=true ;; *) die "HAPROXY must be 0 or 1, not '$HAPROXY'" ;; esac
case "$H2_VARIANT" in 0 | "") h2variant=false ;; 1) h2variant=true ;; *) die "H2_VARIANT must be 0 or 1, not '$H2_VARIANT'" ;; esac
case "$PIN" in 0 | "") pin=false ;; 1) pin=true ;; *) die "PIN must be 0 or 1, not '$PIN'" ;; esac
open=false rates=() modes=(ka)
if [ -n "$RATES" ]; then
  open=true
  read -ra rates <<<"${RATES//,/ }"
  read -ra modes <<<"${MODES//,/ }"
  read -ra new_rates <<<"${NEW_RATES//,/ }"
  for r in "${rates[@]}"; do [[ $r =~ ^[0-9]+$ ]] && ((r > 0)) || die "RATES: '$r' is not a positive whole number of req/s"; done
  for r in "${new_rates[@]}"; do [[ $r =~ ^[0-9]+$ ]] && ((r > 0)) || die "NEW_RATES: '$r' is not a positive whole number of req/s"; done
  ((${#modes[@]})) || die "MODES is empty: want ka, new or both"
  for m in "${modes[@]}"; do case $m in ka | new) ;; *) die "MODES: '$m' is not ka or new" ;; esac; done
fi
if [ -n "$RUNS_DIR" ]; then
  mkdir -p "$RUNS_DIR" || die "RUNS_DIR $RUNS_DIR: cannot create it"
  RUNS_DIR=$(realpath "$RUNS_DIR")
fi
declare -A tool_of=([h1]=wrk [h2]=h2load [h3]=h3load)
needs=(nginx openssl curl ss pgrep)
if $haproxy; then needs+=(haproxy); fi
if $pin; then
  needs+=(taskset)
  for c in "$PROXY_CPU" "$LOAD_CPU"; do
    [[ $c =~ ^[0-9]+$ ]] && ((c < $(nproc))) || die "PIN=1: CPU '$c' is not one of this machine's $(nproc) CPUs"
  done
  [ "$PROXY_CPU" != "$LOAD_CPU" ] || die "PIN=1: PROXY_CPU and LOAD_CPU must differ"
fi
if $open; then
  [ -n "${OPENLOAD:-}" ] || needs+=(go) # perf/openload is built below unless OPENLOAD is given
  tool_of=([h1]=openload [h2]=openload [h3]=openload)
fi
for proto in "${protos[@]}"; do
  case $proto in
    h1 | h2) $open || needs+=("${tool_of[$proto]}") ;;
    h3) [ -n "${H3LOAD:-}" ] || needs+=(go) ;; # perf/h3load is built below unless H3LOAD is given
  esac
done
for t in "${needs[@]}"; do
  command -v "$t" >/dev/null || die "missing '$t' (run: hack/deps.sh perf; curl/openssl: hack/deps.sh all)"
done
rampart_h3=false
if grep -qw h3 <<<"$RAMPART_PROTOCOLS"; then rampart_h3=true; fi
if [[ " ${protos[*]} " == *" h3 "* ]] && ! $rampart_h3; then die "PROTO=$PROTO needs h3 in RAMPART_PROTOCOLS"; fi
tcp_ports=("$RAMPART_PORT" "$NGINX_PORT" "$UPSTREAM_PORT" "$ADMIN_PORT")
rampart_ports=("$RAMPART_PORT")
if $chain; then tcp_ports+=("$CHAIN_PORT" "$CHAIN_ADMIN_PORT") rampart_ports+=("$CHAIN_PORT"); fi
if $haproxy; then tcp_ports+=("$HAPROXY_PORT"); fi
if $h2variant; then tcp_ports+=("$H2_PORT" "$H2_ADMIN_PORT") rampart_ports+=("$H2_PORT"); fi
if [ -n "$BASELINE" ]; then
  [ -x "$BASELINE" ] || die "BASELINE=$BASELINE is not an executable (a rampart binary)"
  BASELINE=$(realpath "$BASELINE")
  tcp_ports+=("$BASELINE_PORT" "$BASELINE_ADMIN_PORT") rampart_ports+=("$BASELINE_PORT")
fi
if [ "$(printf '%s\n' "${tcp_ports[@]}" | sort -u | wc -l)" != "${#tcp_ports[@]}" ]; then die "the *_PORT knobs must differ: ${tcp_ports[*]}"; fi
for p in "${tcp_ports[@]}"; do
  if ss -Htln "sport = :$p" | grep -q .; then die "port 127.0.0.1:$p is in use; free it or set the *_PORT knobs"; fi
done
# with h3, rampart also binds UDP on its port
for p in "${rampart_ports[@]}"; do
  if $rampart_h3 && ss -Huan "sport = :$p" | grep -q .; then
    die "UDP port 127.0.0.1:$p is in use (rampart's HTTP/3); free it or set RAMPART_PORT/CHAIN_PORT"
  fi
done

# ---- work dir and cleanup ---------------------------------------------------------------
work=$(mktemp -d /tmp/rampart-compare.XXXXXX)
chmod 755 "$work" # nginx workers run as 'nobody' and need to reach their prefix dirs
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if ((rc != 0)); then # show what the servers said before the evidence is deleted
    for f in "$work"/bare.log "$work"/chain.log "$work"/h2.log "$work"/haproxy.log "$work"/*/error.log; do
      [ -s "$f" ] && { echo "--- tail $f" >&2; tail -n 20 "$f" >&2; }
    done
  fi
  if [ -n "${KEEP:-}" ]; then echo "work dir kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$root/perf/results"
report="$root/perf/results/compare-$(date +%Y%m%d-%H%M%S)-$PROTO$($chain && echo -chain || true).txt"
raw="$work/raw.txt" # every load tool's full output; appended to the report file at the end
: >"$raw"
say() { printf '%s\n' "$*" | tee -a "$report"; }

# ---- build rampart (and h3load), make the certificate and signing key ---------------------
if [ -z "${RAMPART:-}" ]; then
  RAMPART=$work/rampart
  (cd "$root" && go build -o "$RAMPART" ./cmd/rampart) || die "go build failed"
fi
RAMPART=$(realpath "$RAMPART")
if [[ " ${protos[*]} " == *" h3 "* ]]; then
  if [ -z "${H3LOAD:-}" ]; then
    H3LOAD=$work/h3load
    (cd "$root" && go build -o "$H3LOAD" ./perf/h3load) || die "go build ./perf/h3load failed"
  fi
  H3LOAD=$(realpath "$H3LOAD")
fi
if $open; then
  if [ -z "${OPENLOAD:-}" ]; then
    OPENLOAD=$work/openload
    (cd "$root" && go build -o "$OPENLOAD" ./perf/openload) || die "go build ./perf/openload failed"
  fi
  OPENLOAD=$(realpath "$OPENLOAD")
fi
# PIN=1: proxies on one CPU, the load tool and the upstream on another (taskset -c), so every
# proxy gets the same single core; nginx then runs 1 worker and haproxy 1 thread (rampart's Go
# runtime sizes GOMAXPROCS from the affinity mask: 1).
pin_proxy=() pin_load=() nginx_workers=auto haproxy_threads=""
if $pin; then
  pin_proxy=(taskset -c "$PROXY_CPU") pin_load=(taskset -c "$LOAD_CPU") nginx_workers=1 haproxy_threads="nbthread 1"
fi
cd "$work" # from here on, nothing the script runs can litter the repo
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
  -keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null
chmod 644 "$work/tls.key"
"$RAMPART" keygen -out "$work/snap" >/dev/null

# CHAIN=1: an Ed25519 key pair for JWTs, its JWKS, and tokens signed with it (EdDSA), all with
# openssl. The token carries iss/aud/sub/tenant/scope, iat/nbf and a one-year exp.
jwt_iss=https://perf.rampart.test/ jwt_aud=perf-api jwt_tenant=perf-tenant jwt_sub=perf-user
b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
mint() { # mint SCOPE -> a compact JWS (EdDSA, kid perf-1) signed with $work/jwt.key
  local now h p
  now=$(date +%s)
  h=$(printf '{"alg":"EdDSA","typ":"JWT","kid":"perf-1"}' | b64url)
  p=$(printf '{"iss":"%s","aud":"%s","sub":"%s","tenant":"%s","scope":"%s","iat":%d,"nbf":%d,"exp":%d}' \
    "$jwt_iss" "$jwt_aud" "$jwt_sub" "$jwt_tenant" "$1" "$now" "$now" $((now + 365 * 86400)) | b64url)
  printf '%s.%s' "$h" "$p" >"$work/jwt.in"
  printf '%s.%s.%s' "$h" "$p" "$(openssl pkeyutl -sign -rawin -inkey "$work/jwt.key" -in "$work/jwt.in" | b64url)"
}
hdr_args=() # extra load-tool arguments: the same Authorization header to every proxy
if $chain; then
  openssl genpkey -algorithm ed25519 -out "$work/jwt.key" 2>/dev/null || die "openssl: no Ed25519"
  # an Ed25519 SubjectPublicKeyInfo in DER is 44 bytes, the raw public key its last 32
  jwk_x=$(openssl pkey -in "$work/jwt.key" -pubout -outform DER | tail -c 32 | b64url)
  printf '{"keys":[{"kty":"OKP","crv":"Ed25519","alg":"EdDSA","use":"sig","kid":"perf-1","x":"%s"}]}\n' \
    "$jwk_x" >"$work/jwks.json"
  token=$(mint "bench:read profile")
  token_noscope=$(mint "profile")
  [ -n "$token" ] && [ -n "$token_noscope" ] || die "could not mint the JWTs"
  hdr_args=(-H "Authorization: Bearer $token")
fi

wait_http() { # wait_http URL — until it answers 200, for up to 10 s
  for _ in $(seq 100); do
    [ "$(curl -sk -o /dev/null -w '%{http_code}' "$1" 2>/dev/null)" = 200 ] && return 0
    sleep 0.1
  done
  die "$1 did not answer 200 within 10 s"
}

# nginx >= 1.25.1 spells HTTP/2 'http2 on;'; older ones put 'http2' on the listen line.
nginx_ver=$(nginx -v 2>&1 | sed 's|.*nginx/||')
if [ "$(printf '%s\n' 1.25.1 "$nginx_ver" | sort -V | head -1)" = 1.25.1 ]; then
  h2_listen="" h2_directive="http2 on;"
else
  h2_listen="http2" h2_directive=""
fi

start_nginx() { # start_nginx NAME CONFIG-BODY [PIN-PREFIX...] -> sets nginx_pid (master, daemon off)
  local name=$1 body=$2
  shift 2
  mkdir -p "$work/$name"
  printf 'daemon off;\npid %s/nginx.pid;\nerror_log %s/error.log warn;\n%s\n' \
    "$work/$name" "$work/$name" "$body" >"$work/$name/nginx.conf"
  nginx -t -q -p "$work/$name/" -c "$work/$name/nginx.conf" -e "$work/$name/error.log" || die "bad $name config"
  "$@" nginx -p "$work/$name/" -c "$work/$name/nginx.conf" -e "$work/$name/error.log" &
  nginx_pid=$!
  pids+=("$nginx_pid")
}

# ---- 1. the shared upstream: one nginx worker, fixed ~100 byte body -----------------------
body='rampart perf upstream: a fixed response body of about one hundred bytes for proxy benchmarks..'
# CHAIN=1: a request with X-Perf-Probe gets back what the upstream saw of the chain's request
# header rule and identity headers (X-Perf-Echo); load runs send no X-Perf-Probe, and nginx's
# add_header adds nothing for an empty value, so their responses are unchanged.
echo_map="" echo_hdr=""
if $chain; then
  echo_map="map \$http_x_perf_probe \$perf_echo { \"\" \"\"; default \"chain=\$http_x_perf_chain tenant=\$http_x_rampart_tenant subject=\$http_x_rampart_subject\"; }"
  echo_hdr="add_header X-Perf-Echo \$perf_echo;"
fi
start_nginx upstream "worker_processes 1;
events { worker_connections 4096; }
http {
  access_log off; keepalive_requests 10000000; keepalive_timeout 300s;
  $echo_map
  server {
    listen 127.0.0.1:$UPSTREAM_PORT;
    default_type text/plain;
    location / { $echo_hdr return 200 \"$body\"; }
  }
}" "${pin_load[@]}"
upstream_pid=$nginx_pid
wait_http "http://127.0.0.1:$UPSTREAM_PORT/bench"

# ---- 2. nginx as the TLS reverse proxy ----------------------------------------------------
start_nginx nginx-proxy "worker_processes $nginx_workers;
events { worker_connections 4096; }
http {
  access_log off; keepalive_requests 10000000; keepalive_timeout 300s;
  upstream backend { server 127.0.0.1:$UPSTREAM_PORT; keepalive 64; keepalive_requests 10000000; }
  server {
    listen 127.0.0.1:$NGINX_PORT ssl $h2_listen;
    $h2_directive
    ssl_certificate $work/tls.crt; ssl_certificate_key $work/tls.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    # AES-128-GCM first, as Go's server picks on AES-capable CPUs, so both do the same crypto.
    ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256;
    ssl_prefer_server_ciphers on;
    ssl_session_cache shared:SSL:10m; ssl_session_timeout 1h;
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection \"\"; }
  }
}" "${pin_proxy[@]}"
wait_http "https://127.0.0.1:$NGINX_PORT/bench"

# ---- 2b. HAPROXY=1: haproxy as the TLS reverse proxy (h1 and h2 by ALPN; 2.6 in Debian 12 has no QUIC)
haproxy_pid=""
if $haproxy; then
  # haproxy refuses to start when 2 x maxconn (+ a few) exceeds the open-file limit it may raise to
  fdmax=$(ulimit -Hn)
  [[ $fdmax =~ ^[0-9]+$ ]] || fdmax=1048576
  hap_maxconn=$(((fdmax - 200) / 2 < 4096 ? (fdmax - 200) / 2 : 4096))
  ((hap_maxconn >= 2 * CONNS)) || die "haproxy: open-file limit $fdmax allows maxconn $hap_maxconn, under 2 x CONNS=$CONNS; raise ulimit -n"
  cat "$work/tls.crt" "$work/tls.key" >"$work/haproxy.pem"
  cat >"$work/haproxy.cfg" <<EOF
global
  $haproxy_threads
  maxconn $hap_maxconn
  ssl-default-bind-ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305
  ssl-default-bind-ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256
  ssl-default-bind-options ssl-min-ver TLSv1.2
  tune.ssl.cachesize 20000
defaults
  mode http
  timeout connect 5s
  timeout client 300s
  timeout server 300s
  timeout http-keep-alive 300s
  option http-keep-alive
  http-reuse always
frontend fe
  bind 127.0.0.1:$HAPROXY_PORT ssl crt $work/haproxy.pem alpn h2,http/1.1
  default_backend upstream
backend upstream
  server up 127.0.0.1:$UPSTREAM_PORT
EOF
  haproxy -c -q -f "$work/haproxy.cfg" >"$work/haproxy.log" 2>&1 || { cat "$work/haproxy.log" >&2; die "bad haproxy config"; }
  "${pin_proxy[@]}" haproxy -db -f "$work/haproxy.cfg" >>"$work/haproxy.log" 2>&1 &
  haproxy_pid=$!
  pids+=("$haproxy_pid")
  wait_http "https://127.0.0.1:$HAPROXY_PORT/bench"
fi

# ---- 3. rampart proxies from signed snapshots ---------------------------------------------
# start_rampart NAME PORT ADMIN_PORT ACCESS_LOG [TOP-LEVEL-YAML [ROUTE-YAML]] -> sets rampart_pid.
# NAME's config, snapshots and state live in $work/NAME/, its log is $work/NAME.log.
start_rampart() {
  local d=$work/$1
  mkdir -p "$d/snapshots" "$d/state"
  cat >"$d/rampart.yaml" <<EOF
version: {epoch: 1, sequence: 1}
${5:-}
listeners:
  - name: https
    address: 127.0.0.1:$2
    protocols: [$RAMPART_PROTOCOLS]
    h2_server: $h2_server
    tls: {certificates: [{cert_file: $work/tls.crt, key_file: $work/tls.key}]}
clusters:
  - {name: bench, endpoints: [{address: "127.0.0.1:$UPSTREAM_PORT", weight: 1, region: local, zone: local-a}]}
routes:
  - id: bench
    host: "*"
    methods: [GET]
    path_template: /bench
    upstream_cluster: bench
    timeout_ms: 5000
${6:-}
EOF
  "${rampart_bin:-$RAMPART}" snapshot build -config "$d/rampart.yaml" -key "$work/snap.key" \
    -out "$d/snapshots/1.snap" >"$work/$1.log" 2>&1 || { cat "$work/$1.log" >&2; die "rampart snapshot build ($1) failed"; }
  "${pin_proxy[@]}" "${rampart_bin:-$RAMPART}" proxy -snapshot-dir "$d/snapshots" -state-dir "$d/state" \
    -public-key "$work/snap.pub" -admin "127.0.0.1:$3" -access-log "$4" -drain-timeout 1s \
    >"$work/$1.log" 2>&1 &
  rampart_pid=$!
  pids+=("$rampart_pid")
  wait_http "http://127.0.0.1:$3/readyz"
}
h2_server=$H2_SERVER # the listener's h2_server
start_rampart bare "$RAMPART_PORT" "$ADMIN_PORT" off # the bare proxy: no policies, no access log
bare_pid=$rampart_pid
wait_http "https://127.0.0.1:$RAMPART_PORT/bench"

# H2_VARIANT=1: the bare proxy again, with rampart's own HTTP/2 server (l7/h2) on its listener.
h2_pid=""
if $h2variant; then
  h2_server=rampart
  start_rampart h2 "$H2_PORT" "$H2_ADMIN_PORT" off
  h2_pid=$rampart_pid h2_server=$H2_SERVER
  wait_http "https://127.0.0.1:$H2_PORT/bench"
fi

# BASELINE=path: the bare proxy again, from that binary.
baseline_pid=""
if [ -n "$BASELINE" ]; then
  rampart_bin=$BASELINE
  start_rampart baseline "$BASELINE_PORT" "$BASELINE_ADMIN_PORT" off
  baseline_pid=$rampart_pid rampart_bin=""
  wait_http "https://127.0.0.1:$BASELINE_PORT/bench"
fi

# CHAIN=1: the same listener, cluster and route, plus the whole request chain.
chain_pid="" alog=$work/chain/access.log
if $chain; then
  start_rampart chain "$CHAIN_PORT" "$CHAIN_ADMIN_PORT" "$alog" "telemetry:
  access_log: {success_sample_rate: 1}
  tracing: {sample_ratio: 1}          # every new trace sampled; no otlp_endpoint, so nothing exported
auth_policies:
  - id: perf-jwt
    type: jwt
    jwt: {issuer: \"$jwt_iss\", audiences: [$jwt_aud], algorithms: [EdDSA], jwks_file: $work/jwks.json,
          tenant_claim: tenant, scopes_claim: scope}
quota_policies:
  - {id: per-tenant, key: [tenant], rate_per_second: 1000000, burst: 1000000}   # never refuses here" \
    "    auth_policy_id: perf-jwt
    required_scopes: [bench:read]
    quota_policy_id: per-tenant
    headers:
      request: {set: {X-Perf-Chain: \"1\"}}
      response: {add: {X-Perf-Served-By: rampart-chain}}"
  chain_pid=$rampart_pid
fi
rampart_pid=$bare_pid

# ---- measurement helpers --------------------------------------------------------------------
hz=$(getconf CLK_TCK)
proxy_port() { # proxy names: rampart (the bare one), chain (CHAIN=1), rampart-h2 (H2_VARIANT=1), baseline (BASELINE), haproxy (HAPROXY=1), nginx
  case $1 in rampart) echo "$RAMPART_PORT" ;; chain) echo "$CHAIN_PORT" ;; rampart-h2) echo "$H2_PORT" ;; baseline) echo "$BASELINE_PORT" ;; haproxy) echo "$HAPROXY_PORT" ;; *) echo "$NGINX_PORT" ;; esac
}
proxy_pids() { # the processes whose CPU we charge to a proxy: a rampart, haproxy, or nginx master+workers
  case $1 in rampart) echo "$rampart_pid" ;; chain) echo "$chain_pid" ;; rampart-h2) echo "$h2_pid" ;; baseline) echo "$baseline_pid" ;; haproxy) echo "$haproxy_pid" ;; *) echo "$nginx_pid" $(pgrep -P "$nginx_pid") ;; esac
}
cpu_ticks() { # sum of utime+stime (stat fields 14, 15) over pids
  local t=0 p s f
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] || { check_alive; die "process $p is gone"; }
    s=$(<"/proc/$p/stat")
    s=${s##*) } # drop "pid (comm) " — comm may hold spaces; field 3 is now f[0]
    read -ra f <<<"$s"
    t=$((t + f[11] + f[12]))
  done
  echo "$t"
}
busy_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; } # whole machine, not idle/iowait
child_ticks() { local s; s=$(<"/proc/$$/stat"); s=${s##*) }; read -ra s <<<"$s"; echo $((s[13] + s[14])); }
# Ticks of everything this benchmark runs: the proxies, the upstream, and (via this shell's
# cutime+cstime) the load tool once reaped. Machine busy time minus this is "other" work.
bench_ticks() { echo $(($(cpu_ticks "$rampart_pid" $chain_pid $h2_pid $baseline_pid $haproxy_pid "$nginx_pid" $(pgrep -P "$nginx_pid") "$upstream_pid" $(pgrep -P "$upstream_pid")) + $(child_ticks))); }
upstream_ticks() { cpu_ticks "$upstream_pid" $(pgrep -P "$upstream_pid"); }
# The load tool's CPU: this shell's reaped children, i.e. the load tool plus a few short helpers
# (date, the $(...) subshells) that cost well under a tick.
load_ticks() { child_ticks; }
check_alive() {
  local st=0 # on death, report the exit status (2: Go panic, 137: SIGKILL); cleanup shows the log
  kill -0 "$rampart_pid" 2>/dev/null || { wait "$rampart_pid" || st=$?; die "rampart proxy died, exit status $st"; }
  if [ -n "$chain_pid" ] && ! kill -0 "$chain_pid" 2>/dev/null; then
    wait "$chain_pid" || st=$?
    die "rampart proxy with the chain died, exit status $st"
  fi
  kill -0 "$nginx_pid" 2>/dev/null || die "nginx proxy died"
  if [ -n "$haproxy_pid" ] && ! kill -0 "$haproxy_pid" 2>/dev/null; then die "haproxy died"; fi
  if [ -n "$h2_pid" ] && ! kill -0 "$h2_pid" 2>/dev/null; then die "rampart proxy with h2_server rampart died"; fi
  if [ -n "$baseline_pid" ] && ! kill -0 "$baseline_pid" 2>/dev/null; then die "the baseline rampart ($BASELINE) died"; fi
  kill -0 "$upstream_pid" 2>/dev/null || die "upstream nginx died"
}
load() { # load PROTO PORT DURATION [MODE RATE] — run the protocol's load tool; output on stdout
  if $open; then
    local new=false
    if [ "${4:-ka}" = new ]; then new=true; fi
    "${pin_load[@]}" "$OPENLOAD" -proto "$1" -rate "${5:-${rates[0]}}" -d "$3" -c "$CONNS" -new="$new" \
      "${hdr_args[@]}" "https://127.0.0.1:$2/bench"
    return
  fi
  case $1 in
    h1) "${pin_load[@]}" wrk -t"$THREADS" -c"$CONNS" -d"$3" --latency "${hdr_args[@]}" "https://127.0.0.1:$2/bench" ;;
    h2) "${pin_load[@]}" h2load -t"$THREADS" -c"$CONNS" -m "$STREAMS" -D "$3" "${hdr_args[@]}" "https://127.0.0.1:$2/bench" ;;
    h3) GOMAXPROCS=$THREADS "${pin_load[@]}" "$H3LOAD" -c "$CONNS" -m "$STREAMS" -d "$3" "${hdr_args[@]}" "https://127.0.0.1:$2/bench" ;;
  esac
}
load_desc() { # load_desc PROTO — the load command, for the report (CHAIN=1: plus -H, see the header)
  if $open; then
    echo "openload -proto $1 -c$CONNS -d$DURATION -rate R, R in ${rates[*]} (ka), ${new_rates[*]} (new); modes ${modes[*]}"
    return
  fi
  case $1 in
    h1) echo "wrk -t$THREADS -c$CONNS -d$DURATION --latency" ;;
    h2) echo "h2load -t$THREADS -c$CONNS -m$STREAMS -D $DURATION" ;;
    h3) echo "h3load -c$CONNS -m$STREAMS -d$DURATION, GOMAXPROCS=$THREADS" ;;
  esac
}
# parse PROTO OUT-FILE -> "requests req_per_s p99_ms errors" (errors: '-' when none, else a
# description; p99: '-' when the tool reports none here, perf/report reads the raw outputs)
parse() {
  if $open; then # openload: "requests:" counts 2xx; non2xx, errors, overload the rest
    awk '/^requests:/{n=$2} /^req\/s:/{r=$2}
         /^latency_us:/{for (i=2;i<=NF;i++) if ($i ~ /^p99=/) {sub(/^p99=/,"",$i); p=$i/1000}}
         /^(non2xx|errors|overload):/{if ($2>0) e=e $1 $2 " "}
         END{print n+0, r+0, (p=="" ? "-" : sprintf("%.1f", p)), (e=="" ? "-" : e)}' "$2"
    return
  fi
  case $1 in
    h1) awk '/ requests in /{n=$1} /^Requests\/sec:/{r=$2}
             /Non-2xx or 3xx responses:/{e=e "non-2xx/3xx=" $NF " "}
             /Socket errors:/{sub(/^ *Socket errors: */,""); gsub(/ /,""); e=e "socket:" $0 " "}
             END{print n+0, r+0, "-", (e=="" ? "-" : e)}' "$2" ;;
    h2) # h2load: count requests that succeeded with a 2xx; report everything else
      awk '/^finished in/{r=$4} /^requests:/{f=$10; x=$12; to=$14}
           /^status codes:/{s2=$3; s3=$5; s4=$7; s5=$9}
           END{e=""; if (f+x+to>0) e=e "failed=" f+0 ",errored=" x+0 ",timeout=" to+0 " ";
               if (s3+s4+s5>0) e=e "3xx=" s3+0 ",4xx=" s4+0 ",5xx=" s5+0 " ";
               print s2+0, r+0, "-", (e=="" ? "-" : e)}' "$2" ;;
    h3) # h3load: "requests:" counts 2xx; "non2xx:" and "errors:" the rest; "dials:" re-connects
      awk -v c="$CONNS" '/^requests:/{n=$2} /^req\/s:/{r=$2} /^dials:/{d=$2}
           /^non2xx:/{if ($2>0) e=e "non2xx=" $2 $3 $4 $5 $6 $7 " "} /^errors:/{if ($2>0) e=e "errors=" $2 " "}
           END{if (d>c) e=e "redials=" d-c " "; print n+0, r+0, "-", (e=="" ? "-" : e)}' "$2" ;;
  esac
}

# CHAIN=1 evidence: counters from the chain proxy's /metrics, and its access log.
chain_counters() { # -> "quota-allowed quota-limited auth-failures access-log-dropped"
  curl -s "http://127.0.0.1:$CHAIN_ADMIN_PORT/metrics" | awk '
    /^rampart_quota_decisions_total\{/ && /outcome="allowed"/ {a+=$NF}
    /^rampart_quota_decisions_total\{/ && /outcome="limited"/ {l+=$NF}
    /^rampart_auth_failures_total\{/ {f+=$NF}
    /^rampart_access_log_dropped_total / {d+=$NF}
    END{printf "%d %d %d %d\n", a, l, f, d}'
}
settle_log() { # until the chain's access log stops growing (its writer drained its queue), ≤ 5 s
  local a b
  b=$(stat -c %s "$alog")
  for _ in $(seq 50); do
    sleep 0.1
    a=$b b=$(stat -c %s "$alog")
    [ "$a" != "$b" ] || return 0
  done
}
# take_log -> "lines authenticated-200s bytes" of the access log so far, then empties it (the
# proxy appends with O_APPEND, so it goes on at the new end): keeps /tmp small, ~0.5 KB a line.
take_log() {
  awk -v t="$jwt_tenant" 'index($0, "\"route\":\"bench\"") && index($0, "\"tenant\":\"" t "\"") &&
      index($0, "\"status\":200,") {ok++} {n++; b += length($0) + 1} END{print n+0, ok+0, b+0}' "$alog"
  : >"$alog"
}

# ---- header -----------------------------------------------------------------------------------
tls_of() { # negotiated protocol/cipher/ALPN, to show the proxies speak the same TLS
  openssl s_client -connect "127.0.0.1:$1" -servername localhost -alpn h2,http/1.1 </dev/null 2>/dev/null |
    awk -F': *' '/^New,/{c=$0; sub(/^New, /,"",c)} /^ALPN protocol/{a=$2} END{print c ", ALPN " (a?a:"none")}'
}
h3_of() { # the same over QUIC (openssl s_client has no QUIC), from a short one-stream h3load probe
  local out
  out=$("$H3LOAD" -c 1 -m 1 -d 100ms "${hdr_args[@]}" "https://127.0.0.1:$1/bench" 2>&1) || { echo "$out" >&2; die "HTTP/3 probe of :$1 failed"; }
  awk '/^tls:/{sub(/^tls: */,""); print}' <<<"$out"
}
has_h3=false
if [[ " ${protos[*]} " == *" h3 "* ]]; then has_h3=true; fi
if nginx -V 2>&1 | grep -q http_v3_module; then
  nginx_h3="this script does not set up nginx's HTTP/3" nginx_h3_short="nginx's HTTP/3 not set up"
else
  nginx_h3="nginx $nginx_ver has no HTTP/3 (it came in 1.25, built with http_v3_module)"
  nginx_h3_short="no HTTP/3 in nginx $nginx_ver"
fi
if $chain; then
  say "rampart (bare and with the full chain) vs nginx — TLS reverse proxy, requests per proxy CPU-second"
else
  say "rampart vs nginx — TLS reverse proxy, requests per proxy CPU-second"
fi
say "date:     $(date -u +%FT%TZ)   host: $(uname -r), $(nproc) CPUs, CLK_TCK=$hz"
say "rampart:  $(cd "$root" && git describe --always --dirty 2>/dev/null || echo unknown) ($RAMPART)"
say "nginx:    $nginx_ver (proxy: worker_processes $nginx_workers = $(($(pgrep -P "$nginx_pid" | wc -l))) workers; upstream: 1 worker)"
if $haproxy; then say "haproxy:  $(haproxy -v | awk 'NR==1{print $3}') :$HAPROXY_PORT (${haproxy_threads:-threads: one per CPU}; h1, h2 by ALPN; http-reuse always; no HTTP/3 in Debian's build)"; fi
if $pin; then
  say "pinning:  PIN=1: proxies on CPU $PROXY_CPU, load tool and upstream on CPU $LOAD_CPU (taskset -c)"
else
  say "pinning:  none (PIN=0): proxies, load tool and upstream share all $(nproc) CPUs"
fi
if $open; then say "open loop: RATES=${rates[*]} req/s offered (NEW_RATES=${new_rates[*]} for new), MODES=${modes[*]} (ka: keep-alive, new: a new connection per request)"; fi
say "load:     PROTO=$PROTO CHAIN=$CHAIN HAPROXY=$HAPROXY rounds=$ROUNDS duration=$DURATION warm-up=$WARMUP, per protocol:"
for proto in "${protos[@]}"; do say "          $proto: $(load_desc "$proto")"; done
if $chain; then
  say "          every load run, against every proxy, also sends -H 'Authorization: Bearer <JWT, ${#token} bytes>'"
  say "proxies:  nginx :$NGINX_PORT and rampart :$RAMPART_PORT as without CHAIN (no policies, access logs off);"
  say "          chain :$CHAIN_PORT, a second rampart process with the same listener, cluster and route plus:"
  say "          JWT auth (EdDSA, jwks_file with one Ed25519 key, kid perf-1; iss, aud, sub, tenant, scope, exp +1 y),"
  say "          required_scopes [bench:read], quota per-tenant (key [tenant], 1e6/s, burst 1e6, local),"
  say "          request header set X-Perf-Chain: 1, response header add X-Perf-Served-By, identity headers upstream,"
  say "          access log on: JSON lines to a file in the work dir, success_sample_rate 1; tracing sample_ratio 1,"
  say "          no otlp_endpoint (spans and traceparent made, nothing exported)"
  say "all:      same ECDSA P-256 cert, same upstream 127.0.0.1:$UPSTREAM_PORT (keep-alive), GET /bench -> ${#body} byte body"
else
  say "both:     access logs off, same ECDSA P-256 cert, same upstream 127.0.0.1:$UPSTREAM_PORT (keep-alive), GET /bench -> ${#body} byte body"
fi
say "tls:      rampart :$RAMPART_PORT $(tls_of "$RAMPART_PORT")"
if $chain; then say "          chain   :$CHAIN_PORT $(tls_of "$CHAIN_PORT")"; fi
say "          nginx   :$NGINX_PORT $(tls_of "$NGINX_PORT")"
if $haproxy; then say "          haproxy :$HAPROXY_PORT $(tls_of "$HAPROXY_PORT")"; fi
if $h2variant; then say "          rampart-h2 :$H2_PORT $(tls_of "$H2_PORT") (h2_server: rampart; h2 rounds only)"; fi
if [ -n "$BASELINE" ]; then say "          baseline :$BASELINE_PORT $(tls_of "$BASELINE_PORT") (the bare proxy, run from $BASELINE)"; fi
if $has_h3; then
  say "          rampart :$RAMPART_PORT/udp (HTTP/3) $(h3_of "$RAMPART_PORT")"
  if $chain; then say "          chain   :$CHAIN_PORT/udp (HTTP/3) $(h3_of "$CHAIN_PORT")"; fi
  say "h3:       $nginx_h3, so h3 rounds load rampart only and have no ratio to nginx"
fi
say "listener: rampart's protocols [$RAMPART_PROTOCOLS], h2_server $H2_SERVER"
if $rampart_h3; then # show what h1/h2 clients get told (wrk and h2load ignore it)
  altsvc=$(curl -sk -o /dev/null -D - "https://127.0.0.1:$RAMPART_PORT/bench" | tr -d '\r' | grep -i '^alt-svc:' || true)
  say "          h1/h2 responses carry '${altsvc:-no Alt-Svc header}' (wrk and h2load ignore it)"
fi

# CHAIN=1: before any load, show that the chain authenticates: no token, a tampered one and one
# without the scope are refused; the token is let through, and the upstream sees the header
# rule and the identity (echoed back only for requests with X-Perf-Probe).
if $chain; then
  curl_head() { curl -sk -o /dev/null -D - "$@" | tr -d '\r'; }
  field() { awk -v f="$1" 'tolower($0) ~ "^" f ":" {sub(/^[^:]*: */, ""); print; exit}'; }
  code() { awk 'NR==1{print $2}'; }
  url=https://127.0.0.1:$CHAIN_PORT/bench
  settle_log
  : >"$alog" # what the header's probes (TLS, HTTP/3) logged
  sig=${token##*.}
  if [ "${sig:0:1}" = A ]; then tampered=${token%.*}.B${sig:1}; else tampered=${token%.*}.A${sig:1}; fi
  h=$(curl_head "$url")
  c_none=$(code <<<"$h") www=$(field www-authenticate <<<"$h")
  c_bad=$(curl_head -H "Authorization: Bearer $tampered" "$url" | code)
  h=$(curl_head -H "Authorization: Bearer $token_noscope" "$url")
  c_scope=$(code <<<"$h") www_scope=$(field www-authenticate <<<"$h")
  h=$(curl_head -H "Authorization: Bearer $token" -H "X-Perf-Probe: 1" "$url")
  c_ok=$(code <<<"$h") served=$(field x-perf-served-by <<<"$h") echoed=$(field x-perf-echo <<<"$h")
  c_bare=$(curl_head -H "Authorization: Bearer $token" "https://127.0.0.1:$RAMPART_PORT/bench" | code)
  c_nginx=$(curl_head -H "Authorization: Bearer $token" "https://127.0.0.1:$NGINX_PORT/bench" | code)
  say "auth:     chain: no token -> $c_none (WWW-Authenticate: $www); tampered signature -> $c_bad;"
  say "          token without bench:read -> $c_scope ($www_scope);"
  say "          token -> $c_ok, X-Perf-Served-By: ${served:-missing}; the upstream saw: ${echoed:-nothing}"
  say "          the same token to rampart -> $c_bare, to nginx -> $c_nginx"
  want="chain=1 tenant=$jwt_tenant subject=$jwt_sub"
  if [ "$c_none" != 401 ] || [ "$c_bad" != 401 ] || [ "$c_scope" != 403 ] || [ "$c_ok" != 200 ] ||
    [ "$served" != rampart-chain ] || [ "$echoed" != "$want" ] || [ "$c_bare" != 200 ] || [ "$c_nginx" != 200 ]; then
    die "the chain does not behave as expected (want 401, 401, 403, 200 with X-Perf-Served-By and '$want'; 200, 200)"
  fi
  settle_log
  alog_probes=$(cat "$alog")
  [ "$(grep -c . <<<"$alog_probes")" = 4 ] || die "the chain's access log has $(grep -c . <<<"$alog_probes") lines for the 4 probes, want 4"
  : >"$alog"
fi
say ""

# ---- interleaved rounds, protocol by protocol ---------------------------------------------------
say "$(printf '%-5s %-5s %-4s %6s %-10s %10s %10s %7s %5s %5s %11s %8s %7s %6s  %s' \
  round proto mode rate proxy requests req/s cpu_s cpu% load% req/cpu_s us/req p99ms other% errors)"
declare -A eff p99s # eff[proto/mode/rate/proxy] = requests-per-CPU-second per round; p99s: p99 ms
runs_tsv=""
if [ -n "$RUNS_DIR" ]; then
  runs_tsv=$RUNS_DIR/runs.tsv
  printf 'proto\tmode\trate\tround\tproxy\ttool\twall_s\tproxy_ticks\tload_ticks\tupstream_ticks\tother_ticks\thz\tout\n' >"$runs_tsv"
fi
udp_errs() { awk '/^Udp: [0-9]/{print $6, $7}' /proc/net/snmp; } # RcvbufErrors SndbufErrors, whole host
read -r udp_rcv0 udp_snd0 < <(udp_errs)
ck_n=0 ck_ok=0 ck_lines=0 ck_bytes=0 ck_allowed=0 ck_limited=0 ck_authf=0 ck_dropped=0 ck_bad=0
all_proxies=(rampart)
if $chain; then all_proxies+=(chain); fi
if $h2variant; then all_proxies+=(rampart-h2); fi
if [ -n "$BASELINE" ]; then all_proxies+=(baseline); fi
all_proxies+=(nginx)
if $haproxy; then all_proxies+=(haproxy); fi
points=("ka 0") # closed loop: one point per protocol; open loop: every mode x rate
if $open; then
  points=()
  for m in "${modes[@]}"; do
    if [ "$m" = new ]; then for r in "${new_rates[@]}"; do points+=("$m $r"); done; else for r in "${rates[@]}"; do points+=("$m $r"); done; fi
  done
fi
for proto in "${protos[@]}"; do
  proxies=()
  for p in "${all_proxies[@]}"; do # rampart-h2 differs from rampart only in HTTP/2
    if [ "$p" != rampart-h2 ] || [ "$proto" = h2 ]; then proxies+=("$p"); fi
  done
  if [ "$proto" = h3 ]; then # no HTTP/3 in nginx 1.22 nor in Debian's haproxy 2.6
    proxies=(rampart)
    if $chain; then proxies=(rampart chain); fi
    if [ -n "$BASELINE" ]; then proxies+=(baseline); fi
  fi
  for proxy in "${proxies[@]}"; do # warm-up: connections, pools, caches
    load "$proto" "$(proxy_port "$proxy")" "$WARMUP" >"$work/warmup-$proto-$proxy.txt" 2>&1 ||
      { cat "$work/warmup-$proto-$proxy.txt" >&2; die "$proto warm-up against $proxy failed"; }
  done
  if $chain; then settle_log; take_log >/dev/null; fi
  check_alive
  for point in "${points[@]}"; do
    read -r mode rate <<<"$point"
    for round in $(seq "$ROUNDS"); do
      order=() # rotate who goes first: with two proxies they alternate
      for ((i = 0; i < ${#proxies[@]}; i++)); do order+=("${proxies[(i + round - 1) % ${#proxies[@]}]}"); done
      for proxy in "${order[@]}"; do
        out="$work/run-$proto-$mode-$rate-$round-$proxy.txt"
        read -ra ps < <(proxy_pids "$proxy")
        if [ "$proxy" = chain ]; then read -r ca0 cl0 cf0 cd0 < <(chain_counters); fi
        b0=$(bench_ticks); m0=$(busy_ticks); l0=$(load_ticks); u0=$(upstream_ticks); t0=$(cpu_ticks "${ps[@]}"); w0=$(date +%s.%N)
        load "$proto" "$(proxy_port "$proxy")" "$DURATION" "$mode" "$rate" >"$out" 2>&1 ||
          { cat "$out" >&2; die "${tool_of[$proto]} against $proxy failed"; }
        if [ "$proxy" = chain ]; then
          # charge the chain the access-log lines still queued when the load ended: its CPU is
          # read once the log stops growing (the wall time stays that of the load run)
          w1=$(date +%s.%N); settle_log; t1=$(cpu_ticks "${ps[@]}")
        else
          t1=$(cpu_ticks "${ps[@]}"); w1=$(date +%s.%N)
        fi
        u1=$(upstream_ticks); l1=$(load_ticks); m1=$(busy_ticks); b1=$(bench_ticks)
        check_alive
        { echo "===== $proto $mode rate=$rate round $round, $proxy: $(load_desc "$proto")"; cat "$out"; } >>"$raw"
        if [ -n "$runs_tsv" ]; then
          base=$(basename "$out")
          cp "$out" "$RUNS_DIR/$base"
          wall=$(awk -v w0="$w0" -v w1="$w1" 'BEGIN{printf "%.3f", w1-w0}')
          printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n' "$proto" "$mode" "$rate" "$round" "$proxy" \
            "${tool_of[$proto]}" "$wall" $((t1 - t0)) $((l1 - l0)) $((u1 - u0)) $(((m1 - m0) - (b1 - b0))) "$hz" "$base" >>"$runs_tsv"
        fi
        read -r n rps p99 errs < <(parse "$proto" "$out")
        line=$(awk -v r="$round" -v pr="$proto" -v md="$mode" -v rt="$rate" -v p="$proxy" -v n="$n" -v rps="$rps" -v dt=$((t1 - t0)) \
          -v hz="$hz" -v w0="$w0" -v w1="$w1" -v e="$errs" -v l=$((l1 - l0)) -v o=$(((m1 - m0) - (b1 - b0))) -v p99="$p99" \
          'BEGIN{c=dt/hz; wall=w1-w0; eff=(c>0? n/c : 0); us=(n>0? c*1e6/n : 0)
                 o=(o>0 ? 100*o/hz/wall : 0)
                 printf "%-5s %-5s %-4s %6s %-10s %10d %10.0f %7.2f %4.0f%% %4.0f%% %11.0f %8.1f %7s %5.0f%%  %s\n",
                   r, pr, md, (rt>0 ? rt : "-"), p, n, rps, c, 100*c/wall, 100*l/hz/wall, eff, us, p99, o, e}')
        say "$line"
        eff[$proto/$mode/$rate/$proxy]+="$(awk '{print $11}' <<<"$line") "
        p99s[$proto/$mode/$rate/$proxy]+="$p99 "
        [ "$errs" = - ] || say "      !! $proxy returned errors over $proto ($mode, rate $rate) in round $round: $errs"
        if [ "$proxy" = chain ]; then # every response was authenticated, admitted and logged?
          read -r ca1 cl1 cf1 cd1 < <(chain_counters)
          [ -n "${alog_sample:-}" ] || alog_sample=$(head -n 1 "$alog")
          read -r ln lok lb < <(take_log)
          ok=ok
          if ((lok < n || cl1 > cl0 || cf1 > cf0 || cd1 > cd0 || ca1 - ca0 < n)); then ok='!! MISMATCH' ck_bad=$((ck_bad + 1)); fi
          say "      chain: $ok: $n responses; quota allowed +$((ca1 - ca0)), limited +$((cl1 - cl0)); auth failures +$((cf1 - cf0)); access log +$ln lines, $lok route=bench tenant=$jwt_tenant status=200, dropped +$((cd1 - cd0))"
          ck_n=$((ck_n + n)) ck_ok=$((ck_ok + lok)) ck_lines=$((ck_lines + ln)) ck_bytes=$((ck_bytes + lb))
          ck_allowed=$((ck_allowed + ca1 - ca0)) ck_limited=$((ck_limited + cl1 - cl0))
          ck_authf=$((ck_authf + cf1 - cf0)) ck_dropped=$((ck_dropped + cd1 - cd0))
        fi
      done
    done
  done
done

# ---- summary ----------------------------------------------------------------------------------------
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR]=$1} END{print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
say ""
say "load%  = the load tool's CPU / wall time; other% = CPU used outside this benchmark (200% = both"
say "cores); if other% is more than a few %, other work competed for the CPUs: repeat on a quiet machine."
say ""
# every proxy at every point: median req/CPU-s and p99 (open loop) over the rounds; any proxy name
say "per proxy (median of $ROUNDS rounds; req/cpu_s = requests per proxy CPU-second; p99 in ms, open loop only):"
say "$(printf '  %-5s %-4s %6s %-10s %11s %8s %8s' proto mode rate proxy req/cpu_s us/req p99ms)"
for proto in "${protos[@]}"; do
  for point in "${points[@]}"; do
    read -r mode rate <<<"$point"
    for proxy in "${all_proxies[@]}"; do
      k=$proto/$mode/$rate/$proxy
      [ -n "${eff[$k]:-}" ] || continue
      me=$(median <<<"${eff[$k]}") mp=-
      if $open; then mp=$(tr ' ' '\n' <<<"${p99s[$k]}" | { grep -v '^-$' || true; } | median); fi
      say "$(awk -v pr="$proto" -v md="$mode" -v rt="$rate" -v p="$proxy" -v e="$me" -v q="$mp" 'BEGIN{
        printf "  %-5s %-4s %6s %-10s %11.0f %8.1f %8s", pr, md, (rt>0 ? rt : "-"), p, e, (e>0 ? 1e6/e : 0), q}')"
    done
  done
done
if [ -n "$BASELINE" ] && ! $open; then
  say "A/B (median of $ROUNDS rounds, req/cpu_s): rampart ($(cd "$root" && git describe --always --dirty 2>/dev/null || echo this tree)) / baseline ($BASELINE):"
  for proto in "${protos[@]}"; do
    ma=$(median <<<"${eff[$proto/ka/0/rampart]}") mb=$(median <<<"${eff[$proto/ka/0/baseline]}")
    say "$(awk -v pr="$proto" -v a="$ma" -v b="$mb" -v ra="${eff[$proto/ka/0/rampart]}" -v rb="${eff[$proto/ka/0/baseline]}" 'BEGIN{
      printf "  %-5s %9.0f / %9.0f = %5.2f   (rounds: %s/ %s)", pr, a, b, (b>0 ? a/b : 0), ra, rb}')"
  done
fi
if [ -n "$runs_tsv" ]; then say "runs file: $runs_tsv ($(($(wc -l <"$runs_tsv") - 1)) timed runs; perf/report reads it)"; fi
say ""
if $open; then
  : # open loop: the per-proxy table above is the summary (the ratio tables below are closed-loop)
elif ! $chain; then
  say "summary (PROTO=$PROTO, median of $ROUNDS rounds; requests per proxy CPU-second, us = proxy CPU per request):"
  say "$(printf '  %-5s %-44s %9s %7s %9s %7s %6s' proto load rampart us nginx us ratio)"
  for proto in "${protos[@]}"; do
    mr=$(median <<<"${eff[$proto/ka/0/rampart]}")
    mn=""
    if [ -n "${eff[$proto/ka/0/nginx]:-}" ]; then mn=$(median <<<"${eff[$proto/ka/0/nginx]}"); fi # none for h3
    # (awk: parenthesise ternaries after print, or 'print x>0?...' redirects into a file named 0)
    say "$(awk -v pr="$proto" -v ld="$(load_desc "$proto")" -v a="$mr" -v b="$mn" -v why="$nginx_h3_short" 'BEGIN{
      printf "  %-5s %-44s %9.0f %7.1f ", pr, ld, a, (a>0 ? 1e6/a : 0)
      if (b == "") printf "%9s %7s %6s  (%s)", "-", "-", "-", why
      else printf "%9.0f %7.1f %6.2f", b, (b>0 ? 1e6/b : 0), (b>0 ? a/b : 0)}')"
  done
  say "  ratio = rampart/nginx (> 1: rampart is cheaper per request); differences under ~20% are noise here."
else
  say "summary (PROTO=$PROTO CHAIN=1, median of $ROUNDS rounds; requests per proxy CPU-second, us = proxy CPU per request):"
  say "$(printf '  %-5s %-40s %8s %6s %8s %6s %8s %6s %7s %11s %11s %11s' \
    proto load nginx us bare us chain us +us chain/bare chain/nginx bare/nginx)"
  for proto in "${protos[@]}"; do
    mb=$(median <<<"${eff[$proto/ka/0/rampart]}") mc=$(median <<<"${eff[$proto/ka/0/chain]}") mn=""
    if [ -n "${eff[$proto/ka/0/nginx]:-}" ]; then mn=$(median <<<"${eff[$proto/ka/0/nginx]}"); fi # none for h3
    say "$(awk -v pr="$proto" -v ld="$(load_desc "$proto")" -v b="$mb" -v c="$mc" -v n="$mn" 'BEGIN{
      printf "  %-5s %-40s ", pr, ld
      if (n == "") printf "%8s %6s ", "-", "-"; else printf "%8.0f %6.1f ", n, (n>0 ? 1e6/n : 0)
      printf "%8.0f %6.1f %8.0f %6.1f %+7.1f %11.2f ", b, (b>0 ? 1e6/b : 0), c, (c>0 ? 1e6/c : 0),
        (b>0 && c>0 ? 1e6/c - 1e6/b : 0), (b>0 ? c/b : 0)
      if (n == "") printf "%11s %11s", "-", "-"; else printf "%11.2f %11.2f", (n>0 ? c/n : 0), (n>0 ? b/n : 0)}')"
  done
  say "  bare = rampart without policies or access log; chain = rampart with TLS + JWT + scopes + quota + header"
  say "  rules + access log + tracing; +us = the chain's extra proxy CPU per request. The chain figure is the"
  say "  \"Q per instance\" of the capacity plan. Ratios > 1: the first is cheaper per request; under ~20% is noise."
  if $has_h3; then say "  h3: $nginx_h3_short, so no ratio to nginx"; fi
  say ""
  say "chain checks: $ck_n timed responses; quota allowed $ck_allowed, limited $ck_limited; auth failures $ck_authf;"
  say "  access log $ck_lines lines ($ck_ok route=bench tenant=$jwt_tenant status=200), dropped $ck_dropped,"
  say "  $((ck_lines > 0 ? ck_bytes / ck_lines : 0)) bytes a line on average; $ck_bad of the timed chain runs failed a check"
  mfile=$work/chain-metrics.txt
  curl -s "http://127.0.0.1:$CHAIN_ADMIN_PORT/metrics" >"$mfile" || true
  say "chain /metrics after the run (all traffic: probes, warm-ups, timed runs):"
  say "$(grep -E '^rampart_(access_log_(dropped|suppressed)_total|auth_failures_total|quota_decisions_total|requests_total|request_errors_total|shed_total|trace_spans_recorded_total|upstream_errors_total)' "$mfile" | sed 's/^/  /')"
  say "access log lines: the 4 probes, then the first line of the timed runs:"
  say "$(printf '%s\n%s\n' "$alog_probes" "${alog_sample:-}" | cut -c1-700 | sed 's/^/  /')"
fi

if $has_h3; then # QUIC over loopback loses datagrams only when a socket buffer overflows
  read -r udp_rcv1 udp_snd1 < <(udp_errs)
  say "  UDP datagrams dropped during the rounds (host-wide): receive-buffer $((udp_rcv1 - udp_rcv0)), send-buffer $((udp_snd1 - udp_snd0))"
fi

# rampart's own logs (stderr; access lines go elsewhere or nowhere), so anything at WARN/ERROR is
# worth a look (e.g. the UDP buffer warning for HTTP/3).
for name in bare chain h2 baseline; do
  [ -f "$work/$name.log" ] || continue
  warns=$(grep -E '"level":"(WARN|ERROR)"|level=(WARN|ERROR)' "$work/$name.log" || true)
  if [ -n "$warns" ]; then
    say ""
    say "rampart log ($name): $(grep -c . <<<"$warns") WARN/ERROR lines (first 10):"
    say "$(head -n 10 <<<"$warns" | cut -c1-300 | sed 's/^/  /')"
  fi
done
{
  for name in bare chain h2 baseline; do
    [ -f "$work/$name.log" ] || continue
    echo; echo "---- rampart log ($name)"; cat "$work/$name.log"
  done
  echo; echo "---- raw load-tool output"; cat "$raw"
} >>"$report"
say "report: $report"
