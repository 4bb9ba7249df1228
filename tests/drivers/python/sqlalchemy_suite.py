#!/usr/bin/env python3
"""What applications do with SQLAlchemy 2 (the psycopg 3 dialect) and Alembic, case by case (see
tests/drivers/run.py for the output protocol). SQLAlchemy reads the catalog on its own: each
engine asks for the server's version, schema and settings when it first connects, create_all
asks whether each table exists, inspect() and Alembic's autogenerate reflect tables through
pg_catalog queries of its own. Connects with the libpq environment variables; each case makes
its own engine and tables, so one failure does not spill into the next."""

import contextlib
import datetime
import decimal
import io
import os
import shutil
import tempfile
import time
import uuid

import sqlalchemy as sa
from sqlalchemy import exc, inspect, select, func, text
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.orm import (DeclarativeBase, Mapped, Session, joinedload, mapped_column,
                            relationship, selectinload)

from suite import run_cases

CASES = []
# "postgresql+psycopg://" with nothing else: psycopg (libpq) takes the host, port, user and
# database from PGHOST, PGPORT, PGUSER and PGDATABASE.
URL = "postgresql+psycopg://"


def case(fn):
    CASES.append(fn)
    return fn


def engine(**kw):
    # The psycopg dialect looks up the hstore type (psycopg's TypeInfo.fetch, through
    # to_regtype(%s)) when an engine first connects; engine_connect covers that with the
    # defaults, the other cases skip it so that they test what they are about.
    kw.setdefault("use_native_hstore", False)
    return sa.create_engine(URL, **kw)


def check(got, want, what=""):
    if got != want:
        raise AssertionError(f"{what} got {got!r}, want {want!r}")


@case
def engine_connect():
    e = sa.create_engine(URL)  # every default, the hstore lookup included
    try:
        with e.connect() as c:
            check(c.execute(text("SELECT 1")).scalar(), 1)
            check(c.execute(text("SELECT :a + :b"), {"a": 2, "b": 3}).scalar(), 5, "bound")
        # What the dialect learnt from the server when it first connected.
        d = e.dialect
        if d.server_version_info < (10,):
            raise AssertionError(f"server_version_info {d.server_version_info}")
        check(d.default_schema_name, "public", "default_schema_name")
        check(e.dialect.driver, "psycopg", "driver")
        with e.connect() as c:
            check(c.get_isolation_level(), "READ COMMITTED", "default isolation level")
    finally:
        e.dispose()


def items_table(metadata):
    return sa.Table(
        "items", metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(50), nullable=False),
        sa.Column("qty", sa.Integer, server_default="0"),
        sa.Column("price", sa.Numeric(10, 2)),
    )


@case
def core_crud():
    e = engine()
    md = sa.MetaData()
    items = items_table(md)
    try:
        md.create_all(e)
        with e.begin() as c:
            r = c.execute(items.insert().values(name="a", price=decimal.Decimal("1.50"))
                          .returning(items.c.id, items.c.qty))
            check(tuple(r.one()), (1, 0), "INSERT RETURNING with server default")
            # executemany of an INSERT: psycopg's executemany.
            c.execute(items.insert(), [{"name": f"n{i}", "qty": i, "price": i}
                                       for i in range(2, 12)])
            # executemany with RETURNING: "insertmanyvalues", one INSERT ... VALUES (...), (...)
            # RETURNING per batch.
            r = c.execute(items.insert().returning(items.c.id, items.c.name,
                                                   sort_by_parameter_order=True),
                          [{"name": f"m{i}", "qty": 100 + i} for i in range(5)])
            check([tuple(row) for row in r], [(12 + i, f"m{i}") for i in range(5)],
                  "insertmanyvalues RETURNING in parameter order")
        with e.connect() as c:
            rows = c.execute(select(items.c.name, items.c.qty).where(items.c.qty > 8)
                             .order_by(items.c.qty.desc()).limit(3).offset(1)).all()
            check([tuple(r) for r in rows], [("m3", 103), ("m2", 102), ("m1", 101)],
                  "SELECT WHERE ORDER BY LIMIT OFFSET")
            check(c.execute(select(func.count()).select_from(items)).scalar(), 16, "count")
            check(c.execute(select(items.c.name).where(items.c.name.in_(["n2", "n3", "x"]))
                            .order_by(items.c.name)).scalars().all(), ["n2", "n3"], "IN")
            r = c.execute(items.update().where(items.c.qty >= 100)
                          .values(qty=items.c.qty + 1))
            check(r.rowcount, 5, "UPDATE rowcount")
            r = c.execute(items.delete().where(items.c.name.like("m%"))
                          .returning(items.c.qty))
            check(sorted(r.scalars().all()), [101, 102, 103, 104, 105], "DELETE RETURNING")
            c.commit()
            check(c.execute(select(func.sum(items.c.price))).scalar(),
                  decimal.Decimal("66.50"), "sum(numeric)")
            c.rollback()
    finally:
        md.drop_all(e)
        e.dispose()


