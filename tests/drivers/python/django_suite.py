#!/usr/bin/env python3
"""What applications do with Django 5 (the postgresql backend on psycopg 3), case by case (see
tests/drivers/run.py for the output protocol). Django is configured in-process with the libpq
environment variables. django_app/ holds the models: django_app.shop has migrations, which the
migrate cases apply, revert and re-apply (with Django's own contenttypes and auth apps); the ORM
cases create the tables of the django_app models they use with the schema editor (the DDL
migrate runs) and drop them afterwards, so they do not depend on the migrate cases or on each
other. With -v, every SQL statement Django runs is logged to stderr."""

import contextlib
import datetime
import decimal
import io
import json
import os
import shutil
import sys
import tempfile
import threading
import uuid

import django
from django.conf import settings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

DATABASE = {
    "ENGINE": "django.db.backends.postgresql",
    "NAME": os.environ.get("PGDATABASE", "postgres"),
    "USER": os.environ.get("PGUSER", "postgres"),
    "PASSWORD": os.environ.get("PGPASSWORD", ""),
    "HOST": os.environ.get("PGHOST", "127.0.0.1"),
    "PORT": os.environ.get("PGPORT", "5432"),
}
VERBOSE = "-v" in sys.argv

settings.configure(
    DEBUG=False,
    USE_TZ=True,
    # The current time zone of the ORM: Trunc/Extract and __date lookups convert to it with
    # AT TIME ZONE; the connection itself runs in UTC (Django sets TimeZone when it differs).
    TIME_ZONE="America/Chicago",
    DATABASES={
        "default": DATABASE,
        # Server-side parameter binding (psycopg's plain cursors, $n parameters) instead of
        # Django's default client-side binding (psycopg's ClientCursor).
        "ssb": dict(DATABASE, OPTIONS={"server_side_binding": True}),
    },
    INSTALLED_APPS=[
        "django.contrib.contenttypes",
        "django.contrib.auth",
        "django.contrib.postgres",
        "django_app",
        "django_app.shop",
    ],
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
    LOGGING={
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"}},
        "loggers": {"django.db.backends": {"handlers": ["stderr"], "level": "DEBUG",
                                           "propagate": False}} if VERBOSE else {},
    },
)
django.setup()

from django.contrib.auth import authenticate  # noqa: E402
from django.contrib.auth.models import Group, Permission, User  # noqa: E402
from django.contrib.contenttypes.models import ContentType  # noqa: E402
from django.contrib.postgres.aggregates import ArrayAgg, StringAgg  # noqa: E402
from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVector  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.core.paginator import Paginator  # noqa: E402
from django.db import (DatabaseError, IntegrityError, OperationalError, connection,  # noqa: E402
                       connections, transaction)
from django.db.backends.signals import connection_created  # noqa: E402
from django.db.migrations.recorder import MigrationRecorder  # noqa: E402
from django.db.models import (Avg, Case, Count, Exists, ExpressionWrapper, F, FloatField,  # noqa: E402
                              IntegerField, Max, Min, OuterRef, Prefetch, Q, RowRange,
                              Subquery, Sum, Value, When, Window)
from django.db.models import DurationField as DurationF  # noqa: E402
from django.db.models.deletion import ProtectedError  # noqa: E402
from django.db.models.fields.json import KT  # noqa: E402
from django.db.models.functions import (Cast, Coalesce, Concat, ExtractHour,  # noqa: E402
                                        ExtractIsoWeekDay, ExtractWeek, ExtractYear, Greatest,
                                        Lag, Least, Left, Length, Lower, LPad, Mod, Now, NullIf,
                                        Rank, Replace, Round, RowNumber, StrIndex, Substr,
                                        TruncDate, TruncMonth, Upper)
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from django_app.models import (Article, Author, Award, Book, Club, Counter, Doc,  # noqa: E402
                               Event, Everything, Host, Item, Membership, Pair, Place,
                               Publisher, Restaurant, Review, Tag, Tagged, Token)
from django_app.shop.models import Category, Order, Product  # noqa: E402
from suite import run_cases  # noqa: E402

if VERBOSE:
    # Django logs each statement (failed ones too) when the cursor is a debug cursor.
    connection_created.connect(lambda sender, connection, **kw:
                               setattr(connection, "force_debug_cursor", True), weak=False)

UTC = datetime.timezone.utc
CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def check(got, want, what=""):
    if got != want:
        raise AssertionError(f"{what} got {got!r}, want {want!r}")


def raises(exc_type, fn, what=""):
    try:
        fn()
    except exc_type as e:
        return e
    raise AssertionError(f"{what}: no {exc_type.__name__}")


def sqlstate(e):
    """The SQLSTATE of the psycopg error under a Django DatabaseError."""
    return getattr(e.__cause__, "sqlstate", None)


def table_names(models):
    names = []
    for m in models:
        names.append(m._meta.db_table)
        for f in m._meta.local_many_to_many:
            if f.remote_field.through._meta.auto_created:
                names.append(f.remote_field.through._meta.db_table)
    return names


def drop_tables(models):
    qn = connection.ops.quote_name
    with connection.cursor() as c:
        c.execute("DROP TABLE IF EXISTS %s CASCADE" % ", ".join(qn(n) for n in table_names(models)))


@contextlib.contextmanager
def tables(*models):
    """Creates the tables of models with the schema editor (CREATE TABLE, then the deferred
    FOREIGN KEY constraints and indexes, in one transaction as migrate does), drops them after."""
    drop_tables(models)
    with connection.schema_editor() as editor:
        for m in models:
            editor.create_model(m)
    try:
        yield
    finally:
        if connection.in_atomic_block:
            raise AssertionError("the case left an atomic block open")
        drop_tables(models)


def in_other_thread(fn, timeout_s=10):
    """fn() on another thread, which has a connection of its own (Django's connections are
    per thread); an AssertionError when it takes longer than timeout_s (a lock wait, say)."""
    result = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the calling thread
            result["error"] = e
        finally:
            connections.close_all()

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        raise AssertionError(f"the other connection was still waiting after {timeout_s} s")
    if "error" in result:
        raise result["error"]
    return result["value"]


def migrate():
    call_command("migrate", verbosity=0, interactive=False)


def column_types(table, defaults=True):
    """{column: (data_type, character_maximum_length, is_nullable[, column_default])}."""
    with connection.cursor() as c:
        c.execute("SELECT column_name, data_type, character_maximum_length, is_nullable, "
                  "column_default FROM information_schema.columns WHERE table_name = %s "
                  "ORDER BY ordinal_position", [table])
        return {r[0]: r[1:] if defaults else r[1:4] for r in c.fetchall()}


def relation_exists(name):
    with connection.cursor() as c:
        c.execute("SELECT count(*) FROM pg_class WHERE relname = %s", [name])
        return c.fetchone()[0] == 1


def constraint_summary(table):
    """get_constraints() without the generated names (their hash suffixes), each as
    (columns, kind), sorted; named indexes keep their name."""
    with connection.cursor() as c:
        cons = connection.introspection.get_constraints(c, table)
    out = []
    for name, d in cons.items():
        if d["primary_key"]:
            kind = "pk"
        elif d["foreign_key"]:
            kind = "fk " + ".".join(d["foreign_key"])
        elif d["check"]:
            kind = "check " + name
        elif d["unique"]:
            kind = "unique"
        elif d["index"]:
            kind = " ".join(["index"] + ([name] if name.endswith("_idx") else [])
                            + list(d.get("orders") or []))
        else:
            kind = "?"
        out.append((tuple(d["columns"]), kind.strip()))
    return sorted(out)


def values(qs, *fields):
    return [tuple(r) for r in qs.values_list(*fields)]


def flat(qs, field):
    return list(qs.values_list(field, flat=True))


LIBRARY = (Author, Publisher, Tag, Book, Review, Award, Club, Membership)


def seed_library():
    """Four authors (dee has no books), two publishers, three tags, five books, seven reviews."""
    ann = Author.objects.create(name="ann", born=datetime.date(1970, 5, 1))
    bob = Author.objects.create(name="bob", born=datetime.date(1985, 11, 30))
    cyd = Author.objects.create(name="cyd", born=None)
    Author.objects.create(name="dee", born=datetime.date(1990, 1, 1))
    penguin = Publisher.objects.create(name="Penguin")
    orbit = Publisher.objects.create(name="Orbit")
    fiction, sf, history = (Tag.objects.create(name=n) for n in ("fiction", "sf", "history"))
    D = decimal.Decimal
    books = {}
    for title, author, pub, pages, price, rating, published, tags in [
        ("Alpha", ann, penguin, 100, D("10.00"), 4.5, (2020, 1, 15), [fiction, sf]),
        ("Beta", ann, orbit, 250, D("25.50"), 3.0, (2021, 6, 1), [sf]),
        ("Gamma", bob, penguin, 300, D("30.00"), None, (2019, 3, 3), [history]),
        ("Delta", bob, None, 50, D("5.25"), 5.0, (2022, 12, 31), []),
        ("Epsilon", cyd, orbit, 400, D("40.00"), 2.0, (2021, 2, 2), [fiction, history]),
    ]:
        b = Book.objects.create(title=title, author=author, publisher=pub, pages=pages,
                                price=price, rating=rating,
                                published=datetime.date(*published))
        b.tags.set(tags)
        books[title] = b
    for title, stars in [("Alpha", 5), ("Alpha", 4), ("Beta", 3), ("Gamma", 4), ("Gamma", 4),
                         ("Gamma", 2), ("Epsilon", 1)]:
        Review.objects.create(book=books[title], stars=stars, body=f"{title} {stars}")
    return books


