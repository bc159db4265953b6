#!/usr/bin/env bash
# Runs one of the example project's management commands on a database build.sh made:
#
#   Jobs/examples/django/manage.sh DB MEDIA COMMAND [ARGUMENT…]
#
# e.g. `whoami SESSION_KEY` (whom a session authenticates), `signin USERNAME PASSWORD` (a
# sign-in as a browser's would make it, signals and all), `makemigrations --check`. A sign-in
# needs LIFECYCLE_API_URL and LIFECYCLE_API_TOKEN (`lifecycle serve`'s address and API
# token): it restores an account whose deletion is pending (blog/lifecycle_restore.py), and
# without them it fails.
set -euo pipefail

if [ $# -lt 3 ]; then
    echo "usage: $0 DB MEDIA COMMAND [ARGUMENT…]" >&2
    exit 2
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
python="$root/.build-tools/venv/bin/python"
if [ ! -x "$python" ]; then
    echo "$python is missing: run 'make example-deps' first" >&2
    exit 1
fi
export LIFECYCLE_DJANGO_DB="$1"
export LIFECYCLE_DJANGO_MEDIA="$2"
export DJANGO_SETTINGS_MODULE=example_site.settings
# No __pycache__ folders inside the repository.
export PYTHONDONTWRITEBYTECODE=1
shift 2
exec "$python" "$here/manage.py" "$@"
