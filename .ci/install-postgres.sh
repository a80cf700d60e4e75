#!/bin/sh
# Install the PostgreSQL server binaries (initdb, pg_ctl) that the tests marked
# `postgres` need (tests/conftest.py starts a throwaway server from them).
# Idempotent; never fails the CI: without apt or root it says why and exits 0,
# and the postgres tests then skip with a message.
set -u
PG_LIB_DIR="${PG_LIB_DIR:-/usr/lib/postgresql}"  # override only to test this script

if ls "$PG_LIB_DIR"/*/bin/initdb >/dev/null 2>&1; then
  echo "install-postgres: server binaries already present: $(ls -d "$PG_LIB_DIR"/*/bin | tr '\n' ' ')"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-postgres: apt-get not found (not Debian/Ubuntu); postgres tests will skip"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
  else
    echo "install-postgres: not root and no passwordless sudo; postgres tests will skip"
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
if $SUDO apt-get update -q && \
   $SUDO apt-get install -y -q --no-install-recommends postgresql; then
  echo "install-postgres: installed: $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tr '\n' ' ')"
else
  echo "install-postgres: apt-get failed (offline mirror?); postgres tests will skip"
fi
exit 0