# --- connection ---------------------------------------------------------------------------

@case
def connect_and_session_settings():
    connection.close()
    connection.ensure_connection()
    check(connection.vendor, "postgresql")
    check(connection.pg_version // 10000, 15, "pg_version major")
    check(connection.get_autocommit(), True, "autocommit")
    with connection.cursor() as c:
        c.execute("SELECT current_setting('TimeZone'), current_setting('DateStyle'), "
                  "current_setting('client_encoding'), current_setting('transaction_isolation'), "
                  "current_database(), current_user")
        check(c.fetchone(), ("UTC", "ISO, MDY", "UTF8", "read committed", "postgres",
                             "postgres"), "session settings")
        c.execute("SELECT %s + %s, %s", [2, 3, "it's"])
        check(c.fetchone(), (5, "it's"), "client-side bound parameters")
    check(connection.is_usable(), True, "is_usable")
    # A closed connection is reopened on the next query, as after CONN_MAX_AGE.
    connection.close()
    with connection.cursor() as c:
        c.execute("SELECT 1")
        check(c.fetchone(), (1,), "after reconnecting")


# --- migrations ---------------------------------------------------------------------------

@case
def migrate_contrib_and_app_migrations():
    out = io.StringIO()
    call_command("migrate", verbosity=1, interactive=False, stdout=out)
    applied = set(MigrationRecorder(connection).applied_migrations())
    check(sorted(n for a, n in applied if a == "shop"), ["0001_initial", "0002_seed", "0003_alter"],
          "shop migrations recorded")
    check(sorted(n for a, n in applied if a == "contenttypes"),
          ["0001_initial", "0002_remove_content_type_name"], "contenttypes migrations recorded")
    check(len([n for a, n in applied if a == "auth"]), 12, "auth migrations recorded")
    # post_migrate created the content types and the four default permissions per model.
    check(flat(ContentType.objects.filter(app_label="shop").order_by("model"), "model"),
          ["category", "order", "product"], "content types")
    check(sorted(flat(Permission.objects.filter(content_type__app_label="shop"), "codename"))[:4],
          ["add_category", "add_order", "add_product", "change_category"], "permissions")
    check(Permission.objects.filter(content_type__app_label="shop").count(), 12, "permissions")
    # The models agree with the migrations (makemigrations --check exits 1 otherwise).
    call_command("makemigrations", "shop", check=True, dry_run=True, verbosity=0)
    # The row 0002 seeded went through 0003's ALTERs.
    o = Order.objects.select_related("product__category").get()
    check((o.qty, o.comment, o.placed, o.product.stock, o.product.sku, o.product.weight,
           o.product.price, o.product.category.name),
          (2, "first", datetime.date(2024, 1, 1), 5, "H-1", None, decimal.Decimal("12.50"),
           "tools"), "seeded order")
    # Running it again applies nothing.
    out = io.StringIO()
    call_command("migrate", verbosity=1, interactive=False, stdout=out)
    if "No migrations to apply." not in out.getvalue():
        raise AssertionError(f"second migrate: {out.getvalue()!r}")


@case
def migrated_schema_after_alter_field():
    migrate()
    check(column_types("shop_product"), {
        "id": ("bigint", None, "NO", None),
        "name": ("character varying", 100, "NO", None),
        "sku": ("character varying", 40, "NO", None),
        "price": ("numeric", None, "NO", None),
        "stock": ("bigint", None, "NO", None),
        "created": ("timestamp with time zone", None, "NO", None),
        "category_id": ("bigint", None, "NO", None),
        "weight": ("double precision", None, "YES", None),
    }, "shop_product columns")
    check(column_types("shop_order"), {
        "id": ("bigint", None, "NO", None),
        "qty": ("integer", None, "NO", None),
        "comment": ("text", None, "YES", None),
        "product_id": ("bigint", None, "NO", None),
        "placed": ("date", None, "NO", None),
    }, "shop_order columns (note renamed, placed added, its default dropped)")
    check(constraint_summary("shop_order"), [
        (("id",), "pk"),
        (("placed", "qty"), "index shop_order_placed_qty_idx ASC ASC"),
        (("product_id",), "fk shop_product.id"),
        (("product_id",), "index ASC"),
        (("qty",), "check shop_order_qty_check"),
    ], "shop_order constraints")
    check(constraint_summary("shop_product"), [
        (("category_id",), "fk shop_category.id"),
        (("category_id",), "index ASC"),
        (("category_id", "sku"), "unique"),
        (("id",), "pk"),
        (("name",), "index shop_product_name_idx ASC"),
    ], "shop_product constraints")
    # The unique index on a varchar column gets a varchar_pattern_ops twin for LIKE.
    with connection.cursor() as c:
        cons = connection.introspection.get_constraints(c, "shop_category")
    like = sorted(n for n, d in cons.items() if n.endswith("_like"))
    check(len(like), 2, "_like indexes (name, slug)")
    # The identity column keeps counting after the type change.
    tools = Category.objects.get(name="tools")
    p = Product.objects.create(category=tools, name="saw", sku="S" * 40, price=1, stock=2**40)
    try:
        check(Product.objects.filter(stock__gt=2**39).values_list("sku", flat=True).get(),
              "S" * 40, "bigint stock, varchar(40) sku")
        e = raises(IntegrityError, lambda: Product.objects.create(
            category=tools, name="saw2", sku="S" * 40, price=1), "unique_together")
        check(sqlstate(e), "23505", "unique_together SQLSTATE")
        e = raises(DatabaseError, lambda: Product.objects.create(
            category=tools, name="saw3", sku="S" * 41, price=1), "sku of 41 characters")
        check(sqlstate(e), "22001", "varchar(40) overflow SQLSTATE")
    finally:
        p.delete()


@case
def migrate_backwards_to_zero_and_forwards():
    migrate()
    call_command("migrate", "shop", "0002", verbosity=0, interactive=False)
    check(column_types("shop_order", defaults=False), {
        "id": ("bigint", None, "NO"),
        "qty": ("integer", None, "NO"),
        "note": ("text", None, "YES"),
        "product_id": ("bigint", None, "NO"),
    }, "shop_order after reverting 0003")
    check({k: v for k, v in column_types("shop_product", defaults=False).items()
           if k in ("sku", "stock")},
          {"sku": ("character varying", 20, "NO"), "stock": ("integer", None, "NO")},
          "shop_product after reverting 0003")
    with connection.cursor() as c:
        c.execute("SELECT qty, note FROM shop_order")
        check(c.fetchall(), [(2, "first")], "the seeded row after reverting 0003")
    check((relation_exists("shop_order_placed_qty_idx"), relation_exists("shop_product_name_idx")),
          (False, True), "RemoveIndex reverted, the 0001 index kept")
    call_command("migrate", "shop", "zero", verbosity=0, interactive=False)
    with connection.cursor() as c:
        names = connection.introspection.table_names(c)
    check([n for n in names if n.startswith("shop_")], [], "shop tables after migrating to zero")
    check(MigrationRecorder.Migration.objects.filter(app="shop").count(), 0, "recorded")
    migrate()
    check(values(Order.objects.all(), "qty", "comment", "placed"),
          [(2, "first", datetime.date(2024, 1, 1))], "after migrating forwards again")


@case
def auth_users_groups_permissions():
    migrate()
    User.objects.filter(username__startswith="dj_").delete()
    Group.objects.filter(name="dj_editors").delete()
    try:
        u = User.objects.create_user("dj_alice", "alice@example.com", "s3cret!")
        User.objects.create_user("dj_bob", "bob@example.com", "other")
        check(authenticate(username="dj_alice", password="s3cret!"), u, "authenticate")
        check(authenticate(username="dj_alice", password="wrong"), None, "wrong password")
        g = Group.objects.create(name="dj_editors")
        g.permissions.add(Permission.objects.get(codename="change_product",
                                                 content_type__app_label="shop"))
        u.groups.add(g)
        u.user_permissions.add(Permission.objects.get(codename="view_order"))
        u = User.objects.get(pk=u.pk)  # no cached permissions
        check(u.has_perm("shop.change_product"), True, "group permission")
        check(u.has_perm("shop.view_order"), True, "user permission")
        check(u.has_perm("shop.delete_product"), False, "missing permission")
        check(sorted(u.get_all_permissions()), ["shop.change_product", "shop.view_order"])
        check(flat(User.objects.with_perm("shop.change_product")
                   .filter(username__startswith="dj_"), "username"), ["dj_alice"], "with_perm")
        check(flat(User.objects.filter(groups__name="dj_editors"), "username"), ["dj_alice"])
        u.last_login = datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
        u.save(update_fields=["last_login"])
        check(User.objects.get(username="dj_alice").last_login,
              datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC), "last_login")
    finally:
        User.objects.filter(username__startswith="dj_").delete()
        Group.objects.filter(name="dj_editors").delete()


