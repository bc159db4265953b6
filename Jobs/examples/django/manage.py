#!/usr/bin/env python3
"""The example project's manage.py: LIFECYCLE_DJANGO_DB and LIFECYCLE_DJANGO_MEDIA pick the
database and the media folder (see example_site/settings.py)."""
import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_site.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
