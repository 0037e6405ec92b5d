# Sourced by .ci/run: installs Debian's PostgreSQL if needed, starts a throwaway cluster on 127.0.0.1
# and exports GEP_TEST_POSTGRES_URL. Returns non-zero (without exiting the caller) when it cannot.
# Call stop_postgres when done (safe to call twice, and after a failed start): it stops the server it
# started and removes the cluster's folder.

_pg_free_port() {
  python3 - <<'EOF' 2>/dev/null || echo 55432
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
EOF
}

_pg_install() {
  command -v apt-get >/dev/null 2>&1 || return 1
  # The package's post-install starts a system cluster where a service manager allows it; forbid that
  # for the duration of the install so no server outlives the tests.
  local policy=/usr/sbin/policy-rc.d added=0
  if [ "$(id -u)" = 0 ] && [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && added=1
  fi
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null)
  local rc=$?
  [ "$added" = 1 ] && rm -f "$policy"
  return $rc
}

_pg_start() {
  unset GEP_TEST_POSTGRES_URL
  if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
    _pg_install || return 1
  fi
  local bin; bin=$(dirname "$(ls -d /usr/lib/postgresql/*/bin/pg_ctl | sort -V | tail -n1)")
  PG_DIR=$(mktemp -d /tmp/gep-pg.XXXXXX) || return 1
  local as=()
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || return 1  # initdb refuses to run as root
    chown postgres "$PG_DIR" || return 1
    # from / : the postgres user may not be able to enter the caller's directory
    as=(env -C / runuser -u postgres --)
  fi
  local port=${GEP_PG_PORT:-$(_pg_free_port)}
  "${as[@]}" "$bin/initdb" -D "$PG_DIR/data" -U gep --auth=trust -E UTF8 --no-sync >/dev/null 2>&1 || return 1
  # set before starting: a start that times out may still leave a server to stop
  PG_CTL_CMD=("${as[@]}" "$bin/pg_ctl" -D "$PG_DIR/data" -m fast -w stop)
  "${as[@]}" "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w -t 60 \
    -o "-h 127.0.0.1 -p $port -k $PG_DIR -F" start >/dev/null || return 1
  "${as[@]}" "$bin/createdb" -h 127.0.0.1 -p "$port" -U gep gep_test || return 1
  export GEP_TEST_POSTGRES_URL="postgresql+psycopg2://gep@127.0.0.1:$port/gep_test"
}

stop_postgres() {
  if [ -n "${PG_CTL_CMD:-}" ]; then
    "${PG_CTL_CMD[@]}" >/dev/null 2>&1
    unset PG_CTL_CMD
  fi
  if [ -n "${PG_DIR:-}" ]; then
    rm -rf "$PG_DIR"
    unset PG_DIR
  fi
  unset GEP_TEST_POSTGRES_URL
}

_pg_start
