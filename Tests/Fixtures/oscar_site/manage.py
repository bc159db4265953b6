#!/usr/bin/env python3
"""A django-oscar shop for the tests of `lifecycle map init --django`: oscar's own apps
as PyPI ships them, migrated for real. LIFECYCLE_DJANGO_DB (a SQLite file or a
postgres:// URL) and LIFECYCLE_DJANGO_MEDIA pick the database and the media folder."""
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oscar_site.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