# --- field types --------------------------------------------------------------------------

@case
def field_types_round_trip():
    vals = dict(
        char="héllo wörld ☃", text="line1\nline2 'quoted' \\ back", small=-32768,
        integer=2147483647, big=-9223372036854775808, positive=0,
        dec=decimal.Decimal("-12345678.1234"), flt=0.1 + 0.2, flag=True, maybe=None,
        day=datetime.date(2024, 2, 29),
        moment=datetime.datetime(2024, 3, 10, 8, 30, 15, 123456, tzinfo=UTC),
        clock=datetime.time(23, 59, 59, 999999),
        uid=uuid.UUID("12345678-1234-5678-1234-567812345678"),
        blob=b"\x00\x01\xff'\\bytes", span=datetime.timedelta(days=1, hours=2, microseconds=3),
        slug="a-slug_1", email="x@example.com", nothing=None)
    with tables(Everything):
        obj = Everything.objects.create(**vals)
        got = Everything.objects.get(pk=obj.pk)
        for k, v in vals.items():
            g = getattr(got, k)
            check(bytes(g) if isinstance(g, memoryview) else g, v, k)
        check(got.moment.utcoffset(), datetime.timedelta(0), "datetime comes back in UTC")
        # A decimal is padded to decimal_places; the same instant given in another zone.
        Everything.objects.create(**dict(vals, dec=decimal.Decimal("1.5"), moment=datetime.datetime(
            2024, 3, 10, 3, 30, 15, 123456, tzinfo=datetime.timezone(datetime.timedelta(hours=-5)))))
        check(str(Everything.objects.exclude(pk=obj.pk).get().dec), "1.5000", "numeric(12,4)")
        # Every type as a filter parameter.
        for k, v in vals.items():
            lookup = {f"{k}__isnull": True} if v is None else {k: v}
            want = 1 if k == "dec" else 2  # the second row: the same instant, 1.5
            check(Everything.objects.filter(**lookup).count(), want, f"filter on {k}")
        check(Everything.objects.filter(span__gt=datetime.timedelta(days=1)).count(), 2, "interval >")
        check(Everything.objects.filter(dec__lt=0, flt__gt=0.3).count(), 1, "numeric and float")
        check(Everything.objects.filter(blob=b"\x00\x01\xff'\\bytes").count(), 2, "bytea =")
        check(Everything.objects.filter(char__startswith="héllo").count(), 2, "non-ASCII LIKE")


@case
def datetime_use_tz_trunc_extract():
    def at(*a):
        return datetime.datetime(*a, tzinfo=UTC)
    with tables(Event):
        Event.objects.create(name="newyear", at=at(2024, 1, 1, 3, 0), end=at(2024, 1, 1, 5, 30),
                             dur=datetime.timedelta(hours=1))
        Event.objects.create(name="july", at=at(2024, 7, 4, 18, 30), end=at(2024, 7, 5, 18, 30),
                             dur=datetime.timedelta(minutes=30))
        Event.objects.create(name="dst", at=at(2024, 3, 10, 8, 30), end=at(2024, 3, 10, 8, 45),
                             dur=None)
        ev = Event.objects.order_by("at")
        # The current time zone is America/Chicago: 2024-01-01 03:00 UTC is New Year's Eve there.
        check(flat(ev.filter(at__year=2023), "name"), ["newyear"], "__year in the current zone")
        check(flat(ev.filter(at__date=datetime.date(2023, 12, 31)), "name"), ["newyear"], "__date")
        check(flat(ev.filter(at__hour=13), "name"), ["july"], "__hour (CDT)")
        check(flat(ev.filter(at__week_day=1), "name"), ["newyear", "dst"], "__week_day Sunday")
        check(values(ev.annotate(d=TruncDate("at"), h=ExtractHour("at"), y=ExtractYear("at"),
                                 w=ExtractWeek("at"), wd=ExtractIsoWeekDay("at")),
                     "d", "h", "y", "w", "wd"),
              [(datetime.date(2023, 12, 31), 21, 2023, 52, 7),
               (datetime.date(2024, 3, 10), 3, 2024, 10, 7),
               (datetime.date(2024, 7, 4), 13, 2024, 27, 4)], "Trunc/Extract in Chicago")
        chicago = timezone.get_current_timezone()
        check(flat(ev.annotate(m=TruncMonth("at")), "m"),
              [datetime.datetime(2023, 12, 1, tzinfo=chicago),
               datetime.datetime(2024, 3, 1, tzinfo=chicago),
               datetime.datetime(2024, 7, 1, tzinfo=chicago)], "TruncMonth")
        check(list(Event.objects.datetimes("at", "month")),
              [datetime.datetime(2023, 12, 1, tzinfo=chicago),
               datetime.datetime(2024, 3, 1, tzinfo=chicago),
               datetime.datetime(2024, 7, 1, tzinfo=chicago)], "datetimes()")
        with timezone.override(UTC):
            check(flat(ev.annotate(d=TruncDate("at")), "d"),
                  [datetime.date(2024, 1, 1), datetime.date(2024, 3, 10),
                   datetime.date(2024, 7, 4)], "TruncDate in UTC")
        # Interval arithmetic.
        span = ExpressionWrapper(F("end") - F("at"), output_field=DurationF())
        check(flat(ev.annotate(s=span), "s"),
              [datetime.timedelta(hours=2, minutes=30), datetime.timedelta(minutes=15),
               datetime.timedelta(days=1)], "timestamptz - timestamptz")
        check(flat(ev.filter(end__gt=F("at") + datetime.timedelta(hours=1)), "name"),
              ["newyear", "july"], "timestamptz + interval")
        check(Event.objects.filter(at__lt=Now()).count(), 3, "Now()")
        check(Event.objects.filter(at__range=(at(2024, 3, 10, 8, 30), at(2024, 7, 4, 18, 30)))
              .count(), 2, "__range on timestamptz")
        check(Event.objects.aggregate(s=Sum("dur"), a=Avg("dur"), n=Count("dur")),
              {"s": datetime.timedelta(hours=1, minutes=30),
               "a": datetime.timedelta(minutes=45), "n": 2}, "interval aggregates")


@case
def json_field_lookups():
    docs = {
        "d1": {"kind": "a", "size": 3, "tags": ["x", "y"], "nested": {"deep": 1}, "flag": True},
        "d2": {"kind": "b", "size": 10, "tags": ["y"], "nested": {"deep": 2}, "extra": None},
        "d3": {"kind": "a", "size": 7, "tags": [], "nested": {}},
        "d4": None,
        "d5": [1, 2, 3],
        "d6": {"π": 3.14159, "text": "✓ \"quoted\"", "big": 12345678901234567890},
    }
    with tables(Doc):
        for name, data in docs.items():
            Doc.objects.create(name=name, data=data)
        for name, data in docs.items():
            check(Doc.objects.get(name=name).data, data, f"{name} round trip")

        def names(**kw):
            return flat(Doc.objects.filter(**kw).order_by("name"), "name")
        check(names(data__kind="a"), ["d1", "d3"], "data__kind")
        check(names(data__size__gt=5), ["d2", "d3"], "data__size__gt")
        check(names(data__nested__deep=2), ["d2"], "nested key")
        check(names(data__tags__contains=["y"]), ["d1", "d2"], "key __contains")
        check(names(data__contains={"kind": "a", "flag": True}), ["d1"], "__contains")
        check(names(data__contained_by={"kind": "a", "size": 7, "tags": [], "nested": {},
                                        "z": 1}), ["d3"], "__contained_by")
        check(names(data__has_key="extra"), ["d2"], "__has_key")
        check(names(data__has_keys=["kind", "flag"]), ["d1"], "__has_keys")
        check(names(data__has_any_keys=["flag", "extra"]), ["d1", "d2"], "__has_any_keys")
        check(names(data__extra=None), ["d2"], "key holding JSON null")
        check(names(data__extra__isnull=True), ["d1", "d3", "d4", "d5", "d6"], "key missing")
        check(names(data__isnull=True), ["d4"], "SQL NULL")
        check(names(data__kind__in=["b", "c"]), ["d2"], "key __in")
        check(names(data__kind__icontains="A"), ["d1", "d3"], "key __icontains")
        check(names(data__tags__0="x"), ["d1"], "array element")
        check(names(data__1=2), ["d5"], "top-level array element")
        check(flat(Doc.objects.filter(data__has_key="size").order_by("data__size"), "name"),
              ["d1", "d3", "d2"], "ORDER BY a key")
        check(flat(Doc.objects.filter(data__has_key="kind").order_by("name")
                   .annotate(k=KT("data__kind")), "k"), ["a", "b", "a"], "KT")
        check(Doc.objects.annotate(s=Cast(KT("data__size"), IntegerField()))
              .aggregate(t=Sum("s")), {"t": 20}, "Cast(KT) summed")
        check(values(Doc.objects.filter(name__in=["d1", "d2"]).order_by("name"),
                     "data__nested", "data__tags__0"),
              [({"deep": 1}, "x"), ({"deep": 2}, "y")], "key transforms in values_list")
        Doc.objects.filter(name="d3").update(data={"kind": "c"})
        check(names(data__kind="c"), ["d3"], "after update")


