"""Django itself as the oracle of what deleting a user means, for the tests of the maps
`lifecycle map init --django` writes:

  oracle.py --project DIR --settings MODULE delete USERNAME [--first APP.MODEL.FIELD …]
      Django's own user.delete() (after her rows of each --first model, a PROTECT the map
      chose to delete), then File.delete() for every file field of every row it deleted
      (Django keeps files).
  oracle.py --project DIR --settings MODULE render [--page URL …]   the admin (index, every
      changelist, the change page of every row left, up to 20 a model) and the given pages,
      through Django's test client, as a superuser made for it and rolled back; one line of
      JSON per page with its status.
  oracle.py compare DB_A MEDIA_A DB_B MEDIA_B [--skip-prefix lifecycle_]   every table of
      two databases (SQLite files or postgres:// URLs), row for row, and the media folders,
      file for file: JSON with the tables compared and every difference.
"""
import argparse
import collections
import hashlib
import json
import os
import sys


def setup(project, settings):
    sys.path.insert(0, os.path.abspath(project))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", settings)
    import django

    django.setup()


def delete(username, first):
    from django.apps import apps
    from django.contrib.auth import get_user_model
    from django.db import models, router, transaction
    from django.db.models.deletion import Collector

    User = get_user_model()
    user = User._default_manager.get(**{User.USERNAME_FIELD: username})
    files = []

    def note(model, rows):
        fields = [field for field in model._meta.concrete_fields if isinstance(field, models.FileField)]
        for row in rows if fields else []:
            for field in fields:
                name = getattr(row, field.attname)
                if name:
                    files.append((field.storage, str(name)))

    def collect(rows):
        collector = Collector(using=router.db_for_write(User))
        collector.collect(rows)
        for model, found in collector.data.items():
            note(model, found)
        for queryset in collector.fast_deletes:
            note(queryset.model, queryset)

    with transaction.atomic():
        # The choices a map makes where Django refuses (PROTECT): her rows deleted first.
        for label in first:
            model_label, field = label.rsplit(".", 1)
            rows = list(apps.get_model(model_label)._default_manager.filter(**{field: user}))
            collect(rows)
            for row in rows:
                row.delete()
        collect([user])
        user.delete()
    for storage, name in files:
        storage.delete(name)
    print(json.dumps({"files_deleted": len(files)}))


def render(pages):
    from django.contrib import admin
    from django.contrib.auth import get_user_model
    from django.contrib.auth.signals import user_logged_in
    from django.db import transaction
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.urls import NoReverseMatch, reverse

    setup_test_environment()
    results = []
    with transaction.atomic():
        User = get_user_model()
        fields = {User.USERNAME_FIELD: "oracle-admin"}
        if User.get_email_field_name() != User.USERNAME_FIELD:
            fields[User.get_email_field_name()] = "oracle-admin@example.invalid"
        for name in User.REQUIRED_FIELDS:
            fields.setdefault(name, "oracle-admin")
        staff = User._default_manager.create_superuser(password=None, **fields)
        client = Client()
        # The page checks are about rendering, not signing in: a site's sign-in receivers
        # (lifecycle's restore among them) are not asked for the made-up superuser.
        receivers, user_logged_in.receivers = user_logged_in.receivers, []
        try:
            client.force_login(staff)
        finally:
            user_logged_in.receivers = receivers
        urls = [reverse("admin:index")]
        for model in admin.site._registry:
            meta = model._meta
            try:
                urls.append(reverse("admin:%s_%s_changelist" % (meta.app_label, meta.model_name)))
            except NoReverseMatch:
                continue
            for row in model._default_manager.exclude(pk=staff.pk if model is User else None)[:20]:
                urls.append(reverse("admin:%s_%s_change" % (meta.app_label, meta.model_name), args=[row.pk]))
        for url in urls + list(pages):
            response = client.get(url)
            results.append({"page": url, "status": response.status_code})
        transaction.set_rollback(True)
    print(json.dumps(results))


def connect(database):
    if database.startswith("postgres"):
        import psycopg
        from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

        url = urlsplit(database)
        query = urlencode([(key, value) for key, value in parse_qsl(url.query) if key != "pool"])
        connection = psycopg.connect(urlunsplit(url._replace(query=query)))
        tables = ['public."%s"' % row[0] for row in connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'")]
        return connection, tables
    import sqlite3

    connection = sqlite3.connect("file:%s?mode=ro" % database, uri=True)
    tables = ['"%s"' % row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'")]
    return connection, tables


def every_row(database, skip):
    connection, tables = connect(database)
    rows = {}
    for quoted in tables:
        table = quoted.split(".")[-1].strip('"')
        if any(table.startswith(prefix) for prefix in skip):
            continue
        cursor = connection.execute("SELECT * FROM %s" % quoted)
        columns = [column[0] for column in cursor.description]
        rows[table] = collections.Counter(json.dumps(dict(zip(columns, row)), default=str, sort_keys=True) for row in cursor)
    return rows


def every_file(media):
    files = {}
    for folder, _, names in os.walk(media):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as handle:
                files[os.path.relpath(path, media)] = hashlib.sha256(handle.read()).hexdigest()
    return files


def compare(django_db, django_media, lifecycle_db, lifecycle_media, skip):
    left, right = every_row(django_db, skip), every_row(lifecycle_db, skip)
    differences = {}
    for table in sorted(set(left) | set(right)):
        only_django = left.get(table, collections.Counter()) - right.get(table, collections.Counter())
        only_lifecycle = right.get(table, collections.Counter()) - left.get(table, collections.Counter())
        if only_django or only_lifecycle:
            differences[table] = {
                "only_in_django": sorted(only_django.elements()),
                "only_in_lifecycle": sorted(only_lifecycle.elements()),
            }
    files_django, files_lifecycle = every_file(django_media), every_file(lifecycle_media)
    print(json.dumps({
        "tables": len(set(left) | set(right)),
        "rows": sum(sum(counter.values()) for counter in left.values()),
        "tables_equal": len(set(left) | set(right)) - len(differences),
        "differences": differences,
        "files": len(files_django),
        "files_only_in_django": sorted(set(files_django.items()) - set(files_lifecycle.items())),
        "files_only_in_lifecycle": sorted(set(files_lifecycle.items()) - set(files_django.items())),
    }, default=list))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--project")
    parser.add_argument("--settings")
    commands = parser.add_subparsers(dest="command", required=True)
    deletion = commands.add_parser("delete")
    deletion.add_argument("username")
    deletion.add_argument("--first", action="append", default=[], help="APP.MODEL.FIELD: her rows of a PROTECT relation, deleted first")
    commands.add_parser("render").add_argument("--page", action="append", default=[])
    comparison = commands.add_parser("compare")
    for name in ("django_db", "django_media", "lifecycle_db", "lifecycle_media"):
        comparison.add_argument(name)
    comparison.add_argument("--skip-prefix", action="append", default=["lifecycle_"])
    arguments = parser.parse_args()
    if arguments.command == "compare":
        compare(arguments.django_db, arguments.django_media, arguments.lifecycle_db, arguments.lifecycle_media, arguments.skip_prefix)
        return
    setup(arguments.project, arguments.settings)
    if arguments.command == "delete":
        delete(arguments.username, arguments.first)
    else:
        render(arguments.page)


if __name__ == "__main__":
    main()
