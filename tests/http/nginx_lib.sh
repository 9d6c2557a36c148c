# nginx_lib.sh - start and stop unprivileged nginx instances for dcr's HTTP tests.
# shellcheck shell=bash
# Sourced; needs bash and python3.  Every instance lives in its own directory
# (config, pid file, logs, temp and cache paths), listens on 127.0.0.1 only, and
# is started with "nginx -p DIR -c DIR/nginx.conf -e DIR/error.log" (nginx
# daemonizes once its socket is bound: a port clash is an error at start).
#
#   ngx_find                       sets NGINX (empty when nginx is not installed;
#                                  an NGINX already set is kept if executable)
#   ngx_require                    ngx_find, and without nginx prints a test
#                                  script's skip lines and exits 0
#   ngx_need NAME                  ngx_find, and without nginx says so as NAME
#                                  (a benchmark) and exits 1
#   ngx_config DIR KIND PORT ARG   writes DIR/nginx.conf and DIR/server.conf:
#                                  KIND origin (ARG: the directory served),
#                                  origin-tls (the same over https, with a
#                                  self-signed DIR/cert.pem made by openssl) or
#                                  relay (ARG: the upstream's port); an origin
#                                  sends each response at NGX_LIMIT_RATE bytes
#                                  a second when that is set (nginx's
#                                  limit_rate, per request; unset or 0: no
#                                  limit), a relay fetches NGX_SLICE slices
#                                  (default 1m; 0: whole objects)
#   ngx_up DIR KIND ARG            picks a free port, writes the config, checks it
#                                  with nginx -t and starts nginx; sets NGX_PORT
#                                  (tries a few ports when one is taken meanwhile;
#                                  call it in the main shell, not in $(...), so
#                                  that ngx_stop_all knows the instance)
#   ngx_stop DIR                   stops the instance by its pid file and waits
#   ngx_stop_all                   stops every instance ngx_up started
NGX_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NGX_STARTED=()

# (NGINX set to a path that is not a program, e.g. NGINX=none, means "no nginx")
ngx_find() {
  if [ -n "${NGINX:-}" ]; then
    [ -x "$NGINX" ] || NGINX=
    return 0
  fi
  NGINX=$(command -v nginx 2>/dev/null || true)
  [ -n "$NGINX" ] || { [ -x /usr/sbin/nginx ] && NGINX=/usr/sbin/nginx; }
  return 0
}

ngx_require() {
  ngx_find
  if [ -z "$NGINX" ]; then
    echo "ok - skip: nginx is not installed, no HTTP tests run"
    echo "0 passed, 0 failed (skipped)"
    exit 0
  fi
}

ngx_need() {
  ngx_find
  [ -n "$NGINX" ] || { echo "$1: nginx is not installed (sh tools/deps.sh)" >&2; exit 1; }
}

# free_port: a port nothing listens on now (the kernel's pick for port 0)
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

ngx_config() {
  local dir=$1 kind=$2 port=$3 arg=$4 user=
  mkdir -p "$dir/tmp" "$dir/cache" || return 1
  dir=$(cd "$dir" && pwd)
  # as root, nginx's workers would run as nobody and could not read a 0700 temp
  # dir; as anyone else the directive is ignored (with a warning), so leave it out
  [ "$(id -u)" = 0 ] && user="user root;"
  sed -e "s|@DIR@|$dir|g" -e "s|@USER@|$user|g" "$NGX_LIB_DIR/nginx.conf.in" >"$dir/nginx.conf" || return 1
  case $kind in
    origin) sed -e "s|@DIR@|$dir|g" -e "s|@PORT@|$port|g" -e "s|@ROOT@|$(cd "$arg" && pwd)|g" \
              -e "s|@LIMIT_RATE@|${NGX_LIMIT_RATE:-0}|g" "$NGX_LIB_DIR/origin.conf.in" >"$dir/server.conf" ;;
    origin-tls)
      [ -s "$dir/cert.pem" ] ||
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
          -subj /CN=127.0.0.1 -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
          -keyout "$dir/key.pem" -out "$dir/cert.pem" >"$dir/openssl.log" 2>&1 ||
        { cat "$dir/openssl.log" >&2; return 1; }
      sed -e "s|@DIR@|$dir|g" -e "s|@PORT@|$port|g" -e "s|@ROOT@|$(cd "$arg" && pwd)|g" \
        "$NGX_LIB_DIR/origin-tls.conf.in" >"$dir/server.conf" ;;
    relay) sed -e "s|@DIR@|$dir|g" -e "s|@PORT@|$port|g" -e "s|@UPSTREAM@|$arg|g" \
             -e "s|@SLICE@|${NGX_SLICE:-1m}|g" "$NGX_LIB_DIR/relay.conf.in" >"$dir/server.conf" ;;
    *) echo "ngx_config: unknown kind $kind" >&2; return 1 ;;
  esac
}

ngx_up() {
  local dir=$1 kind=$2 arg=$3 port
  NGX_PORT=
  for _ in 1 2 3 4 5; do
    port=$(free_port) || return 1
    ngx_config "$dir" "$kind" "$port" "$arg" || return 1
    dir=$(cd "$dir" && pwd)
    "$NGINX" -t -q -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" >"$dir/start.log" 2>&1 ||
      { cat "$dir/start.log" >&2; return 1; }
    if "$NGINX" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" >>"$dir/start.log" 2>&1; then
      NGX_STARTED+=("$dir")
      # the master writes its pid file after binding; wait for it briefly
      for _ in $(seq 50); do [ -s "$dir/nginx.pid" ] && break; sleep 0.05; done
      # shellcheck disable=SC2034  # read by the caller
      NGX_PORT=$port
      return 0
    fi
    grep -q 'Address already in use' "$dir/start.log" "$dir/error.log" 2>/dev/null || break
  done
  cat "$dir/start.log" >&2
  return 1
}

ngx_stop() {
  local dir=$1 pid
  [ -s "$dir/nginx.pid" ] || return 0
  pid=$(cat "$dir/nginx.pid")
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.05; done
  kill -KILL "$pid" 2>/dev/null
  return 0
}

ngx_stop_all() {
  local d
  for d in "${NGX_STARTED[@]}"; do ngx_stop "$d"; done
  NGX_STARTED=()
}