@case
def array_field_lookups():
    with tables(Tagged):
        Tagged.objects.create(name="t1", tags=["a", "b"], nums=[1, 2, 3])
        Tagged.objects.create(name="t2", tags=["b"], nums=[5])
        Tagged.objects.create(name="t3", tags=[], nums=None)
        check(values(Tagged.objects.order_by("name"), "tags", "nums"),
              [(["a", "b"], [1, 2, 3]), (["b"], [5]), ([], None)], "round trip")

        def names(**kw):
            return flat(Tagged.objects.filter(**kw).order_by("name"), "name")
        check(names(tags__contains=["b"]), ["t1", "t2"], "@>")
        check(names(tags__contained_by=["a", "b", "c"]), ["t1", "t2", "t3"], "<@")
        check(names(tags__overlap=["a", "z"]), ["t1"], "&&")
        check(names(tags__len=0), ["t3"], "__len=0")
        check(names(tags__len=2), ["t1"], "__len=2")
        check(names(tags__0="b"), ["t2"], "index")
        check(names(tags__0_1=["a"]), ["t1"], "slice")
        check(names(tags=["a", "b"]), ["t1"], "array =")
        check(names(nums__isnull=True), ["t3"], "NULL array")
        check(names(nums__contains=[2]), ["t1"], "int[] @>")
        check(Tagged.objects.aggregate(a=ArrayAgg("name", ordering="name"),
                                       s=StringAgg("name", delimiter=",", ordering="-name")),
              {"a": ["t1", "t2", "t3"], "s": "t3,t2,t1"}, "ArrayAgg, StringAgg")
        Tagged.objects.filter(name="t2").update(tags=["q", "r"], nums=[])
        check(values(Tagged.objects.filter(name="t2"), "tags", "nums"), [(["q", "r"], [])],
              "updated")


@case
def generic_ip_address_field():
    with tables(Host):
        Host.objects.create(name="v6", ip="2001:db8::1", ip_null=None)
        Host.objects.create(name="v4", ip="192.168.0.1", ip_null="10.0.0.1")
        Host.objects.create(name="lo", ip="::1")
        check(values(Host.objects.order_by("ip"), "name", "ip", "ip_null"),
              [("v4", "192.168.0.1", "10.0.0.1"), ("lo", "::1", None),
               ("v6", "2001:db8::1", None)], "inet ordering and round trip")
        check(flat(Host.objects.filter(ip="2001:0db8::0001"), "name"), ["v6"], "inet equality")
        check(flat(Host.objects.filter(ip__startswith="192."), "name"), ["v4"], "HOST() LIKE")


# --- queries ------------------------------------------------------------------------------

@case
def filters_q_objects_f_expressions():
    with tables(*LIBRARY):
        seed_library()
        bk = Book.objects.order_by("title")

        def titles(qs):
            return flat(qs, "title")
        check(titles(bk.filter(Q(pages__gt=200) & ~Q(author__name="ann"))), ["Epsilon", "Gamma"])
        check(titles(bk.filter(Q(rating__gte=4.5) | Q(publisher__isnull=True))), ["Alpha", "Delta"])
        check(titles(bk.filter(price__gt=F("pages") / 10)), ["Beta", "Delta"], "F()/10")
        check(titles(bk.exclude(tags__name="sf")), ["Delta", "Epsilon", "Gamma"], "exclude m2m")
        check(flat(Author.objects.filter(books__pages__gt=350).distinct(), "name"), ["cyd"])
        check(titles(bk.filter(published__range=(datetime.date(2020, 1, 1),
                                                 datetime.date(2021, 12, 31)))),
              ["Alpha", "Beta", "Epsilon"], "__range")
        check(titles(bk.filter(published__year__gte=2021, published__month=6)), ["Beta"])
        check(titles(bk.filter(author__in=Author.objects.filter(born__year__lt=1980))),
              ["Alpha", "Beta"], "__in subquery")
        check(titles(bk.filter(pk__in=[])), [], "empty __in")
        check(titles(bk.filter(rating__isnull=True)), ["Gamma"], "__isnull")
        check(titles(bk.filter(author__born__isnull=True)), ["Epsilon"], "join __isnull")
        check(titles(bk.filter(tags__name__in=["fiction", "sf"]).distinct()),
              ["Alpha", "Beta", "Epsilon"], "m2m __in distinct")
        check(titles(bk.filter(tags__name="fiction").filter(tags__name="history")),
              ["Epsilon"], "two m2m joins")
        check(list(bk.annotate(ppp=F("price") / F("pages")).filter(title="Alpha")
                   .values_list("ppp", flat=True)), [decimal.Decimal("0.1")], "numeric / int")
        check(Book.objects.filter(author__name="bob").update(pages=F("pages") + 1), 2, "update F")
        check(titles(bk.filter(pages__in=[301, 51])), ["Delta", "Gamma"], "after update")
        check(titles(Book.objects.order_by(F("rating").desc(nulls_last=True))),
              ["Delta", "Alpha", "Beta", "Epsilon", "Gamma"], "NULLS LAST")
        check((bk.count(), bk.filter(pages__gt=1000).exists(), bk.filter(pages=100).exists()),
              (5, False, True), "count, exists")


@case
def text_lookups_and_functions():
    with tables(Author):
        for n in ("Ann O'Neil", "bob_smith", "Cyd 100%", "Émile Zola"):
            Author.objects.create(name=n)

        def names(**kw):
            return flat(Author.objects.filter(**kw).order_by("name"), "name")
        check(names(name__iexact="ann o'neil"), ["Ann O'Neil"], "__iexact")
        check(names(name__contains="_"), ["bob_smith"], "__contains _ escaped")
        check(names(name__contains="%"), ["Cyd 100%"], "__contains % escaped")
        check(names(name__istartswith="BOB"), ["bob_smith"], "__istartswith")
        check(names(name__endswith="%"), ["Cyd 100%"], "__endswith")
        check(names(name__startswith="Émile"), ["Émile Zola"], "non-ASCII __startswith")
        check(names(name__regex=r"^[A-Z][a-z]+ "), ["Ann O'Neil", "Cyd 100%"], "__regex")
        check(names(name__iregex=r"^b.*H$"), ["bob_smith"], "__iregex")
        qs = Author.objects.annotate(
            up=Upper("name"), lo=Lower("name"), ln=Length("name"), c=Concat("name", Value("!")),
            s=Substr("name", 2, 3), r=Replace("name", Value(" "), Value("-")), l=Left("name", 2),
            p=LPad("name", 12, Value("*")), i=StrIndex("name", Value("o"))).order_by("name")
        check(values(qs.filter(name="Ann O'Neil"), "up", "lo", "ln", "c", "s", "r", "l", "p", "i"),
              [("ANN O'NEIL", "ann o'neil", 10, "Ann O'Neil!", "nn ", "Ann-O'Neil", "An",
                "**Ann O'Neil", 0)], "text functions")
        # ORDER BY name in the C.UTF-8 collation: upper case first, then lower case, then É.
        check(flat(qs, "ln"), [10, 8, 9, 10], "Length")
        check(flat(qs, "i"), [0, 0, 2, 8], "StrIndex")


@case
def aggregates_and_group_by():
    with tables(*LIBRARY):
        seed_library()
        check(Book.objects.aggregate(n=Count("id"), total=Sum("pages"), avg=Avg("price"),
                                     mx=Max("rating"), mn=Min("published")),
              {"n": 5, "total": 1100, "avg": decimal.Decimal("22.15"), "mx": 5.0,
               "mn": datetime.date(2019, 3, 3)}, "aggregate")
        check(values(Author.objects.annotate(n=Count("books"), p=Sum("books__pages"))
                     .order_by("name"), "name", "n", "p"),
              [("ann", 2, 350), ("bob", 2, 350), ("cyd", 1, 400), ("dee", 0, None)],
              "annotate over a LEFT JOIN")
        check(values(Book.objects.values("publisher__name").annotate(n=Count("id"))
                     .order_by("publisher__name"), "publisher__name", "n"),
              [("Orbit", 2), ("Penguin", 2), (None, 1)], "GROUP BY a joined column")
        check(flat(Author.objects.annotate(t=Count("books__tags", distinct=True))
                   .order_by("name"), "t"), [2, 1, 2, 0], "COUNT(DISTINCT)")
        check(values(Author.objects.annotate(b=Count("books", distinct=True),
                                             r=Count("books__reviews")).order_by("name"),
                     "b", "r"), [(2, 3), (2, 3), (1, 1), (0, 0)], "two counts")
        check(Author.objects.annotate(n=Count("books")).aggregate(a=Avg("n")), {"a": 1.25},
              "aggregate over an annotation (subquery)")
        check(flat(Author.objects.annotate(n=Count("books")).filter(n__gte=2).order_by("name"),
                   "name"), ["ann", "bob"], "HAVING")
        avg = dict(values(Book.objects.values("author__name").annotate(s=Avg("reviews__stars")),
                          "author__name", "s"))
        check(avg, {"ann": 4.0, "bob": 10 / 3, "cyd": 1.0}, "Avg of smallint")
        check(Book.objects.filter(pages__gt=1000).aggregate(s=Sum("pages"), n=Count("id"),
                                                             c=Coalesce(Sum("pages"), 0)),
              {"s": None, "n": 0, "c": 0}, "aggregates over no rows")


