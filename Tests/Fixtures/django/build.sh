#!/usr/bin/env bash
# Builds the Django fixture app on a fresh database: `migrate` (Django's, allauth's and the
# blog's migrations, for real) and then `seed_accounts`, with the venv `make deps` fills.
#
#   Tests/Fixtures/django/build.sh DB MEDIA
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
root="$(cd "$here/../../.." && pwd)"
python="$root/.build-tools/venv/bin/python"
if [ ! -x "$python" ]; then
    echo "$python is missing: run 'make deps' first" >&2
    exit 1
fi

export LIFECYCLE_DJANGO_DB="$1"
export LIFECYCLE_DJANGO_MEDIA="$2"
export DJANGO_SETTINGS_MODULE=fixture_site.settings
# No __pycache__ folders inside the repository.
export PYTHONDONTWRITEBYTECODE=1
mkdir -p "$LIFECYCLE_DJANGO_MEDIA"

"$python" "$here/manage.py" migrate --noinput >&2
"$python" "$here/manage.py" seed_accounts
