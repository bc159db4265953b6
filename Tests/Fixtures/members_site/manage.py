#!/usr/bin/env python3
"""A Django project with its own user model (members.Member, signing in by email) for the
tests of `lifecycle map init --django`: a GenericRelation on the user, a PROTECT, a
SET_DEFAULT, a SET_NULL from a row she owns, many-to-many tables and file fields.
LIFECYCLE_DJANGO_DB and LIFECYCLE_DJANGO_MEDIA pick the database and the media folder."""
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "members_site.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