@case
def conditional_expressions_and_math():
    with tables(*LIBRARY):
        seed_library()
        bk = Book.objects.order_by("title")
        size = Case(When(pages__lt=100, then=Value("short")),
                    When(pages__lt=300, then=Value("medium")), default=Value("long"))
        check(values(bk.annotate(size=size), "title", "size"),
              [("Alpha", "medium"), ("Beta", "medium"), ("Delta", "short"), ("Epsilon", "long"),
               ("Gamma", "long")], "Case/When")
        check(Book.objects.aggregate(cheap=Count("id", filter=Q(price__lt=20)),
                                     p=Sum("pages", filter=Q(rating__gte=3))),
              {"cheap": 2, "p": 400}, "aggregate FILTER (WHERE)")
        check(flat(bk.annotate(r=Coalesce("rating", 0.0)), "r"), [4.5, 3.0, 5.0, 2.0, 0.0])
        check(flat(bk.annotate(g=Greatest("pages", Value(200)), l=Least("pages", Value(200))),
                   "g"), [200, 250, 200, 400, 300], "Greatest")
        check(flat(bk.annotate(n=NullIf("rating", Value(5.0))), "n"), [4.5, 3.0, None, 2.0, None])
        check(flat(bk.annotate(i=Cast("price", IntegerField())), "i"), [10, 26, 5, 40, 30],
              "numeric::integer rounds")
        check(flat(bk.annotate(r=Round("price", 1)), "r"),
              [decimal.Decimal("10.0"), decimal.Decimal("25.5"), decimal.Decimal("5.3"),
               decimal.Decimal("40.0"), decimal.Decimal("30.0")], "Round(numeric, 1)")
        check(flat(bk.annotate(m=Mod("pages", 7)), "m"), [2, 5, 1, 1, 6], "Mod")
        check(flat(bk.annotate(f=Cast("pages", FloatField()) / 8), "f"),
              [12.5, 31.25, 6.25, 50.0, 37.5], "float division")
        Book.objects.update(rating=Case(When(rating__isnull=True, then=Value(1.0)),
                                        default=F("rating") * 2))
        check(flat(bk, "rating"), [9.0, 6.0, 10.0, 4.0, 1.0], "conditional UPDATE")


@case
def subquery_outerref_exists():
    with tables(*LIBRARY):
        seed_library()
        bk = Book.objects.order_by("title")
        au = Author.objects.order_by("name")
        best = Review.objects.filter(book=OuterRef("pk")).order_by("-stars").values("stars")[:1]
        check(flat(bk.annotate(best=Subquery(best)), "best"), [5, 3, None, 1, 4],
              "correlated scalar subquery")
        cheap = Book.objects.filter(author=OuterRef("pk"), price__lt=20)
        check(flat(au.annotate(c=Exists(cheap)), "c"), [True, True, False, False], "Exists")
        check(flat(au.filter(~Exists(Book.objects.filter(author=OuterRef("pk")))), "name"),
              ["dee"], "NOT EXISTS filter")
        total = (Book.objects.filter(author=OuterRef("pk")).values("author")
                 .annotate(s=Sum("pages")).values("s"))
        check(flat(au.annotate(t=Subquery(total)), "t"), [350, 350, 400, None],
              "grouped subquery")
        ann_max = (Book.objects.filter(author__name="ann").values("author")
                   .annotate(m=Max("pages")).values("m"))
        check(flat(bk.filter(pages__gt=Subquery(ann_max)), "title"), ["Epsilon", "Gamma"])
        top = Review.objects.filter(book__author=OuterRef("pk")).order_by("-stars").values("stars")
        check(flat(au.annotate(top=Subquery(top[:1])), "top"), [5, 4, 1, None], "joined subquery")
        check(flat(bk.filter(author__in=Subquery(Author.objects.filter(name__lt="b")
                                                 .values("pk"))), "title"), ["Alpha", "Beta"])
        # An UPDATE from a correlated subquery.
        Book.objects.update(rating=Subquery(Review.objects.filter(book=OuterRef("pk"))
                                            .values("book").annotate(a=Avg("stars"))
                                            .values("a")))
        check(flat(bk, "rating"), [4.5, 3.0, None, 1.0, 10 / 3], "UPDATE ... = (subquery)")


@case
def window_functions():
    with tables(*LIBRARY):
        seed_library()
        bk = Book.objects.order_by("title")
        check(flat(bk.annotate(r=Window(Rank(), partition_by=F("author"),
                                        order_by=F("pages").desc())), "r"), [2, 1, 2, 1, 1],
              "rank() over (partition by ...)")
        by_date = Book.objects.order_by("published")
        check(values(by_date.annotate(run=Window(Sum("pages"), order_by=F("published").asc()),
                                      prev=Window(Lag("title"), order_by=F("published").asc())),
                     "title", "run", "prev"),
              [("Gamma", 300, None), ("Alpha", 400, "Gamma"), ("Epsilon", 800, "Alpha"),
               ("Beta", 1050, "Epsilon"), ("Delta", 1100, "Beta")], "running sum, lag")
        check(flat(by_date.annotate(m=Window(Avg("pages"), order_by=F("published").asc(),
                                             frame=RowRange(start=-1, end=0))), "m"),
              [300.0, 200.0, 250.0, 325.0, 150.0], "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW")
        first = bk.annotate(rn=Window(RowNumber(), partition_by=F("author"),
                                      order_by=F("pages").desc())).filter(rn=1)
        check(flat(first, "title"), ["Beta", "Epsilon", "Gamma"], "filtering on a window")


@case
def select_related_prefetch_related():
    with tables(*LIBRARY):
        seed_library()
        with CaptureQueriesContext(connection) as q:
            rows = [(b.title, b.author.name, b.publisher and b.publisher.name)
                    for b in Book.objects.select_related("author", "publisher").order_by("title")]
        check(rows, [("Alpha", "ann", "Penguin"), ("Beta", "ann", "Orbit"),
                     ("Delta", "bob", None), ("Epsilon", "cyd", "Orbit"),
                     ("Gamma", "bob", "Penguin")], "select_related")
        check(len(q), 1, "select_related queries")
        with CaptureQueriesContext(connection) as q:
            authors = list(Author.objects.order_by("name").prefetch_related(
                Prefetch("books", queryset=Book.objects.order_by("title")),
                Prefetch("books__tags", queryset=Tag.objects.order_by("name")),
                Prefetch("books__reviews", queryset=Review.objects.filter(stars__gte=4)
                         .order_by("id"), to_attr="good")))
            got = {a.name: [(b.title, [t.name for t in b.tags.all()], [r.stars for r in b.good])
                            for b in a.books.all()] for a in authors}
        check(got, {"ann": [("Alpha", ["fiction", "sf"], [5, 4]), ("Beta", ["sf"], [])],
                    "bob": [("Delta", [], []), ("Gamma", ["history"], [4, 4])],
                    "cyd": [("Epsilon", ["fiction", "history"], [])], "dee": []},
              "prefetch_related")
        check(len(q), 4, "prefetch_related queries")
        with CaptureQueriesContext(connection) as q:
            b = Book.objects.only("title").get(title="Beta")
            check((b.title, b.pages), ("Beta", 250), "only() then a deferred field")
        check(len(q), 2, "only() queries")
        check(Book.objects.defer("price").get(title="Gamma").rating, None, "defer()")


@case
def many_to_many_and_through():
    with tables(*LIBRARY):
        a, b, c = (Tag.objects.create(name=n) for n in "abc")
        au = Author.objects.create(name="x")
        book = Book.objects.create(title="T", author=au, pages=1, price=1,
                                   published=datetime.date(2024, 1, 1))

        def tags():
            return flat(book.tags.order_by("name"), "name")
        book.tags.add(a, b)
        book.tags.add(a)  # already there: nothing happens (ON CONFLICT DO NOTHING)
        check(tags(), ["a", "b"], "add")
        book.tags.remove(a)
        check(tags(), ["b"], "remove")
        book.tags.set([c, a])
        check(tags(), ["a", "c"], "set")
        check(flat(c.books.all(), "title"), ["T"], "reverse")
        check(Tag.objects.filter(books__isnull=True).count(), 1, "tags without books")
        book.tags.clear()
        check(tags(), [], "clear")
        club = Club.objects.create(name="readers")
        club.members.add(au, through_defaults={"joined": datetime.date(2024, 2, 2)})
        y = Author.objects.create(name="y")
        Membership.objects.create(club=club, author=y, joined=datetime.date(2023, 1, 1))
        check(flat(club.members.order_by("membership__joined"), "name"), ["y", "x"],
              "through model ordering")
        check(flat(Author.objects.filter(clubs__name="readers", membership__joined__year=2024),
                   "name"), ["x"], "filter through the intermediate table")
        club.members.remove(y)
        check(Membership.objects.count(), 1, "remove through")