@case
def core_queries():
    e = engine()
    md = sa.MetaData()
    dept = sa.Table("dept", md, sa.Column("id", sa.Integer, primary_key=True),
                    sa.Column("name", sa.String(30)))
    emp = sa.Table("emp", md, sa.Column("id", sa.Integer, primary_key=True),
                   sa.Column("dept_id", sa.ForeignKey("dept.id")),
                   sa.Column("salary", sa.Integer))
    try:
        md.create_all(e)
        with e.begin() as c:
            c.execute(dept.insert(), [{"id": 1, "name": "eng"}, {"id": 2, "name": "ops"},
                                      {"id": 3, "name": "empty"}])
            c.execute(emp.insert(), [{"id": i, "dept_id": 1 + i % 2, "salary": 100 * i}
                                     for i in range(1, 11)])
            q = (select(dept.c.name, func.count(emp.c.id).label("n"),
                        func.coalesce(func.sum(emp.c.salary), 0).label("total"))
                 .select_from(dept.outerjoin(emp)).group_by(dept.c.name)
                 .having(func.count(emp.c.id) >= 0).order_by(dept.c.name))
            check([tuple(r) for r in c.execute(q)],
                  [("empty", 0, 0), ("eng", 5, 3000), ("ops", 5, 2500)], "outer join GROUP BY")
            avg = select(func.avg(emp.c.salary)).scalar_subquery()
            check(c.execute(select(func.count()).where(emp.c.salary > avg)).scalar(), 5,
                  "scalar subquery")
            top = select(emp.c.dept_id, func.max(emp.c.salary).label("m")) \
                .group_by(emp.c.dept_id).cte("top")
            check(sorted(tuple(r) for r in c.execute(
                select(dept.c.name, top.c.m).join(top, top.c.dept_id == dept.c.id))),
                [("eng", 1000), ("ops", 900)], "CTE join")
            rank = func.row_number().over(partition_by=emp.c.dept_id,
                                          order_by=emp.c.salary.desc()).label("rk")
            sub = select(emp.c.id, rank).subquery()
            check(sorted(c.execute(select(sub.c.id).where(sub.c.rk == 1)).scalars().all()),
                  [9, 10], "window function in a subquery")
            check(c.execute(select(emp.c.id).where(emp.c.dept_id.in_(
                select(dept.c.id).where(dept.c.name == "ops"))).order_by(emp.c.id)
                .limit(2)).scalars().all(), [1, 3], "IN subquery")
            check(c.execute(select(sa.exists().where(emp.c.salary > 950))).scalar(), True,
                  "EXISTS")
            u = sa.union_all(select(dept.c.id), select(emp.c.id).where(emp.c.id < 3))
            check(sorted(c.execute(u).scalars().all()), [1, 1, 2, 2, 3], "UNION ALL")
            check(c.execute(select(sa.case((emp.c.salary > 500, "high"), else_="low"))
                            .where(emp.c.id == 7)).scalar(), "high", "CASE")
    finally:
        md.drop_all(e)
        e.dispose()


class Base(DeclarativeBase):
    pass


class Author(Base):
    __tablename__ = "authors"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(100), unique=True)
    born: Mapped[datetime.date | None]
    books: Mapped[list["Book"]] = relationship(back_populates="author",
                                               cascade="all, delete-orphan",
                                               order_by="Book.id")


class Book(Base):
    __tablename__ = "books"
    id: Mapped[int] = mapped_column(primary_key=True)
    title: Mapped[str] = mapped_column(sa.String(200))
    author_id: Mapped[int] = mapped_column(sa.ForeignKey("authors.id", ondelete="CASCADE"),
                                           index=True)
    pages: Mapped[int | None]
    author: Mapped[Author] = relationship(back_populates="books")
    tags: Mapped[list["Tag"]] = relationship(secondary="book_tags", order_by="Tag.name")


class Tag(Base):
    __tablename__ = "tags"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(30), unique=True)


