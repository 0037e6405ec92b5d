# Sourced by .ci/run: installs Debian's PostgreSQL if needed, starts a throwaway cluster on 127.0.0.1
# and exports GEP_TEST_POSTGRES_URL. Returns non-zero (without exiting the caller) when it cannot.
_pg_start() {
  if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || return 1
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) || return 1
  fi
  local bin; bin=$(dirname "$(ls -d /usr/lib/postgresql/*/bin/pg_ctl | sort -V | tail -n1)")
  PG_DIR=$(mktemp -d /tmp/gep-pg.XXXXXX)
  chown postgres "$PG_DIR" 2>/dev/null || true
  local port=${GEP_PG_PORT:-55432}
  local as=(); [ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
  "${as[@]}" "$bin/initdb" -D "$PG_DIR/data" -U gep --auth=trust >/dev/null || return 1
  "${as[@]}" "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w \
    -o "-h 127.0.0.1 -p $port -k $PG_DIR" start >/dev/null || return 1
  PG_CTL_CMD=("${as[@]}" "$bin/pg_ctl" -D "$PG_DIR/data" -m fast stop)
  "${as[@]}" "$bin/createdb" -h 127.0.0.1 -p "$port" -U gep gep_test || return 1
  export GEP_TEST_POSTGRES_URL="postgresql+psycopg2://gep@127.0.0.1:$port/gep_test"
}
stop_postgres() { [ -n "${PG_CTL_CMD:-}" ] && "${PG_CTL_CMD[@]}" >/dev/null 2>&1; rm -rf "${PG_DIR:-/nonexistent}"; }
_pg_start