@case
def model_inheritance_multi_table():
    with tables(Place, Restaurant):
        Restaurant.objects.create(name="Pizzeria", city="Rome", serves_pizza=True, seats=20)
        Place.objects.create(name="Park", city="Oslo")
        check(values(Place.objects.order_by("name"), "name", "city"),
              [("Park", "Oslo"), ("Pizzeria", "Rome")], "parents")
        check(Place.objects.get(name="Pizzeria").restaurant.seats, 20, "parent -> child")
        r = Restaurant.objects.get(city="Rome")
        check((r.name, r.serves_pizza, r.seats), ("Pizzeria", True, 20), "child with parent")
        check(Restaurant.objects.filter(name="Pizzeria").update(city="Milan"), 1,
              "update of a parent column through the child")
        check(Place.objects.filter(city="Milan").count(), 1)
        r.delete()
        check(flat(Place.objects.all(), "name"), ["Park"], "deleting the child deletes the parent")


@case
def on_delete_cascade_set_null_protect():
    with tables(*LIBRARY):
        books = seed_library()
        ann = Author.objects.get(name="ann")
        award = Award.objects.create(author=ann, name="prize")
        e = raises(ProtectedError, ann.delete, "PROTECT")
        check(len(e.protected_objects), 1)
        check(Book.objects.filter(author=ann).count(), 2, "nothing deleted")
        Publisher.objects.filter(name="Penguin").delete()
        check(values(Book.objects.filter(title__in=["Alpha", "Gamma"]).order_by("title"),
                     "title", "publisher"), [("Alpha", None), ("Gamma", None)], "SET_NULL")
        award.delete()
        count, per_model = ann.delete()
        check((count, per_model), (9, {"django_app.Review": 3, "django_app.Book_tags": 3,
                                       "django_app.Book": 2, "django_app.Author": 1}), "CASCADE")
        check(Review.objects.count(), 4, "reviews left")
        check(Review.objects.filter(book=books["Gamma"]).delete(), (3, {"django_app.Review": 3}))


# --- writes -------------------------------------------------------------------------------

@case
def bulk_create_returning_ids_and_conflicts():
    with tables(Item, Pair):
        objs = Item.objects.bulk_create([Item(n=i, label=f"l{i}") for i in range(1, 1001)],
                                        batch_size=300)
        check([o.pk for o in objs], list(range(1, 1001)), "ids from RETURNING")
        check(Item.objects.aggregate(c=Count("id"), s=Sum("n")), {"c": 1000, "s": 500500})
        Pair.objects.create(a=1, b=2, n=1)
        made = Pair.objects.bulk_create([Pair(a=1, b=2), Pair(a=2, b=3), Pair(a=2, b=3)],
                                        ignore_conflicts=True)
        check([p.pk for p in made], [None, None, None], "ignore_conflicts sets no ids")
        check(values(Pair.objects.order_by("a"), "a", "b", "n"), [(1, 2, 1), (2, 3, 0)],
              "ON CONFLICT DO NOTHING")
        first = Pair.objects.get(a=1)
        up = Pair.objects.bulk_create([Pair(a=1, b=2, n=9), Pair(a=5, b=6, n=7)],
                                      update_conflicts=True, unique_fields=["a", "b"],
                                      update_fields=["n"])
        check(up[0].pk, first.pk, "ON CONFLICT DO UPDATE RETURNING the existing id")
        check(values(Pair.objects.order_by("a"), "a", "b", "n"),
              [(1, 2, 9), (2, 3, 0), (5, 6, 7)], "ON CONFLICT DO UPDATE")


@case
def bulk_update_and_queryset_update():
    with tables(Item):
        items = Item.objects.bulk_create([Item(n=i, label=f"l{i}") for i in range(1, 11)])
        for it in items:
            it.label = f"x{it.n}"
            it.n = it.n * 10
        check(Item.objects.bulk_update(items, ["label", "n"], batch_size=4), 10, "bulk_update")
        check(values(Item.objects.order_by("id")[:3], "n", "label"),
              [(10, "x1"), (20, "x2"), (30, "x3")])
        check(Item.objects.filter(n__gt=50).update(label=Concat(F("label"), Value("!"))), 5)
        check(Item.objects.update(n=F("n") * 2 + 1), 10)
        check(values(Item.objects.order_by("-n")[:2], "n", "label"),
              [(201, "x10!"), (181, "x9!")])
        check(Item.objects.filter(n__lt=100).delete(), (4, {"django_app.Item": 4}))


@case
def get_or_create_update_or_create():
    with tables(Counter):
        obj, created = Counter.objects.get_or_create(key="a", defaults={"value": 1})
        check((created, obj.value), (True, 1), "created")
        again, created = Counter.objects.get_or_create(key="a", defaults={"value": 99})
        check((created, again.pk, again.value), (False, obj.pk, 1), "got")
        obj, created = Counter.objects.update_or_create(key="a", defaults={"value": 5})
        check((created, obj.value), (False, 5), "updated")
        obj, created = Counter.objects.update_or_create(key="b", defaults={"value": 7},
                                                        create_defaults={"value": 70})
        check((created, obj.value), (True, 70), "create_defaults")
        # The lookup misses, the INSERT violates the unique key: get_or_create re-raises.
        e = raises(IntegrityError, lambda: Counter.objects.get_or_create(key="a", value=3))
        check(sqlstate(e), "23505")
        before = Counter.objects.get(key="a").updated
        obj = Counter.objects.get(key="a")
        obj.value = 6
        obj.save(update_fields=["value", "updated"])
        obj.refresh_from_db()
        check(obj.value, 6, "save(update_fields)")
        if not obj.updated > before:
            raise AssertionError(f"auto_now: {obj.updated} not after {before}")
        check(values(Counter.objects.order_by("key"), "key", "value"), [("a", 6), ("b", 70)])


@case
def atomic_nested_savepoints():
    with tables(Counter):
        def keys():
            return flat(Counter.objects.order_by("key"), "key")
        with transaction.atomic():
            Counter.objects.create(key="outer")
            try:
                with transaction.atomic():
                    Counter.objects.create(key="inner1")
                    raise RuntimeError("roll back to the savepoint")
            except RuntimeError:
                pass
            with transaction.atomic():
                Counter.objects.create(key="inner2")
                with transaction.atomic():
                    Counter.objects.create(key="inner3")
            sid = transaction.savepoint()
            Counter.objects.create(key="manual")
            transaction.savepoint_rollback(sid)
            # Uncommitted rows are not visible to another connection.
            check(in_other_thread(lambda: Counter.objects.count()), 0, "isolation")
            check(keys(), ["inner2", "inner3", "outer"], "inside the transaction")
        check(keys(), ["inner2", "inner3", "outer"], "committed")
        check(in_other_thread(lambda: Counter.objects.count()), 3, "visible after commit")
        try:
            with transaction.atomic():
                Counter.objects.create(key="gone")
                raise ValueError
        except ValueError:
            pass
        with transaction.atomic():
            Counter.objects.create(key="gone2")
            transaction.set_rollback(True)
        check(keys(), ["inner2", "inner3", "outer"], "rolled back")
        with transaction.atomic():
            try:
                with transaction.atomic():
                    Counter.objects.create(key="outer")
            except IntegrityError:
                pass
            Counter.objects.create(key="after")
        check(keys(), ["after", "inner2", "inner3", "outer"], "after a failed savepoint")
        calls = []
        with transaction.atomic():
            transaction.on_commit(lambda: calls.append("outer"))
            try:
                with transaction.atomic():
                    transaction.on_commit(lambda: calls.append("rolled back"))
                    raise ValueError
            except ValueError:
                pass
        check(calls, ["outer"], "on_commit")
        with transaction.atomic(durable=True):
            Counter.objects.filter(key="after").update(value=F("value") + 1)
        check(Counter.objects.get(key="after").value, 1)


@case
def integrity_errors():
    with tables(*LIBRARY, Pair):
        Pair.objects.create(a=1, b=2)
        e = raises(IntegrityError, lambda: Pair.objects.create(a=1, b=2), "unique_together")
        check(sqlstate(e), "23505", "unique_together")
        e = raises(IntegrityError, lambda: Pair.objects.create(a=5, b=1), "CheckConstraint")
        check((sqlstate(e), e.__cause__.diag.constraint_name), ("23514", "pair_a_le_b"))
        e = raises(IntegrityError, lambda: Pair.objects.create(a=1, b=3, n=-1), "positive")
        check((sqlstate(e), e.__cause__.diag.constraint_name),
              ("23514", "django_app_pair_n_check"), "PositiveSmallIntegerField")
        e = raises(IntegrityError, lambda: Pair.objects.create(a=None, b=3), "NOT NULL")
        check((sqlstate(e), e.__cause__.diag.column_name), ("23502", "a"), "NOT NULL")
        Author.objects.create(name="ann")
        e = raises(IntegrityError, lambda: Author.objects.create(name="ann"), "unique")
        check(sqlstate(e), "23505", "unique")
        # Django's foreign keys are DEFERRABLE INITIALLY DEFERRED: the INSERT succeeds and the
        # COMMIT fails.
        state = {}

        def orphan():
            with transaction.atomic():
                Book.objects.create(title="orphan", author_id=999999, pages=1, price=1,
                                    published=datetime.date(2024, 1, 1))
                state["inserted"] = True
        e = raises(IntegrityError, orphan, "deferred foreign key")
        check((state.get("inserted"), sqlstate(e)), (True, "23503"), "FK violation at COMMIT")
        check(Book.objects.count(), 0, "rolled back")
        check(Pair.objects.count(), 1, "the connection is usable afterwards")