book_tags = sa.Table(
    "book_tags", Base.metadata,
    sa.Column("book_id", sa.ForeignKey("books.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("tag_id", sa.ForeignKey("tags.id"), primary_key=True),
)


@case
def orm_crud():
    e = engine()
    try:
        Base.metadata.create_all(e)
        with Session(e) as s:
            a = Author(name="Le Guin", born=datetime.date(1929, 10, 21))
            s.add(a)
            s.commit()
            check(a.id, 1, "primary key after commit")
            # Several new objects: the ORM inserts them in one statement with RETURNING.
            s.add_all([Author(name=f"author {i}") for i in range(5)])
            s.flush()
            check(s.scalar(select(func.count(Author.id))), 6, "count after flush")
            s.commit()
            got = s.scalars(select(Author).where(Author.name.startswith("author"))
                            .order_by(Author.id.desc())).first()
            check(got.name, "author 4", "query")
            got.name = "renamed"
            s.commit()
            check(s.get(Author, got.id).name, "renamed", "UPDATE through the unit of work")
            s.execute(sa.update(Author).where(Author.name.like("author%"))
                      .values(born=datetime.date(2000, 1, 1)))
            s.delete(s.get(Author, 1))
            s.commit()
            check(s.scalar(select(func.count()).select_from(Author)
                           .where(Author.born == datetime.date(2000, 1, 1))), 4, "bulk UPDATE")
            check(s.get(Author, 1), None, "deleted")
            try:
                s.add(Author(name="renamed"))
                s.commit()
                raise AssertionError("duplicate name accepted")
            except exc.IntegrityError as err:
                check(type(err.orig).__name__, "UniqueViolation", "driver error")
                s.rollback()
            check(s.scalar(select(func.count(Author.id))), 5, "after rollback")
    finally:
        Base.metadata.drop_all(e)
        e.dispose()


@case
def orm_relationships():
    e = engine()
    try:
        Base.metadata.create_all(e)
        with Session(e) as s:
            fantasy, sf = Tag(name="fantasy"), Tag(name="sf")
            a = Author(name="A", books=[Book(title="one", pages=100, tags=[fantasy]),
                                        Book(title="two", pages=200, tags=[fantasy, sf])])
            b = Author(name="B", books=[Book(title="three", tags=[sf])])
            s.add_all([a, b])
            s.commit()
            s.expunge_all()
            # Lazy load, selectin load (WHERE ... IN), joined load (LEFT OUTER JOIN).
            a = s.scalars(select(Author).where(Author.name == "A")).one()
            check([bk.title for bk in a.books], ["one", "two"], "lazy load")
            authors = s.scalars(select(Author).options(selectinload(Author.books)
                                                       .selectinload(Book.tags))
                                .order_by(Author.name)).all()
            check([[(bk.title, [t.name for t in bk.tags]) for bk in x.books] for x in authors],
                  [[("one", ["fantasy"]), ("two", ["fantasy", "sf"])], [("three", ["sf"])]],
                  "selectinload")
            s.expunge_all()
            books = s.scalars(select(Book).options(joinedload(Book.author))
                              .order_by(Book.id)).all()
            check([(bk.title, bk.author.name) for bk in books],
                  [("one", "A"), ("two", "A"), ("three", "B")], "joinedload")
            rows = s.execute(select(Author.name, func.sum(Book.pages))
                             .join(Author.books).group_by(Author.name)
                             .order_by(Author.name)).all()
            check([tuple(r) for r in rows], [("A", 300), ("B", None)], "join + GROUP BY")
            check(s.scalars(select(Book.title).where(Book.tags.any(Tag.name == "sf"))
                            .order_by(Book.title)).all(), ["three", "two"], "any()")
            # delete-orphan: a book taken off the list is deleted.
            a = s.scalars(select(Author).where(Author.name == "A")).one()
            a.books.pop(0)
            s.commit()
            check(s.scalar(select(func.count(Book.id))), 2, "delete-orphan")
            s.delete(a)
            s.commit()
            check(s.scalars(select(Book.title)).all(), ["three"], "cascade delete")
            try:
                s.add(Book(title="orphan", author_id=999))
                s.commit()
                raise AssertionError("dangling foreign key accepted")
            except exc.IntegrityError as err:
                check(type(err.orig).__name__, "ForeignKeyViolation", "driver error")
                s.rollback()
    finally:
        Base.metadata.drop_all(e)
        e.dispose()


@case
def orm_savepoints():
    e = engine()
    try:
        Base.metadata.create_all(e)
        with Session(e) as s:
            s.add(Author(name="kept"))
            with s.begin_nested():
                s.add(Author(name="also kept"))
            try:
                with s.begin_nested():
                    s.add(Author(name="kept"))  # duplicate: only the savepoint rolls back
                    s.flush()
            except exc.IntegrityError:
                pass
            s.commit()
            check(s.scalars(select(Author.name).order_by(Author.name)).all(),
                  ["also kept", "kept"], "after savepoint rollback")
    finally:
        Base.metadata.drop_all(e)
        e.dispose()


@case
def metadata_create_all_drop_all():
    e = engine()
    md = sa.MetaData()
    parent = sa.Table("p", md, sa.Column("id", sa.Integer, primary_key=True),
                      sa.Column("code", sa.String(10), unique=True))
    sa.Table("c", md, sa.Column("id", sa.Integer, primary_key=True),
             sa.Column("p_id", sa.ForeignKey("p.id")),
             sa.Column("at", sa.DateTime(timezone=True), server_default=func.now()),
             sa.Index("c_p_at", "p_id", "at"))
    try:
        md.create_all(e)
        md.create_all(e)  # checkfirst: asks the catalog, creates nothing the second time
        insp = inspect(e)
        check(sorted(insp.get_table_names()), ["c", "p"], "tables after create_all")
        with e.begin() as c:
            c.execute(parent.insert().values(id=1, code="x"))
        md.drop_all(e)  # the child table first, for its foreign key
        check(inspect(e).get_table_names(), [], "tables after drop_all")
        md.drop_all(e)  # checkfirst again: nothing to drop
    finally:
        md.drop_all(e)
        e.dispose()


def reflection_schema(e):
    md = sa.MetaData()
    sa.Table("r_parent", md,
             sa.Column("id", sa.Integer, primary_key=True),
             sa.Column("code", sa.String(20), nullable=False),
             sa.Column("region", sa.String(10), nullable=False),
             sa.UniqueConstraint("code", "region", name="r_parent_code_region"))
    sa.Table("r_child", md,
             sa.Column("id", sa.BigInteger, primary_key=True),
             sa.Column("parent_id", sa.Integer,
                       sa.ForeignKey("r_parent.id", name="r_child_parent_fk",
                                     ondelete="CASCADE"), nullable=False),
             sa.Column("name", sa.String(40), server_default="anon"),
             sa.Column("amount", sa.Numeric(12, 3)),
             sa.Column("flag", sa.Boolean, nullable=False, server_default=sa.true()),
             sa.Column("created", sa.DateTime(timezone=True)),
             sa.Column("body", sa.Text),
             sa.Column("code", sa.String(20)),
             sa.Column("region", sa.String(10)),
             sa.ForeignKeyConstraint(["code", "region"], ["r_parent.code", "r_parent.region"],
                                     name="r_child_code_fk"),
             sa.UniqueConstraint("name", name="r_child_name_key"),
             sa.Index("r_child_created", "created"),
             sa.Index("r_child_parent_name", "parent_id", "name", unique=True))
    md.drop_all(e)
    md.create_all(e)
    return md


def with_reflection_schema(fn):
    def run():
        e = engine()
        md = None
        try:
            md = reflection_schema(e)
            fn(e, inspect(e))
        finally:
            if md is not None:
                md.drop_all(e)
            e.dispose()

    run.__name__ = fn.__name__
    return case(run)


@with_reflection_schema
def reflect_table_names(e, insp):
    check(sorted(insp.get_table_names()), ["r_child", "r_parent"], "get_table_names")
    check(insp.has_table("r_child"), True, "has_table")
    check(insp.has_table("nope"), False, "has_table of a missing table")
    check(insp.get_view_names(), [], "get_view_names")


@with_reflection_schema
def reflect_schema_names(e, insp):
    names = insp.get_schema_names()  # NOT LIKE 'pg/_%' ESCAPE '/'
    check(("public" in names, "pg_catalog" in names), (True, False), "get_schema_names")
    check(insp.has_schema("public"), True, "has_schema")


@with_reflection_schema
def reflect_get_columns(e, insp):
    cols = {c["name"]: c for c in insp.get_columns("r_child")}
    check(list(cols), ["id", "parent_id", "name", "amount", "flag", "created", "body", "code",
                       "region"], "column order")
    got = {n: (type(c["type"]).__name__, c["nullable"]) for n, c in cols.items()}
    check(got, {"id": ("BIGINT", False), "parent_id": ("INTEGER", False),
                "name": ("VARCHAR", True), "amount": ("NUMERIC", True),
                "flag": ("BOOLEAN", False), "created": ("TIMESTAMP", True),
                "body": ("TEXT", True), "code": ("VARCHAR", True),
                "region": ("VARCHAR", True)}, "types and nullability")
    check(cols["name"]["type"].length, 40, "varchar length")
    check((cols["amount"]["type"].precision, cols["amount"]["type"].scale), (12, 3),
          "numeric precision, scale")
    check(cols["created"]["type"].timezone, True, "timestamptz")
    check(cols["name"]["default"], "'anon'::character varying", "server default")
    check(cols["flag"]["default"], "true", "boolean default")
    if "nextval('r_child_id_seq'::regclass)" not in (cols["id"]["default"] or ""):
        raise AssertionError(f"bigserial default {cols['id']['default']!r}")
    check(cols["id"]["autoincrement"], True, "autoincrement")


@with_reflection_schema
def reflect_get_pk_constraint(e, insp):
    pk = insp.get_pk_constraint("r_child")
    check((pk["constrained_columns"], pk["name"]), (["id"], "r_child_pkey"), "primary key")
    check(insp.get_pk_constraint("r_parent")["constrained_columns"], ["id"], "parent")


@with_reflection_schema
def reflect_get_foreign_keys(e, insp):
    fks = sorted(insp.get_foreign_keys("r_child"), key=lambda f: f["name"])
    got = [(f["name"], f["constrained_columns"], f["referred_table"], f["referred_columns"],
            f["referred_schema"], f["options"]) for f in fks]
    check(got, [("r_child_code_fk", ["code", "region"], "r_parent", ["code", "region"], None,
                 {}),
                ("r_child_parent_fk", ["parent_id"], "r_parent", ["id"], None,
                 {"ondelete": "CASCADE"})], "foreign keys")
    check(insp.get_foreign_keys("r_parent"), [], "none on the parent")


@with_reflection_schema
def reflect_get_indexes(e, insp):
    idx = sorted(insp.get_indexes("r_child"), key=lambda i: i["name"])
    got = [(i["name"], i["column_names"], i["unique"]) for i in idx]
    # Indexes behind constraints are not listed (the unique one carries duplicates_constraint).
    check([g for g in got if g[0] != "r_child_name_key"],
          [("r_child_created", ["created"], False),
           ("r_child_parent_name", ["parent_id", "name"], True)], "indexes")


@with_reflection_schema
def reflect_get_unique_constraints(e, insp):
    got = sorted((u["name"], u["column_names"])
                 for u in insp.get_unique_constraints("r_child"))
    check(got, [("r_child_name_key", ["name"])], "child unique constraints")
    got = [(u["name"], u["column_names"]) for u in insp.get_unique_constraints("r_parent")]
    check(got, [("r_parent_code_region", ["code", "region"])], "two-column unique")


@with_reflection_schema
def reflect_table_autoload(e, insp):
    md = sa.MetaData()
    child = sa.Table("r_child", md, autoload_with=e)  # reflects r_parent through the FK too
    check(sorted(md.tables), ["r_child", "r_parent"], "tables reflected")
    check([c.name for c in child.primary_key], ["id"], "primary key")
    check(sorted(fk.target_fullname for fk in child.foreign_keys),
          ["r_parent.code", "r_parent.id", "r_parent.region"], "foreign keys")
    with e.begin() as c:
        c.execute(md.tables["r_parent"].insert().values(id=1, code="a", region="eu"))
        c.execute(child.insert().values(parent_id=1, amount=decimal.Decimal("1.5")))
        check(c.execute(select(child.c.name, child.c.flag)).one(), ("anon", True),
              "insert through the reflected table")


@case
def isolation_levels_execution_options():
    e = engine()
    try:
        for level, shown in (("READ COMMITTED", "read committed"),
                             ("REPEATABLE READ", "repeatable read")):
            with e.connect().execution_options(isolation_level=level) as c:
                check(c.execute(text("SHOW transaction_isolation")).scalar(), shown, level)
                check(c.get_isolation_level(), level, "get_isolation_level")
                c.commit()
        with e.connect() as c:
            check(c.get_isolation_level(), "READ COMMITTED", "back to the default on return")
        with e.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.execute(text("CREATE TABLE ac (id int PRIMARY KEY)"))
            c.execute(text("INSERT INTO ac VALUES (1)"))
            # no commit: AUTOCOMMIT keeps each statement
        with e.connect() as c:
            check(c.execute(text("SELECT count(*) FROM ac")).scalar(), 1, "AUTOCOMMIT")
            c.execute(text("DROP TABLE ac"))
            c.commit()
        ro = e.execution_options(postgresql_readonly=True)
        with ro.connect() as c:
            check(c.execute(text("SHOW transaction_read_only")).scalar(), "on", "readonly")
        rr = engine(isolation_level="REPEATABLE READ")
        try:
            with rr.connect() as c:
                check(c.execute(text("SHOW transaction_isolation")).scalar(),
                      "repeatable read", "create_engine(isolation_level=)")
        finally:
            rr.dispose()
    finally:
        e.dispose()


@case
def isolation_level_serializable():
    e = engine()
    try:
        with e.connect().execution_options(isolation_level="SERIALIZABLE") as c:
            check(c.execute(text("SHOW transaction_isolation")).scalar(), "serializable")
            c.commit()
        with e.connect().execution_options(isolation_level="SERIALIZABLE",
                                           postgresql_readonly=True,
                                           postgresql_deferrable=True) as c:
            check(c.execute(text("SHOW transaction_deferrable")).scalar(), "on", "deferrable")
    finally:
        e.dispose()


@case
def core_types():
    e = engine()
    md = sa.MetaData()
    t = sa.Table("typed", md,
                 sa.Column("id", sa.Integer, primary_key=True),
                 sa.Column("big", sa.BigInteger),
                 sa.Column("small", sa.SmallInteger),
                 sa.Column("num", sa.Numeric(20, 6)),
                 sa.Column("flt", sa.Float),
                 sa.Column("s", sa.String(30)),
                 sa.Column("txt", sa.Text),
                 sa.Column("ok", sa.Boolean),
                 sa.Column("d", sa.Date),
                 sa.Column("ts", sa.DateTime),
                 sa.Column("tstz", sa.DateTime(timezone=True)),
                 sa.Column("iv", sa.Interval),
                 sa.Column("bin", sa.LargeBinary),
                 sa.Column("u", sa.Uuid))
    value = {"id": 1, "big": 2 ** 62, "small": -3, "num": decimal.Decimal("12345.678901"),
             "flt": 0.25, "s": "ünïcode", "txt": "x" * 1000, "ok": False,
             "d": datetime.date(2024, 2, 29), "ts": datetime.datetime(2024, 1, 2, 3, 4, 5, 6),
             "tstz": datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
             "iv": datetime.timedelta(days=1, hours=2), "bin": b"\x00\xff",
             "u": uuid.UUID("12345678-1234-5678-1234-567812345678")}
    try:
        md.create_all(e)
        with e.begin() as c:
            c.execute(t.insert(), [value])
            check(dict(c.execute(select(t)).one()._mapping), value, "round trip")
            for col in ("num", "u", "tstz", "d", "s"):
                check(c.execute(select(t.c.id).where(t.c[col] == value[col])).scalar(), 1,
                      f"WHERE {col} = parameter")
    finally:
        md.drop_all(e)
        e.dispose()


@case
def json_types():
    e = engine()
    md = sa.MetaData()
    t = sa.Table("jt", md, sa.Column("id", sa.Integer, primary_key=True),
                 sa.Column("j", sa.JSON), sa.Column("jb", pg.JSONB))
    doc = {"a": 1, "b": [1, 2, {"c": None}], "s": "x"}
    try:
        md.create_all(e)
        with e.begin() as c:
            c.execute(t.insert().values(id=1, j=doc, jb=doc))
            check(tuple(c.execute(select(t.c.j, t.c.jb)).one()), (doc, doc), "round trip")
            check(c.execute(select(t.c.jb["s"].astext)).scalar(), "x", "->>")
            check(c.execute(select(t.c.id).where(t.c.jb.contains({"a": 1}))).scalar(), 1, "@>")
    finally:
        md.drop_all(e)
        e.dispose()


@case
def array_types():
    e = engine()
    md = sa.MetaData()
    t = sa.Table("at", md, sa.Column("id", sa.Integer, primary_key=True),
                 sa.Column("tags", pg.ARRAY(sa.String)), sa.Column("nums", pg.ARRAY(sa.Integer)))
    try:
        md.create_all(e)
        with e.begin() as c:
            c.execute(t.insert().values(id=1, tags=["a", "b"], nums=[1, 2, 3]))
            check(tuple(c.execute(select(t.c.tags, t.c.nums)).one()), (["a", "b"], [1, 2, 3]))
            check(c.execute(select(t.c.id).where(sa.any_(t.c.nums) == 2)).scalar(), 1, "ANY")
            check(c.execute(select(t.c.id).where(t.c.tags.contains(["b"]))).scalar(), 1, "@>")
    finally:
        md.drop_all(e)
        e.dispose()


@case
def native_enum_type():
    e = engine()
    md = sa.MetaData()
    t = sa.Table("en", md, sa.Column("id", sa.Integer, primary_key=True),
                 sa.Column("mood", sa.Enum("sad", "ok", "happy", name="mood")))
    try:
        md.create_all(e)  # CREATE TYPE mood AS ENUM first
        with e.begin() as c:
            c.execute(t.insert().values(id=1, mood="happy"))
            check(c.execute(select(t.c.mood)).scalar(), "happy")
    finally:
        md.drop_all(e)  # and DROP TYPE after the table
        e.dispose()


@case
def server_defaults_identity_sequences():
    e = engine()
    md = sa.MetaData()
    seq = sa.Sequence("order_no_seq", start=1000)
    t = sa.Table("orders", md,
                 sa.Column("id", sa.Integer, sa.Identity(), primary_key=True),
                 sa.Column("no", sa.Integer, seq, server_default=seq.next_value()),
                 sa.Column("at", sa.DateTime(timezone=True), server_default=func.now()),
                 sa.Column("status", sa.String(10), server_default="new"))
    try:
        md.create_all(e)
        with e.begin() as c:
            r = c.execute(t.insert().returning(t.c.id, t.c.no, t.c.status), [{}])
            check(tuple(r.one()), (1, 1000, "new"), "defaults")
            check(c.execute(seq.next_value()).scalar(), 1001, "nextval")
            check(c.execute(select(t.c.at)).scalar().tzinfo is not None, True, "now()")
        check("order_no_seq" in inspect(e).get_sequence_names(), True, "get_sequence_names")
    finally:
        md.drop_all(e)
        e.dispose()


@case
def upsert_on_conflict():
    e = engine()
    md = sa.MetaData()
    t = sa.Table("kv", md, sa.Column("k", sa.String(10), primary_key=True),
                 sa.Column("v", sa.Integer), sa.Column("n", sa.Integer, server_default="1"))
    try:
        md.create_all(e)
        with e.begin() as c:
            for v in (1, 2, 3):
                ins = pg.insert(t).values(k="a", v=v)
                c.execute(ins.on_conflict_do_update(
                    index_elements=[t.c.k], set_={"v": ins.excluded.v, "n": t.c.n + 1}))
            ins = pg.insert(t).values(k="a", v=99).on_conflict_do_nothing().returning(t.c.k)
            check(c.execute(ins).all(), [], "DO NOTHING RETURNING")
            check(tuple(c.execute(select(t.c.v, t.c.n)).one()), (3, 3), "after upserts")
    finally:
        md.drop_all(e)
        e.dispose()


@case
def stream_results_server_side_cursor():
    e = engine()
    try:
        with e.begin() as c:
            c.execute(text("CREATE TABLE big AS SELECT g AS id FROM generate_series(1, 3000) g"))
        with e.connect() as c:
            # A psycopg named cursor: DECLARE ... CURSOR, then FETCH FORWARD in batches.
            r = c.execution_options(stream_results=True, max_row_buffer=100).execute(
                text("SELECT id FROM big ORDER BY id"))
            total = sum(row.id for row in r)
            check(total, 3000 * 3001 // 2, "streamed rows")
            parts = list(c.execution_options(stream_results=True).execute(
                text("SELECT id FROM big")).partitions(500))
            check((len(parts), sum(len(p) for p in parts)), (6, 3000), "yield_per partitions")
    finally:
        with e.begin() as c:
            c.execute(text("DROP TABLE IF EXISTS big"))
        e.dispose()


@case
def pool_reuse_with_pre_ping():
    e = engine(pool_size=1, max_overflow=0, pool_pre_ping=True)
    try:
        with e.connect() as c:
            pid = c.execute(text("SELECT pg_backend_pid()")).scalar()
            c.execute(text("SET application_name = 'pooled'"))
            c.execute(text("CREATE TABLE pooled (id int PRIMARY KEY)"))
            c.execute(text("INSERT INTO pooled VALUES (1)"))
            # given back without a commit: the pool rolls back
        with e.connect() as c:  # pre-ping, then the same server connection
            check(c.execute(text("SELECT pg_backend_pid()")).scalar(), pid, "pooled connection")
            check(c.execute(text("SELECT to_regclass('pooled') IS NULL")).scalar(), True,
                  "rolled back on return")
    finally:
        e.dispose()


@case
def pool_pre_ping_replaces_a_dead_connection():
    e = engine(pool_size=1, max_overflow=0, pool_pre_ping=True)
    other = engine()
    try:
        with e.connect() as c:
            pid = c.execute(text("SELECT pg_backend_pid()")).scalar()
        # The pooled connection, idle in the pool, is ended by the server.
        with other.connect() as o:
            check(o.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar(), True,
                  "pg_terminate_backend")
            for _ in range(100):  # the backend ends a moment after the signal
                if not o.execute(text("SELECT count(*) FROM pg_stat_activity WHERE pid = :p"),
                                 {"p": pid}).scalar():
                    break
                time.sleep(0.05)
        with e.connect() as c:  # pre-ping fails, the pool connects again
            if c.execute(text("SELECT pg_backend_pid()")).scalar() == pid:
                raise AssertionError("the terminated connection was handed out again")
    finally:
        other.dispose()
        e.dispose()


MODELS_V1 = """
import sqlalchemy as sa
metadata = sa.MetaData()
sa.Table("accounts", metadata,
         sa.Column("id", sa.Integer, primary_key=True),
         sa.Column("email", sa.String(100), nullable=False, unique=True),
         sa.Column("score", sa.Integer, nullable=True))
sa.Table("posts", metadata,
         sa.Column("id", sa.Integer, primary_key=True),
         sa.Column("account_id", sa.ForeignKey("accounts.id"), nullable=False, index=True),
         sa.Column("title", sa.String(50)))
"""

# The second version: a column's type changes (alter_column type_), a column and an index are
# added.
MODELS_V2 = MODELS_V1.replace('sa.Column("score", sa.Integer, nullable=True)',
                              'sa.Column("score", sa.BigInteger, nullable=True),\n'
                              '         sa.Column("nick", sa.String(30))') \
    .replace('sa.Column("title", sa.String(50)))',
             'sa.Column("title", sa.String(200)),\n'
             '         sa.Index("posts_title", "title"))')

ENV_PY = """
from alembic import context
config = context.config
target_metadata = config.attributes["target_metadata"]
with config.attributes["engine"].connect() as connection:
    context.configure(connection=connection, target_metadata=target_metadata,
                      compare_type=True)
    with context.begin_transaction():
        context.run_migrations()
"""


def load_models(source):
    scope = {}
    exec(compile(source, "models.py", "exec"), scope)
    return scope["metadata"]


def alembic_config(tmp, e):
    """An Alembic environment in tmp, run against engine e: env.py takes the engine and the
    target metadata from Config.attributes; migrations run in one transaction, as usual on
    PostgreSQL."""
    from alembic.config import Config

    scripts = os.path.join(tmp, "migrations")
    os.makedirs(os.path.join(scripts, "versions"))
    with open(os.path.join(scripts, "env.py"), "w") as f:
        f.write(ENV_PY)
    cfg = Config()
    shutil.copy(os.path.join(cfg.get_template_directory(), "generic", "script.py.mako"),
                scripts)
    cfg.set_main_option("script_location", scripts)
    cfg.attributes["engine"] = e
    cfg.attributes["target_metadata"] = None
    return cfg


def drop_alembic_tables(e):
    with e.begin() as c:
        for t in ("posts", "accounts", "alembic_version"):
            c.execute(text(f"DROP TABLE IF EXISTS {t}"))


def column_types(e, table):
    """{column: (data_type, character_maximum_length)} from information_schema."""
    with e.connect() as c:
        return {r[0]: (r[1], r[2]) for r in c.execute(text(
            "SELECT column_name, data_type, character_maximum_length "
            "FROM information_schema.columns WHERE table_name = :t"), {"t": table})}


@case
def alembic_autogenerate_upgrade_downgrade():
    from alembic import command

    e = engine()
    tmp = tempfile.mkdtemp(prefix="shoal-alembic-")
    try:
        cfg = alembic_config(tmp, e)

        def revision(models, message):
            cfg.attributes["target_metadata"] = load_models(models)
            with contextlib.redirect_stdout(io.StringIO()):  # its "Generating ..." line
                script = command.revision(cfg, message=message, autogenerate=True)
            with open(script.path) as f:
                return script.revision, f.read()

        rev1, body1 = revision(MODELS_V1, "create")
        for op in ('op.create_table(\'accounts\'', 'op.create_table(\'posts\'',
                   "op.create_index(op.f('ix_posts_account_id')"):
            if op not in body1:
                raise AssertionError(f"first revision lacks {op}: {body1}")
        command.upgrade(cfg, "head")
        insp = inspect(e)
        check(sorted(insp.get_table_names()), ["accounts", "alembic_version", "posts"],
              "tables after the first upgrade")
        with e.begin() as c:
            check(c.execute(text("SELECT version_num FROM alembic_version")).scalar(), rev1,
                  "alembic_version")
            c.execute(text("INSERT INTO accounts (id, email, score) VALUES (1, 'a@x', 5)"))
            c.execute(text("INSERT INTO posts (id, account_id, title) VALUES (1, 1, 't')"))

        # Against the upgraded database, the second version's differences only.
        rev2, body2 = revision(MODELS_V2, "widen")
        for op in ("op.alter_column('accounts', 'score'", "type_=sa.BigInteger()",
                   "op.add_column('accounts', sa.Column('nick'",
                   "op.alter_column('posts', 'title'", "type_=sa.String(length=200)",
                   "op.create_index('posts_title'"):
            if op not in body2:
                raise AssertionError(f"second revision lacks {op}: {body2}")
        if "create_table" in body2:
            raise AssertionError(f"second revision creates tables again: {body2}")
        command.upgrade(cfg, "head")
        insp = inspect(e)
        cols = {c["name"]: c["type"] for c in insp.get_columns("accounts")}
        check((type(cols["score"]).__name__, "nick" in cols), ("BIGINT", True),
              "after the second upgrade")
        check(next(c["type"].length for c in insp.get_columns("posts") if c["name"] == "title"),
              200, "title widened")
        with e.connect() as c:
            check(c.execute(text("SELECT score FROM accounts")).scalar(), 5, "data kept")

        command.downgrade(cfg, "-1")
        insp = inspect(e)
        cols = {c["name"]: c["type"] for c in insp.get_columns("accounts")}
        check((type(cols["score"]).__name__, "nick" in cols), ("INTEGER", False),
              "after downgrade -1")
        check([i["name"] for i in insp.get_indexes("posts")], ["ix_posts_account_id"],
              "indexes after downgrade -1")
        command.downgrade(cfg, "base")
        check(inspect(e).get_table_names(), ["alembic_version"], "after downgrade to base")
        with e.connect() as c:
            check(c.execute(text("SELECT count(*) FROM alembic_version")).scalar(), 0,
                  "no version row")
        check(rev2 != rev1, True)
    finally:
        drop_alembic_tables(e)
        e.dispose()
        shutil.rmtree(tmp, ignore_errors=True)


# Two migrations as a person writes them, for alembic_handwritten_upgrade_downgrade: Alembic's
# operations (create_table, create_index, alter_column with type_, add_column, drop_*) without
# the reflection autogenerate needs.
HANDWRITTEN = {
    "a1": (None, """
    op.create_table("accounts",
                    sa.Column("id", sa.Integer, primary_key=True),
                    sa.Column("email", sa.String(100), nullable=False, unique=True),
                    sa.Column("score", sa.Integer))
    op.create_table("posts",
                    sa.Column("id", sa.Integer, primary_key=True),
                    sa.Column("account_id", sa.Integer, sa.ForeignKey("accounts.id"),
                              nullable=False),
                    sa.Column("title", sa.String(50)))
    op.create_index("ix_posts_account_id", "posts", ["account_id"])
""", """
    op.drop_index("ix_posts_account_id", table_name="posts")
    op.drop_table("posts")
    op.drop_table("accounts")
"""),
    "b2": ("a1", """
    op.alter_column("accounts", "score", existing_type=sa.Integer(), type_=sa.BigInteger())
    op.add_column("accounts", sa.Column("nick", sa.String(30)))
    op.alter_column("posts", "title", existing_type=sa.String(50), type_=sa.String(200))
    op.create_index("posts_title", "posts", ["title"])
""", """
    op.drop_index("posts_title", table_name="posts")
    op.alter_column("posts", "title", existing_type=sa.String(200), type_=sa.String(50))
    op.drop_column("accounts", "nick")
    op.alter_column("accounts", "score", existing_type=sa.BigInteger(), type_=sa.Integer())
"""),
}


@case
def alembic_handwritten_upgrade_downgrade():
    from alembic import command

    e = engine()
    tmp = tempfile.mkdtemp(prefix="shoal-alembic-")
    try:
        cfg = alembic_config(tmp, e)
        for rev, (down, upgrade, downgrade) in HANDWRITTEN.items():
            with open(os.path.join(tmp, "migrations", "versions", f"{rev}.py"), "w") as f:
                f.write(f"from alembic import op\nimport sqlalchemy as sa\n"
                        f"revision = {rev!r}\ndown_revision = {down!r}\n"
                        f"branch_labels = None\ndepends_on = None\n\n"
                        f"def upgrade():{upgrade}\n\ndef downgrade():{downgrade}\n")
        command.upgrade(cfg, "a1")
        with e.begin() as c:
            c.execute(text("INSERT INTO accounts (id, email, score) VALUES (1, 'a@x', 5)"))
            c.execute(text("INSERT INTO posts (id, account_id, title) VALUES (1, 1, 't')"))
        command.upgrade(cfg, "head")
        with e.connect() as c:
            check(c.execute(text("SELECT version_num FROM alembic_version")).scalar(), "b2",
                  "alembic_version")
            check(tuple(c.execute(text("SELECT score, nick FROM accounts")).one()), (5, None),
                  "data kept")
        check(column_types(e, "accounts")["score"], ("bigint", None), "score widened")
        check(column_types(e, "posts")["title"], ("character varying", 200), "title widened")
        command.downgrade(cfg, "a1")
        check(column_types(e, "accounts"), {"id": ("integer", None),
                                            "email": ("character varying", 100),
                                            "score": ("integer", None)}, "after downgrade")
        command.downgrade(cfg, "base")
        with e.connect() as c:
            check(tuple(c.execute(text("SELECT to_regclass('accounts'), to_regclass('posts'), "
                                       "(SELECT count(*) FROM alembic_version)")).one()),
                  (None, None, 0), "after downgrade to base")
    finally:
        drop_alembic_tables(e)
        e.dispose()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    run_cases(CASES)


if __name__ == "__main__":
    main()
