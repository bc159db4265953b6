#!/usr/bin/env bash
# Builds the example Django project on a fresh database: `migrate` (Django's, allauth's and the
# blog's migrations, for real) and then `seed_accounts`, with the venv `make example-deps` fills.
#
#   Jobs/examples/django/build.sh DB MEDIA
#
# DB is a SQLite file's path or a postgres://user:pass@host:port/db?... URL; MEDIA the media
# folder (made if missing). stdout is seed_accounts' JSON alone (migrate's progress goes to
# stderr); any failure exits non-zero.
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 DB MEDIA" >&2
    exit 2
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$2"
"$here/manage.sh" "$1" "$2" migrate --noinput >&2
"$here/manage.sh" "$1" "$2" seed_accounts