@case
def select_for_update_nowait_skip_locked():
    with tables(Counter):
        for k in "abc":
            Counter.objects.create(key=k)

        def locked_nowait():
            try:
                with transaction.atomic():
                    list(Counter.objects.select_for_update(nowait=True).filter(key="a"))
            except OperationalError as e:
                return sqlstate(e)
            return "got the lock"

        def skip_locked():
            with transaction.atomic():
                return flat(Counter.objects.select_for_update(skip_locked=True).order_by("key"),
                            "key")
        with transaction.atomic():
            row = Counter.objects.select_for_update().get(key="a")
            check(row.key, "a")
            check(in_other_thread(locked_nowait), "55P03", "FOR UPDATE NOWAIT on a locked row")
            check(in_other_thread(skip_locked), ["b", "c"], "SKIP LOCKED")
            check(in_other_thread(lambda: Counter.objects.get(key="a").value), 0,
                  "a plain read is not blocked")
            check(flat(Counter.objects.select_for_update(of=("self",)).filter(key__in="bc")
                       .order_by("key"), "key"), ["b", "c"], "FOR UPDATE OF")
            Counter.objects.filter(key="a").update(value=1)
        check(in_other_thread(locked_nowait), "got the lock", "after COMMIT")
        check(in_other_thread(skip_locked), ["a", "b", "c"], "after COMMIT")


@case
def iterator_server_side_cursor():
    with tables(Item):
        with connection.cursor() as c:
            c.execute("INSERT INTO django_app_item (n, label) "
                      "SELECT g, 'l' || g FROM generate_series(0, 2499) g")

        def open_cursors():
            with connection.cursor() as c:
                c.execute("SELECT name, is_holdable FROM pg_cursors ORDER BY name")
                return [(n.startswith("_django_curs_"), h) for n, h in c.fetchall()]
        it = Item.objects.order_by("n").values_list("n", flat=True).iterator(chunk_size=1000)
        first = next(it)
        check(open_cursors(), [(True, True)], "a WITH HOLD cursor outside a transaction")
        check([first] + list(it), list(range(2500)), "chunked fetch")
        check(open_cursors(), [], "closed after the last chunk")
        with transaction.atomic():
            it = Item.objects.filter(n__gte=2000).order_by("-n").iterator(chunk_size=100)
            first = next(it)
            check(open_cursors(), [(True, False)], "a cursor without hold in a transaction")
            check([first.n] + [o.n for o in it], list(range(2499, 1999, -1)), "model instances")
        # Stopping early closes the cursor.
        it = Item.objects.order_by("n").iterator(chunk_size=10)
        check([next(it).n for _ in range(15)], list(range(15)))
        it.close()
        check(open_cursors(), [], "closed when the iterator is")


@case
def raw_sql_cursor_and_raw_queryset():
    with tables(Item):
        with connection.cursor() as c:
            c.execute("INSERT INTO django_app_item (n, label) VALUES (%s, %s) RETURNING id",
                      [1, "it's"])
            check(c.fetchone(), (1,), "RETURNING")
            c.executemany("INSERT INTO django_app_item (n, label) VALUES (%s, %s)",
                          [(2, "b"), (3, "c"), (4, "d")])
            c.execute("SELECT n, label FROM django_app_item WHERE label = ANY(%s) ORDER BY n",
                      [["it's", "c"]])
            check([col.name for col in c.description], ["n", "label"], "description")
            check(c.fetchall(), [(1, "it's"), (3, "c")], "list parameter as an array")
            c.execute("SELECT n FROM django_app_item ORDER BY n")
            check(c.fetchmany(3), [(1,), (2,), (3,)], "fetchmany")
            check(c.fetchone(), (4,), "fetchone")
            check(c.fetchone(), None, "exhausted")
            c.execute("SELECT 'a%%b', %s", ["v"])
            check(c.fetchone(), ("a%b", "v"), "%% escaping")
            c.execute("SELECT %(a)s + %(b)s", {"a": 1, "b": 2})
            check(c.fetchone(), (3,), "named parameters")
            c.execute("SELECT %s::date, %s::numeric, %s, %s, %s", [
                datetime.date(2024, 1, 2), decimal.Decimal("1.10"), None, True, b"\x00\xff"])
            row = c.fetchone()
            check(row[:4], (datetime.date(2024, 1, 2), decimal.Decimal("1.10"), None, True))
            check(bytes(row[4]), b"\x00\xff", "bytea parameter")
            c.execute("UPDATE django_app_item SET n = n + 10 WHERE n > %s", [1])
            check(c.rowcount, 3, "rowcount")
        raw = list(Item.objects.raw("SELECT id, n FROM django_app_item WHERE n >= %s "
                                    "ORDER BY n", [12]))
        check([(o.n, o.label) for o in raw], [(12, "b"), (13, "c"), (14, "d")],
              "raw() with a deferred column")


# --- introspection and management commands ------------------------------------------------

@case
def introspection_tables_columns_constraints():
    with tables(*LIBRARY, Everything, Pair):
        intro = connection.introspection
        with connection.cursor() as c:
            c.execute("CREATE VIEW django_app_book_view AS SELECT id, title FROM django_app_book")
            try:
                kinds = {t.name: t.type for t in intro.get_table_list(c)}
                check((kinds.get("django_app_book"), kinds.get("django_app_book_tags"),
                       kinds.get("django_app_book_view")), ("t", "t", "v"), "get_table_list")
                check("django_app_book_view" in intro.table_names(c), False, "table_names")
                check("django_app_book_view" in intro.table_names(c, include_views=True), True)
            finally:
                c.execute("DROP VIEW django_app_book_view")
            desc = intro.get_table_description(c, "django_app_everything")
            check([(f.name, intro.get_field_type(f.type_code, f), f.null_ok) for f in desc], [
                ("id", "BigAutoField", False), ("char", "CharField", False),
                ("text", "TextField", False), ("small", "SmallIntegerField", False),
                ("integer", "IntegerField", False), ("big", "BigIntegerField", False),
                ("positive", "IntegerField", False), ("dec", "DecimalField", False),
                ("flt", "FloatField", False), ("flag", "BooleanField", False),
                ("maybe", "BooleanField", True), ("day", "DateField", False),
                ("moment", "DateTimeField", False), ("clock", "TimeField", False),
                ("uid", "UUIDField", False), ("blob", "BinaryField", False),
                ("span", "DurationField", False), ("slug", "CharField", False),
                ("email", "CharField", False), ("nothing", "IntegerField", True),
            ], "get_table_description")
            by_name = {f.name: f for f in desc}
            check((by_name["char"].display_size, by_name["char"].internal_size), (30, None),
                  "varchar(30)")
            check((by_name["dec"].precision, by_name["dec"].scale), (12, 4), "numeric(12,4)")
            check((by_name["id"].is_autofield, by_name["char"].is_autofield), (True, False))
            check(intro.get_sequences(c, "django_app_book"),
                  [{"name": "django_app_book_id_seq", "table": "django_app_book",
                    "column": "id"}], "get_sequences")
            check(intro.get_relations(c, "django_app_book"),
                  {"author_id": ("id", "django_app_author"),
                   "publisher_id": ("id", "django_app_publisher")}, "get_relations")
            check(intro.get_primary_key_column(c, "django_app_book"), "id")
        pair = constraint_summary("django_app_pair")
        check(pair, [(("a", "b"), "check pair_a_le_b"), (("a", "b"), "unique"), (("id",), "pk"),
                     (("n",), "check django_app_pair_n_check")], "get_constraints")
        check(constraint_summary("django_app_book_tags"), [
            (("book_id",), "fk django_app_book.id"), (("book_id",), "index ASC"),
            (("book_id", "tag_id"), "unique"), (("id",), "pk"),
            (("tag_id",), "fk django_app_tag.id"), (("tag_id",), "index ASC")],
            "get_constraints of the m2m table")
        existing = connection.introspection.django_table_names(only_existing=True)
        for t in ("django_app_book", "django_app_book_tags", "django_app_pair"):
            if t not in existing:
                raise AssertionError(f"django_table_names: no {t}")


@case
def inspectdb_command():
    with tables(*LIBRARY, Pair):
        out = io.StringIO()
        call_command("inspectdb", "django_app_book", "django_app_pair", stdout=out)
        text = out.getvalue()
        # inspectdb reports a table it could not introspect in a comment, with the error.
        errors = [ln for ln in text.splitlines() if ln.startswith("# The error was:")]
        if errors:
            raise AssertionError(" ".join(errors))
        for line in [
            "class DjangoAppBook(models.Model):",
            "    id = models.BigAutoField(primary_key=True)",
            "    title = models.CharField(max_length=100)",
            "    author = models.ForeignKey('DjangoAppAuthor', models.DO_NOTHING)",
            "    publisher = models.ForeignKey('DjangoAppPublisher', models.DO_NOTHING, "
            "blank=True, null=True)",
            "    pages = models.IntegerField()",
            "    price = models.DecimalField(max_digits=6, decimal_places=2)",
            "    rating = models.FloatField(blank=True, null=True)",
            "    published = models.DateField()",
            "        db_table = 'django_app_book'",
            "class DjangoAppPair(models.Model):",
            "    a = models.IntegerField()",
            "    n = models.SmallIntegerField()",
            "        unique_together = (('a', 'b'),)",
        ]:
            if line not in text.splitlines():
                raise AssertionError(f"no line {line!r} in:\n{text}")


@case
def flush_and_sqlflush():
    migrate()
    with tables(Item):
        Item.objects.bulk_create([Item(n=i, label="x") for i in range(3)])
        out = io.StringIO()
        call_command("sqlflush", stdout=out)
        lines = out.getvalue().splitlines()
        check((lines[0], lines[-1]), ("BEGIN;", "COMMIT;"), "sqlflush")
        truncate = [ln for ln in lines if ln.startswith("TRUNCATE ")]
        check(len(truncate), 1, "one TRUNCATE")
        for t in ('"django_app_item"', '"auth_user"', '"shop_order"', '"django_content_type"'):
            if t not in truncate[0]:
                raise AssertionError(f"{t} not in {truncate[0]}")
        if not truncate[0].endswith(" RESTART IDENTITY;"):
            raise AssertionError(truncate[0])
        try:
            call_command("flush", interactive=False, verbosity=0)
            check(Item.objects.count(), 0, "flushed")
            check(Order.objects.count(), 0, "flushed")
            check(Item.objects.create(n=1, label="y").pk, 1, "identity restarted")
            # post_migrate ran again: content types and permissions are back.
            check(ContentType.objects.filter(app_label="shop").count(), 3, "content types")
            check(Permission.objects.filter(content_type__app_label="shop").count(), 12)
        finally:
            # The rows the shop migrations seed, for the migrate cases.
            call_command("migrate", "shop", "zero", verbosity=0, interactive=False)
            migrate()


@case
def dumpdata_loaddata():
    tmp = tempfile.mkdtemp(prefix="shoal-django-")
    try:
        with tables(*LIBRARY):
            seed_library()
            out = io.StringIO()
            call_command("dumpdata", "django_app.author", "django_app.tag", "django_app.book",
                         format="json", stdout=out)
            data = json.loads(out.getvalue())
            check(len(data), 12, "objects dumped")
            alpha = next(d for d in data if d["model"] == "django_app.book")
            check(alpha, {"model": "django_app.book", "pk": 1, "fields": {
                "title": "Alpha", "author": 1, "publisher": 1, "pages": 100, "price": "10.00",
                "rating": 4.5, "published": "2020-01-15", "tags": [1, 2]}}, "a dumped book")
            for d in data:
                if d["model"] == "django_app.book":
                    d["fields"]["publisher"] = None
            path = os.path.join(tmp, "library.json")
            with open(path, "w") as f:
                json.dump(data, f)
            Review.objects.all().delete()
            Book.objects.all().delete()
            Author.objects.all().delete()
            Tag.objects.all().delete()
            call_command("loaddata", path, verbosity=0)
            check(values(Book.objects.order_by("title"), "title", "author__name", "pages"),
                  [("Alpha", "ann", 100), ("Beta", "ann", 250), ("Delta", "bob", 50),
                   ("Epsilon", "cyd", 400), ("Gamma", "bob", 300)], "loaded")
            check(flat(Book.objects.get(title="Epsilon").tags.order_by("name"), "name"),
                  ["fiction", "history"], "loaded m2m")
            # loaddata resets the sequences past the loaded ids.
            check(Author.objects.create(name="new").pk, 5, "sequence reset")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@case
def ordering_slicing_distinct_union():
    with tables(*LIBRARY, Token):
        seed_library()
        bk = Book.objects.order_by("title")
        check(flat(bk[1:3], "title"), ["Beta", "Delta"], "LIMIT OFFSET")
        check(flat(bk[3:], "title"), ["Epsilon", "Gamma"], "OFFSET")
        check((bk.first().title, bk.last().title, bk.reverse()[0].title),
              ("Alpha", "Gamma", "Gamma"), "first, last, reverse")
        check((Book.objects.earliest("published").title, Book.objects.latest("published").title),
              ("Gamma", "Delta"), "earliest, latest")
        check(flat(Book.objects.order_by(F("rating").asc(nulls_first=True), "title"), "title"),
              ["Gamma", "Epsilon", "Beta", "Alpha", "Delta"], "NULLS FIRST")
        check(values(Book.objects.order_by("author__name", "-pages").distinct("author__name"),
                     "author__name", "title"),
              [("ann", "Beta"), ("bob", "Gamma"), ("cyd", "Epsilon")], "DISTINCT ON")
        check(flat(Book.objects.values_list("publisher__name", flat=True).distinct()
                   .order_by("publisher__name"), "publisher__name"),
              ["Orbit", "Penguin", None], "DISTINCT")
        p = Paginator(bk, 2)
        check((p.count, p.num_pages, [b.title for b in p.page(3)]), (5, 3, ["Gamma"]),
              "Paginator")
        short, long = Book.objects.filter(pages__lt=100), Book.objects.filter(pages__gt=350)
        check(flat(short.union(long).order_by("title"), "title"), ["Delta", "Epsilon"], "UNION")
        check(flat(Book.objects.filter(pages__gt=200).intersection(Book.objects.filter(
            publisher__name="Orbit")).order_by("title"), "title"), ["Beta", "Epsilon"],
            "INTERSECT")
        check(flat(Book.objects.filter(pages__gt=200).difference(Book.objects.filter(
            publisher__name="Orbit")), "title"), ["Gamma"], "EXCEPT")
        ids = dict(values(Book.objects.all(), "title", "pk"))
        check({k: v.title for k, v in Book.objects.in_bulk([ids["Beta"], ids["Delta"]]).items()},
              {ids["Beta"]: "Beta", ids["Delta"]: "Delta"}, "in_bulk")
        toks = [Token.objects.create(name=f"t{i}") for i in range(3)]
        check(Token.objects.get(pk=toks[1].pk).name, "t1", "uuid primary key")
        check(sorted(Token.objects.in_bulk([t.pk for t in toks[:2]])), sorted(t.pk for t in
                                                                              toks[:2]))
        check(Token.objects.filter(pk=str(toks[2].pk)).count(), 1, "uuid as a string")


@case
def server_side_binding_option():
    try:
        with tables(Item, Doc):
            db = Item.objects.using("ssb")
            made = db.bulk_create([Item(n=i, label=f"l{i}") for i in range(1, 21)])
            check([o.pk for o in made], list(range(1, 21)), "bulk_create with $n parameters")
            check(flat(db.filter(n__in=[3, 5, 7]).order_by("n"), "label"), ["l3", "l5", "l7"])
            check(flat(db.filter(label__startswith="l1").order_by("n"), "n"),
                  [1] + list(range(10, 20)), "LIKE with a parameter")
            check(db.aggregate(s=Sum("n"), a=Avg("n")), {"s": 210, "a": 10.5})
            check(db.filter(n__gt=15).update(n=F("n") + 100), 5)
            check(flat(db.annotate(tag=Value("x"), c=Concat("label", Value("-"))).filter(n=1),
                       "c"), ["l1-"], "Value() parameters in the SELECT list")
            check([o.n for o in db.filter(n__lt=4).order_by("n").iterator(chunk_size=2)],
                  [1, 2, 3], "server-side cursor with parameters")
            docs = Doc.objects.using("ssb")
            docs.create(name="d", data={"k": [1, 2], "s": "v"})
            check(flat(docs.filter(data__k__contains=[2], data__s="v"), "name"), ["d"], "JSON")
            check(flat(docs.filter(data__s__in=["v", "w"]), "name"), ["d"], "JSON key __in")
    finally:
        connections["ssb"].close()


@case
def full_text_search():
    with tables(Article):
        Article.objects.create(title="Cats", body="The cat sat on the mat. Cats are running.")
        Article.objects.create(title="Dogs", body="Dogs run in the park.")
        Article.objects.create(title="Birds", body="Birds fly over the lake.")
        check(flat(Article.objects.filter(body__search="cat").order_by("title"), "title"),
              ["Cats"], "__search")
        vector = SearchVector("title", weight="A", config="english") + \
            SearchVector("body", weight="B", config="english")
        query = SearchQuery("run", config="english")
        ranked = (Article.objects.annotate(rank=SearchRank(vector, query))
                  .filter(rank__gt=0).order_by("-rank", "title"))
        check(flat(ranked, "title"), ["Cats", "Dogs"], "SearchRank (running, run stem to run)")
        check(flat(Article.objects.annotate(search=vector).filter(
            search=SearchQuery("dogs | lake", search_type="raw", config="english"))
            .order_by("title"), "title"), ["Birds", "Dogs"], "raw tsquery")


def main():
    run_cases(CASES)
    connections.close_all()


if __name__ == "__main__":
    main()
