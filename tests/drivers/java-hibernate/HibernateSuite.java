import java.io.PrintWriter;
import java.io.StringWriter;
import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.logging.Level;
import java.util.logging.Logger;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import jakarta.persistence.EntityGraph;
import jakarta.persistence.LockModeType;
import jakarta.persistence.OptimisticLockException;
import jakarta.persistence.Tuple;
import jakarta.persistence.criteria.CriteriaBuilder;
import jakarta.persistence.criteria.CriteriaDelete;
import jakarta.persistence.criteria.CriteriaQuery;
import jakarta.persistence.criteria.CriteriaUpdate;
import jakarta.persistence.criteria.Join;
import jakarta.persistence.criteria.ParameterExpression;
import jakarta.persistence.criteria.Root;
import jakarta.persistence.criteria.Subquery;

import org.hibernate.Hibernate;
import org.hibernate.LazyInitializationException;
import org.hibernate.ScrollMode;
import org.hibernate.ScrollableResults;
import org.hibernate.Session;
import org.hibernate.SessionFactory;
import org.hibernate.StatelessSession;
import org.hibernate.Transaction;
import org.hibernate.exception.ConstraintViolationException;
import org.hibernate.jpa.HibernatePersistenceConfiguration;
import org.hibernate.resource.jdbc.spi.StatementInspector;
import org.hibernate.stat.Statistics;
import org.hibernate.tool.schema.Action;

/**
 * What applications do with Hibernate ORM 7 (JPA 3.2) over the PostgreSQL JDBC driver, case by
 * case; see tests/drivers/run.py for the output protocol ("ok CASE" / "not ok CASE: MESSAGE").
 * Hibernate is bootstrapped programmatically from the libpq environment variables, one
 * SessionFactory per case with only the entities that case uses (hbm2ddl create drops and
 * recreates their tables), so one failure does not spill into the next case. What a case checks
 * in the database it reads with plain JDBC. The entities are in Entities.java.
 */
public final class HibernateSuite {

  /** Seconds one case may take before it counts as hung (the suite then goes on). */
  private static final int CASE_TIMEOUT_S = 90;

  private static boolean verbose;

  interface Body {
    void run() throws Exception;
  }

  private static final Map<String, Body> CASES = new LinkedHashMap<>();

  private static void kase(String name, Body body) {
    CASES.put(name, body);
  }

  // ---------------------------------------------------------------- helpers

  static String env(String name, String fallback) {
    String v = System.getenv(name);
    return v == null || v.isEmpty() ? fallback : v;
  }

  /** The JDBC URL; socketTimeout bounds every wait for the server. */
  static String url(String... extra) {
    StringBuilder u = new StringBuilder("jdbc:postgresql://" + env("PGHOST", "127.0.0.1") + ":"
        + env("PGPORT", "5432") + "/" + env("PGDATABASE", "postgres")
        + "?sslmode=" + env("PGSSLMODE", "disable")
        + "&connectTimeout=10&loginTimeout=10&socketTimeout=30");
    for (String e : extra) {
      u.append('&').append(e);
    }
    return u.toString();
  }

  /** Records the SQL Hibernate prepares (a StatementInspector sees each statement once). */
  static final class SqlLog implements StatementInspector {
    final List<String> sql = new CopyOnWriteArrayList<>();

    @Override
    public String inspect(String s) {
      sql.add(s);
      return s;
    }

    void clear() {
      sql.clear();
    }

    int size() {
      return sql.size();
    }

    List<String> matching(String prefix) {
      return sql.stream().filter(s -> s.startsWith(prefix)).collect(Collectors.toList());
    }
  }

  /** Options of a SessionFactory beyond the entities and the hbm2ddl action. */
  static final class Opts {
    final Map<String, Object> props = new LinkedHashMap<>();
    SqlLog log;
    String[] urlExtra = new String[0];
    boolean detectDialect;

    Opts detectDialect() {
      detectDialect = true;
      return this;
    }

    Opts set(String k, Object v) {
      props.put(k, v);
      return this;
    }

    Opts log(SqlLog l) {
      log = l;
      return this;
    }

    Opts url(String... extra) {
      urlExtra = extra;
      return this;
    }
  }

  static Opts opts() {
    return new Opts();
  }

  static SessionFactory factory(Action action, Class<?>... entities) {
    return factory(action, opts(), entities);
  }

  /** A SessionFactory for these entities; Hibernate finds the dialect and version itself. */
  static SessionFactory factory(Action action, Opts o, Class<?>... entities) {
    HibernatePersistenceConfiguration cfg = new HibernatePersistenceConfiguration("shoal-suite")
        .managedClasses(entities)
        .jdbcUrl(url(o.urlExtra))
        .jdbcUsername(env("PGUSER", "postgres"))
        .jdbcPoolSize(4)
        .schemaToolingAction(action)
        .showSql(verbose, false, false)
        .property("hibernate.hbm2ddl.halt_on_error", "true")
        // snake_case names, as Spring Boot applications get them.
        .property("hibernate.physical_naming_strategy",
            "org.hibernate.boot.model.naming.CamelCaseToUnderscoresNamingStrategy");
    String password = System.getenv("PGPASSWORD");
    if (password != null) {
      cfg.jdbcPassword(password);
    }
    if (!o.detectDialect) {
      // Named, as many applications do (Spring Boot's spring.jpa.database-platform). Hibernate
      // still reads the JDBC metadata (for the server version, keywords, ...); the case
      // dialect_detected_from_jdbc_metadata bootstraps without it.
      cfg.property("hibernate.dialect", "org.hibernate.dialect.PostgreSQLDialect");
    }
    if (o.log != null) {
      cfg.statementInspector(o.log);
    }
    o.props.forEach(cfg::property);
    return cfg.createEntityManagerFactory();
  }

  /** A plain JDBC connection in autocommit mode, to check what Hibernate left in the database. */
  static Connection connect() throws SQLException {
    Properties p = new Properties();
    p.setProperty("user", env("PGUSER", "postgres"));
    String password = System.getenv("PGPASSWORD");
    if (password != null) {
      p.setProperty("password", password);
    }
    return DriverManager.getConnection(url(), p);
  }

  static void exec(String sql) throws SQLException {
    try (Connection c = connect(); Statement st = c.createStatement()) {
      st.execute(sql);
    }
  }

  static List<List<Object>> rows(String sql, Object... params) throws SQLException {
    try (Connection c = connect(); PreparedStatement ps = c.prepareStatement(sql)) {
      for (int i = 0; i < params.length; i++) {
        ps.setObject(i + 1, params[i]);
      }
      try (ResultSet rs = ps.executeQuery()) {
        List<List<Object>> out = new ArrayList<>();
        int n = rs.getMetaData().getColumnCount();
        while (rs.next()) {
          List<Object> row = new ArrayList<>();
          for (int i = 1; i <= n; i++) {
            row.add(rs.getObject(i));
          }
          out.add(row);
        }
        return out;
      }
    }
  }

  static Object one(String sql, Object... params) throws SQLException {
    List<List<Object>> r = rows(sql, params);
    if (r.size() != 1 || r.get(0).size() != 1) {
      throw new CheckFailed(sql + ": want one value, got " + r);
    }
    return r.get(0).get(0);
  }

  static long count(String sql, Object... params) throws SQLException {
    return ((Number) one(sql, params)).longValue();
  }

  /** The first column of each row. */
  static List<Object> column(String sql, Object... params) throws SQLException {
    return rows(sql, params).stream().map(r -> r.get(0)).collect(Collectors.toList());
  }

  /** Columns of a table as "name type nullable", type from information_schema. */
  static List<String> describe(String table) throws SQLException {
    List<String> out = new ArrayList<>();
    for (List<Object> r : rows("SELECT column_name, data_type, character_maximum_length, "
        + "numeric_precision, numeric_scale, is_nullable FROM information_schema.columns "
        + "WHERE table_schema = 'public' AND table_name = ? ORDER BY column_name", table)) {
      String type = (String) r.get(1);
      if (r.get(2) != null) {
        type += "(" + r.get(2) + ")";
      } else if (type.equals("numeric") && r.get(3) != null) {
        type += "(" + r.get(3) + "," + r.get(4) + ")";
      }
      out.add(r.get(0) + " " + type + ("YES".equals(r.get(5)) ? " null" : " not null"));
    }
    return out;
  }

  static List<Object> row(Object... values) {
    return Arrays.asList(values);
  }

  /**
   * A failed check. A RuntimeException, not an AssertionError, so that Hibernate's
   * inTransaction rolls the transaction back before the session closes (an Error would leave the
   * connection in an open transaction that holds its locks).
   */
  static final class CheckFailed extends RuntimeException {
    CheckFailed(String message) {
      super(message);
    }

    CheckFailed(String message, Throwable cause) {
      super(message, cause);
    }
  }

  static void check(Object got, Object want, String what) {
    if (!Objects.deepEquals(got, want)) {
      throw new CheckFailed(what + ": got " + show(got) + ", want " + show(want));
    }
  }

  static void checkTrue(boolean condition, String what) {
    if (!condition) {
      throw new CheckFailed(what);
    }
  }

  static String show(Object o) {
    if (o instanceof byte[]) {
      return "bytes" + Arrays.toString((byte[]) o);
    }
    if (o instanceof Object[]) {
      return show(Arrays.asList((Object[]) o));
    }
    if (o instanceof List) {
      return ((List<?>) o).stream().map(HibernateSuite::show)
          .collect(Collectors.joining(", ", "[", "]"));
    }
    if (o instanceof int[]) {
      return Arrays.toString((int[]) o);
    }
    if (o instanceof String) {
      return "'" + o + "'";
    }
    return o == null ? "null" : o + " (" + o.getClass().getSimpleName() + ")";
  }

  static BigDecimal dec(String s) {
    return new BigDecimal(s);
  }

  /** Runs body, which must throw; returns the first exception of the given class in the chain. */
  static <T extends Throwable> T expect(Class<T> type, String what, Body body) throws Exception {
    try {
      body.run();
    } catch (Throwable t) {
      for (Throwable c = t; c != null; c = c.getCause()) {
        if (type.isInstance(c)) {
          return type.cast(c);
        }
      }
      throw new CheckFailed(what + ": want " + type.getSimpleName() + ", got " + t, t);
    }
    throw new CheckFailed(what + ": succeeded, want " + type.getSimpleName());
  }

  static SQLException sqlCause(Throwable t) {
    for (Throwable c = t; c != null; c = c.getCause()) {
      if (c instanceof SQLException) {
        return (SQLException) c;
      }
    }
    return null;
  }

  /** Four authors with ten books between them, and one author without books. */
  static void seedLibrary(SessionFactory sf) {
    sf.inTransaction(s -> {
      Entities.Author ada = new Entities.Author("Ada Lovelace", "UK");
      ada.addBook("Notes on the Engine", "isbn-01", "12.50", 1843);
      ada.addBook("Poetical Science", "isbn-02", "30.00", 1844);
      Entities.Author alan = new Entities.Author("Alan Turing", "UK");
      alan.addBook("Computing Machinery", "isbn-03", "45.00", 1950);
      alan.addBook("On Computable Numbers", "isbn-04", "20.00", 1936);
      alan.addBook("Morphogenesis", "isbn-05", "15.75", 1952);
      Entities.Author grace = new Entities.Author("Grace Hopper", "US");
      grace.addBook("Compilers", "isbn-06", "60.00", 1952);
      grace.addBook("COBOL Manual", "isbn-07", "25.25", 1959);
      Entities.Author edsger = new Entities.Author("Edsger Dijkstra", "NL");
      edsger.addBook("Goto Considered Harmful", "isbn-08", "5.00", 1968);
      edsger.addBook("Discipline of Programming", "isbn-09", "48.90", 1976);
      edsger.addBook("Shortest Paths", "isbn-10", "33.30", 1959);
      Entities.Author nobody = new Entities.Author("Nobody", null);
      for (Entities.Author a : List.of(ada, alan, grace, edsger, nobody)) {
        s.persist(a);
      }
    });
  }

  static final Class<?>[] LIBRARY = {
      Entities.Author.class, Entities.Book.class, Entities.Tag.class};

  static Entities.Item sampleItem() {
    Entities.Item it = new Entities.Item();
    it.name = "Straße ☃ ünïcödé";
    it.quantity = -7;
    it.views = 9_000_000_000L;
    it.price = dec("12345.675");
    it.ratio = 1.0 / 3.0;
    it.active = true;
    it.releasedOn = LocalDate.of(2024, 2, 29);
    it.createdAt = LocalDateTime.of(2024, 3, 10, 2, 30, 0, 123_456_000);
    it.updatedAt = OffsetDateTime.of(2024, 6, 30, 23, 30, 0, 654_321_000, ZoneOffset.ofHours(2));
    it.seenAt = Instant.parse("1999-12-31T23:59:59.999999Z");
    it.token = UUID.fromString("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
    it.payload = new byte[] {0, 1, 2, 127, -128, -1};
    it.status = Entities.Status.ACTIVE;
    it.notes = "long text ".repeat(2000);
    Map<String, Object> nested = new LinkedHashMap<>();
    nested.put("ok", true);
    nested.put("list", List.of(1, 2, 3));
    Map<String, Object> attrs = new LinkedHashMap<>();
    attrs.put("name", "widget");
    attrs.put("n", 42);
    attrs.put("nested", nested);
    it.attrs = attrs;
    return it;
  }

  // ---------------------------------------------------------------- cases

  static {
    // ---- bootstrap and schema management

    kase("dialect_detected_from_jdbc_metadata", () -> {
      try (SessionFactory sf = factory(Action.CREATE, opts().detectDialect(),
          Entities.Account.class)) {
        org.hibernate.engine.jdbc.spi.JdbcServices jdbc =
            sf.unwrap(org.hibernate.engine.spi.SessionFactoryImplementor.class)
                .getJdbcServices();
        org.hibernate.dialect.Dialect dialect = jdbc.getDialect();
        check(dialect.getClass().getName(), "org.hibernate.dialect.PostgreSQLDialect",
            "dialect");
        check(dialect.getVersion().getMajor(), 15, "server major version");
        org.hibernate.engine.jdbc.env.spi.ExtractedDatabaseMetaData md =
            jdbc.getJdbcEnvironment().getExtractedDatabaseMetaData();
        check(md.getConnectionCatalogName(), env("PGDATABASE", "postgres"), "catalog");
        check(md.getConnectionSchemaName(), "public", "schema");
        checkTrue(md.supportsScrollableResults(), "scrollable result sets");
        checkTrue(md.supportsGetGeneratedKeys(), "getGeneratedKeys");
        checkTrue(md.supportsBatchUpdates(), "batch updates");
        sf.inTransaction(s -> s.persist(new Entities.Account("m@example.com", "M", "1.00")));
        check(count("SELECT count(*) FROM hb_account"), 1L, "a row through the factory");
      }
    });


    kase("schema_create_ddl", () -> {
      Class<?>[] all = {Entities.Item.class, Entities.Author.class, Entities.Book.class,
          Entities.Tag.class};
      try (SessionFactory sf = factory(Action.CREATE, all)) {
        check(column("SELECT table_name::text FROM information_schema.tables "
            + "WHERE table_schema = 'public' AND table_name IN ('hb_item', 'hb_author', "
            + "'hb_book', 'hb_tag', 'hb_book_tag') ORDER BY 1"),
            row("hb_author", "hb_book", "hb_book_tag", "hb_item", "hb_tag"), "tables");
        check(describe("hb_item"), List.of(
            "active boolean not null",
            "attrs jsonb null",
            "created_at timestamp without time zone null",
            "id bigint not null",
            "name character varying(80) not null",
            "notes text null",
            "payload bytea null",
            "price numeric(12,2) null",
            "quantity integer not null",
            "ratio double precision not null",
            "released_on date null",
            "seen_at timestamp with time zone null",
            "status character varying(16) null",
            "token uuid null",
            "updated_at timestamp with time zone null",
            "views bigint not null"), "hb_item columns");
        check(describe("hb_book"), List.of(
            "author_id bigint not null",
            "id bigint not null",
            "isbn character varying(17) null",
            "price numeric(8,2) null",
            "published date null",
            "title character varying(255) not null",
            "version integer not null"), "hb_book columns");
        check(rows("SELECT is_identity, identity_generation FROM information_schema.columns "
            + "WHERE table_name = 'hb_book' AND column_name = 'id'"),
            List.of(row("YES", "BY DEFAULT")), "hb_book.id is an identity column");
        check(rows("SELECT sequence_name::text, data_type::text, start_value::text, "
            + "increment::text FROM information_schema.sequences "
            + "WHERE sequence_schema = 'public' AND sequence_name IN ('hb_author_seq', "
            + "'hb_item_seq', 'hb_tag_seq', 'hb_book_id_seq') ORDER BY 1"),
            List.of(row("hb_author_seq", "bigint", "1", "50"),
                row("hb_item_seq", "bigint", "1", "50"),
                row("hb_tag_seq", "bigint", "1", "50")), "sequences (not the identity's)");
        check(rows("SELECT tc.table_name::text, tc.constraint_name::text, "
            + "tc.constraint_type::text, string_agg(k.column_name::text, ',' "
            + "ORDER BY k.ordinal_position) FROM information_schema.table_constraints tc "
            + "JOIN information_schema.key_column_usage k "
            + "ON k.constraint_name = tc.constraint_name AND k.table_name = tc.table_name "
            + "WHERE tc.table_schema = 'public' AND tc.table_name IN ('hb_book', 'hb_book_tag', "
            + "'hb_tag') AND tc.constraint_type IN ('PRIMARY KEY', 'UNIQUE', 'FOREIGN KEY') "
            + "GROUP BY 1, 2, 3 ORDER BY 1, 3, 4"),
            List.of(
                row("hb_book", "fk_hb_book_author", "FOREIGN KEY", "author_id"),
                row("hb_book", "hb_book_pkey", "PRIMARY KEY", "id"),
                row("hb_book", "uk_hb_book_isbn", "UNIQUE", "isbn"),
                row("hb_book_tag", "fk_hb_book_tag_book", "FOREIGN KEY", "book_id"),
                row("hb_book_tag", "fk_hb_book_tag_tag", "FOREIGN KEY", "tag_id"),
                row("hb_book_tag", "hb_book_tag_pkey", "PRIMARY KEY", "book_id,tag_id"),
                row("hb_tag", "hb_tag_pkey", "PRIMARY KEY", "id"),
                row("hb_tag", "hb_tag_label_key", "UNIQUE", "label")), "constraints");
        // The enum column got a CHECK constraint listing the constants.
        SQLException e = expect(SQLException.class, "status outside the enum", () ->
            exec("INSERT INTO hb_item (id, name, quantity, views, ratio, active, status) "
                + "VALUES (1000, 'x', 0, 0, 0, false, 'BOGUS')"));
        check(e.getSQLState(), "23514", "check violation SQLSTATE");
        checkTrue(e.getMessage().contains("hb_item_status_check"),
            "check constraint name in: " + e.getMessage());
      }
    });

    kase("schema_update_adds_columns_and_tables", () -> {
      try (SessionFactory sf = factory(Action.CREATE, Entities.EvolveV1.class)) {
        sf.inTransaction(s -> {
          for (long id = 1; id <= 2; id++) {
            Entities.EvolveV1 e = new Entities.EvolveV1();
            e.id = id;
            e.name = id == 1 ? "one" : "two";
            s.persist(e);
          }
        });
      }
      // The next release: update reads the database's metadata and adds what is missing.
      try (SessionFactory sf = factory(Action.UPDATE, Entities.EvolveV2.class,
          Entities.EvolveNote.class)) {
        sf.inTransaction(s -> {
          Entities.EvolveV2 e = s.find(Entities.EvolveV2.class, 1L);
          check(e.name, "one", "row from before the update");
          e.nickname = "uno";
          e.score = dec("9.8765");
          Entities.EvolveNote n = new Entities.EvolveNote();
          n.evolve = e;
          n.created = LocalDateTime.of(2025, 1, 2, 3, 4, 5);
          n.body = "first note";
          s.persist(n);
        });
      }
      check(describe("hb_evolve"), List.of(
          "id bigint not null",
          "name character varying(50) not null",
          "nickname character varying(40) null",
          "score numeric(10,3) null"), "hb_evolve after update");
      check(describe("hb_evolve_note"), List.of(
          "body character varying(200) null",
          "created timestamp without time zone null",
          "evolve_id bigint not null",
          "id bigint not null"), "hb_evolve_note created by update");
      check(rows("SELECT id, name, nickname, score FROM hb_evolve ORDER BY id"), List.of(
          row(1L, "one", "uno", dec("9.877")), row(2L, "two", null, null)), "hb_evolve rows");
      check(column("SELECT indexname::text FROM pg_indexes WHERE tablename IN ('hb_evolve', "
          + "'hb_evolve_note') ORDER BY 1"), row("hb_evolve_note_pkey", "hb_evolve_pkey",
          "ix_hb_evolve_nickname", "ix_hb_evolve_note_created"), "indexes");
      check(rows("SELECT constraint_name::text, unique_constraint_name::text "
          + "FROM information_schema.referential_constraints "
          + "WHERE constraint_name = 'fk_hb_evolve_note_evolve'"),
          List.of(row("fk_hb_evolve_note_evolve", "hb_evolve_pkey")), "foreign key");
      // A second update finds nothing to do: the script it would run is empty.
      StringWriter script = new StringWriter();
      try (SessionFactory sf = factory(Action.NONE, opts()
              .set("jakarta.persistence.schema-generation.scripts.action", "update")
              .set("jakarta.persistence.schema-generation.scripts.create-target", script),
          Entities.EvolveV2.class, Entities.EvolveNote.class)) {
        check(script.toString().trim(), "", "DDL of a second update");
      }
    });

    kase("schema_validate", () -> {
      Class<?>[] current = {Entities.EvolveV2.class, Entities.EvolveNote.class,
          Entities.Author.class, Entities.Book.class, Entities.Tag.class};
      try (SessionFactory sf = factory(Action.CREATE, current)) {
        check(count("SELECT count(*) FROM hb_evolve"), 0L, "empty hb_evolve");
      }
      try (SessionFactory sf = factory(Action.VALIDATE, current)) {
        sf.inTransaction(s -> check(s.createSelectionQuery("select count(*) from Tag",
            Long.class).getSingleResult(), 0L, "query after validate"));
      }
      Exception missing = expect(org.hibernate.tool.schema.spi.SchemaManagementException.class,
          "validate with a column the table lacks",
          () -> factory(Action.VALIDATE, Entities.EvolveMissingColumn.class).close());
      check(missing.getMessage(), "Schema validation: missing column [rank] in table [hb_evolve]",
          "missing column");
      Exception wrong = expect(org.hibernate.tool.schema.spi.SchemaManagementException.class,
          "validate with a column of another type",
          () -> factory(Action.VALIDATE, Entities.EvolveWrongType.class).close());
      check(wrong.getMessage(), "Schema validation: wrong column type encountered in column "
          + "[score] in table [hb_evolve]; found [numeric (Types#NUMERIC)], but expecting "
          + "[integer (Types#INTEGER)]", "wrong type");
      exec("DROP SEQUENCE hb_tag_seq");
      Exception noSeq = expect(org.hibernate.tool.schema.spi.SchemaManagementException.class,
          "validate without the sequence", () -> factory(Action.VALIDATE, current).close());
      check(noSeq.getMessage(), "Schema validation: missing sequence [hb_tag_seq]",
          "missing sequence");
    });

    // ---- identifiers

    kase("sequence_pooled_ids", () -> {
      try (SessionFactory sf = factory(Action.CREATE, Entities.Reading.class)) {
        List<Long> ids = sf.fromTransaction(s -> {
          List<Long> out = new ArrayList<>();
          for (int i = 0; i < 55; i++) {
            Entities.Reading r = new Entities.Reading("s" + i, i, null);
            s.persist(r);
            out.add(r.id);
          }
          return out;
        });
        check(ids.get(0), 1L, "first id");
        check(ids.get(49), 50L, "50th id");
        check(ids.get(54), 55L, "55th id");
        // The pooled optimizer called nextval twice at first (1, then 51) and once more at 51.
        check(rows("SELECT last_value, is_called FROM hb_reading_seq"), List.of(row(101L, true)),
            "sequence state");
      }
      // A restarted application takes the block below its first nextval (151): 102..151.
      try (SessionFactory sf = factory(Action.NONE, Entities.Reading.class)) {
        long id = sf.fromTransaction(s -> {
          Entities.Reading r = new Entities.Reading("after restart", 0, null);
          s.persist(r);
          return r.id;
        });
        check(id, 102L, "id after restart");
        check(count("SELECT last_value FROM hb_reading_seq"), 151L, "sequence after restart");
        check(count("SELECT count(*) FROM hb_reading"), 56L, "rows");
      }
    });

    kase("identity_ids", () -> {
      try (SessionFactory sf = factory(Action.CREATE, Entities.Person.class)) {
        sf.inTransaction(s -> {
          for (String n : List.of("ann", "bob", "cy")) {
            Entities.Person p = new Entities.Person();
            p.name = n;
            s.persist(p);
            // IDENTITY: the row is inserted at persist, so the id is known before the flush.
            checkTrue(p.id != null, "id after persist of " + n);
          }
        });
        check(rows("SELECT id, name FROM hb_person ORDER BY id"),
            List.of(row(1L, "ann"), row(2L, "bob"), row(3L, "cy")), "rows");
        exec("INSERT INTO hb_person (name) VALUES ('from sql')");
        long id = sf.fromTransaction(s -> {
          Entities.Person p = new Entities.Person();
          p.name = "dee";
          s.persist(p);
          return p.id;
        });
        check(id, 5L, "id after an insert outside Hibernate");
      }
    });

    // ---- types

    kase("types_round_trip", () -> {
      try (SessionFactory sf = factory(Action.CREATE, Entities.Item.class)) {
        Entities.Item sent = sampleItem();
        long id = sf.fromTransaction(s -> {
          s.persist(sent);
          return sent.id;
        });
        Entities.Item got = sf.fromTransaction(s -> s.find(Entities.Item.class, id));
        check(got.name, sent.name, "String");
        check(got.quantity, -7, "int");
        check(got.views, 9_000_000_000L, "long");
        check(got.price, dec("12345.68"), "BigDecimal rounded to scale 2");
        check(got.ratio, 1.0 / 3.0, "double");
        check(got.active, true, "boolean");
        check(got.releasedOn, LocalDate.of(2024, 2, 29), "LocalDate");
        check(got.createdAt, sent.createdAt, "LocalDateTime");
        check(got.updatedAt, OffsetDateTime.of(2024, 6, 30, 21, 30, 0, 654_321_000,
            ZoneOffset.UTC), "OffsetDateTime (normalized to UTC)");
        check(got.seenAt, sent.seenAt, "Instant");
        check(got.token, sent.token, "UUID");
        check(got.payload, sent.payload, "byte[]");
        check(got.status, Entities.Status.ACTIVE, "enum");
        check(got.notes, sent.notes, "@Lob String");
        check(got.attrs, Map.of("name", "widget", "n", 42,
            "nested", Map.of("ok", true, "list", List.of(1, 2, 3))), "json Map");
        // What the server stored, as text.
        check(rows("SELECT price::text, created_at::text, updated_at::text, seen_at::text, "
            + "token::text, encode(payload, 'hex'), status, attrs::text FROM hb_item"),
            List.of(row("12345.68", "2024-03-10 02:30:00.123456", "2024-06-30 21:30:00.654321+00",
                "1999-12-31 23:59:59.999999+00", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
                "0001027f80ff", "ACTIVE",
                "{\"n\": 42, \"name\": \"widget\", \"nested\": {\"ok\": true, "
                    + "\"list\": [1, 2, 3]}}")), "stored text");
        // Every value works as a query parameter too.
        long n = sf.fromTransaction(s -> s.createSelectionQuery("select count(*) from Item i "
            + "where i.name = :name and i.views = :views and i.price = :price "
            + "and i.releasedOn = :d and i.createdAt = :ldt and i.updatedAt = :odt "
            + "and i.seenAt = :inst and i.token = :uuid and i.payload = :bytes "
            + "and i.status = :status and i.active = :active", Long.class)
            .setParameter("name", sent.name).setParameter("views", 9_000_000_000L)
            .setParameter("price", dec("12345.68")).setParameter("d", sent.releasedOn)
            .setParameter("ldt", sent.createdAt).setParameter("odt", sent.updatedAt)
            .setParameter("inst", sent.seenAt).setParameter("uuid", sent.token)
            .setParameter("bytes", sent.payload).setParameter("status", Entities.Status.ACTIVE)
            .setParameter("active", true).getSingleResult());
        check(n, 1L, "count by every value");
        // Nulls round-trip as nulls.
        long nullId = sf.fromTransaction(s -> {
          Entities.Item empty = new Entities.Item();
          empty.name = "nulls";
          s.persist(empty);
          return empty.id;
        });
        Entities.Item nulls = sf.fromTransaction(s -> s.find(Entities.Item.class, nullId));
        check(Arrays.asList(nulls.price, nulls.releasedOn, nulls.createdAt, nulls.updatedAt,
            nulls.seenAt, nulls.token, nulls.payload, nulls.status, nulls.notes, nulls.attrs),
            Arrays.asList(null, null, null, null, null, null, null, null, null, null), "nulls");
      }
    });

    kase("jsonb_map", () -> {
      try (SessionFactory sf = factory(Action.CREATE, Entities.Item.class)) {
        long id = sf.fromTransaction(s -> {
          Entities.Item a = sampleItem();
          s.persist(a);
          Entities.Item b = new Entities.Item();
          b.name = "other";
          b.attrs = new LinkedHashMap<>(Map.of("name", "gadget", "n", 7));
          s.persist(b);
          return a.id;
        });
        check(column("SELECT name FROM hb_item WHERE attrs @> '{\"nested\": {\"ok\": true}}' "),
            row("Straße ☃ ünïcödé"), "@> containment");
        check(rows("SELECT attrs->>'name', (attrs->>'n')::int, jsonb_typeof(attrs->'nested'), "
            + "attrs #>> '{nested,list,2}' FROM hb_item ORDER BY id"),
            List.of(row("widget", 42, "object", "3"), row("gadget", 7, null, null)),
            "jsonb operators");
        // A change inside the map is dirty-checked and written back.
        sf.inTransaction(s -> {
          Entities.Item it = s.find(Entities.Item.class, id);
          it.attrs.put("n", 43);
          it.attrs.remove("nested");
          it.attrs.put("tags", List.of("a", "b"));
        });
        check(one("SELECT attrs::text FROM hb_item WHERE id = ?", id),
            "{\"n\": 43, \"name\": \"widget\", \"tags\": [\"a\", \"b\"]}", "updated jsonb");
        List<String> names = sf.fromTransaction(s -> s.createNativeQuery(
            "SELECT name FROM hb_item WHERE attrs ->> 'name' = :n OR attrs @> CAST(:doc AS jsonb) "
                + "ORDER BY id", String.class)
            .setParameter("n", "gadget").setParameter("doc", "{\"tags\": [\"b\"]}")
            .getResultList());
        check(names, List.of("Straße ☃ ünïcödé", "other"), "jsonb with parameters");
      }
    });

    kase("array_columns", () -> {
      try (SessionFactory sf = factory(Action.CREATE, Entities.Sheet.class)) {
        check(describe("hb_sheet"), List.of("counts ARRAY null", "days ARRAY null",
            "id bigint not null", "labels ARRAY null"), "array columns");
        sf.inTransaction(s -> {
          Entities.Sheet a = new Entities.Sheet();
          a.id = 1L;
          a.labels = new String[] {"x", "y,z", null, "\"q\""};
          a.counts = new int[] {3, 1, 2};
          a.days = List.of(LocalDate.of(2024, 1, 1), LocalDate.of(2024, 12, 31));
          s.persist(a);
          Entities.Sheet b = new Entities.Sheet();
          b.id = 2L;
          b.labels = new String[0];
          b.counts = new int[] {7};
          s.persist(b);
        });
        Entities.Sheet got = sf.fromTransaction(s -> s.find(Entities.Sheet.class, 1L));
        check(got.labels, new String[] {"x", "y,z", null, "\"q\""}, "String[]");
        check(got.counts, new int[] {3, 1, 2}, "int[]");
        check(got.days, List.of(LocalDate.of(2024, 1, 1), LocalDate.of(2024, 12, 31)),
            "List<LocalDate>");
        check(rows("SELECT labels::text, counts::text, days::text, cardinality(labels) "
            + "FROM hb_sheet ORDER BY id"), List.of(
            row("{x,\"y,z\",NULL,\"\\\"q\\\"\"}", "{3,1,2}", "{2024-01-01,2024-12-31}", 4),
            row("{}", "{7}", null, 0)), "stored arrays");
        List<Long> ids = sf.fromTransaction(s -> s.createSelectionQuery(
            "select s.id from Sheet s where array_contains(s.counts, :c) order by s.id",
            Long.class).setParameter("c", 7).getResultList());
        check(ids, List.of(2L), "array_contains");
        List<Long> ids2 = sf.fromTransaction(s -> s.createNativeQuery(
            "SELECT id FROM hb_sheet WHERE 'x' = ANY(labels) ORDER BY id", Long.class)
            .getResultList());
        check(ids2, List.of(1L), "= ANY(array column)");
      }
    });

    kase("lob_large_objects", () -> {
      try (SessionFactory sf = factory(Action.CREATE, Entities.Document.class)) {
        check(describe("hb_document"), List.of("body oid null", "data oid null",
            "id bigint not null", "title character varying(40) null"), "oid columns");
        String body = "ünïcödé text, ".repeat(5000);
        byte[] data = new byte[100_000];
        for (int i = 0; i < data.length; i++) {
          data[i] = (byte) (i * 31);
        }
        sf.inTransaction(s -> {
          Entities.Document d = new Entities.Document();
          d.id = 1L;
          d.title = "big";
          d.body = body;
          d.data = data;
          s.persist(d);
        });
        Entities.Document got = sf.fromTransaction(s -> s.find(Entities.Document.class, 1L));
        check(got.body, body, "@Lob String");
        check(got.data, data, "@Lob byte[]");
        check(rows("SELECT length(convert_from(lo_get(body), 'UTF8')), length(lo_get(data)), "
            + "md5(lo_get(data)) = md5(?) FROM hb_document", (Object) data),
            List.of(row(body.length(), 100_000, true)), "large objects on the server");
        check(count("SELECT count(*) FROM pg_largeobject_metadata m JOIN hb_document d "
            + "ON m.oid IN (d.body, d.data)"), 2L, "large objects of the row");
        sf.inTransaction(s -> s.find(Entities.Document.class, 1L).body = "short");
        check(one("SELECT convert_from(lo_get(body), 'UTF8') FROM hb_document"), "short",
            "updated large object");
      }
    });

    // ---- associations

    kase("one_to_many_cascade_and_orphan_removal", () -> {
      try (SessionFactory sf = factory(Action.CREATE, LIBRARY)) {
        seedLibrary(sf);
        check(rows("SELECT id, name FROM hb_author ORDER BY id"), List.of(
            row(1L, "Ada Lovelace"), row(2L, "Alan Turing"), row(3L, "Grace Hopper"),
            row(4L, "Edsger Dijkstra"), row(5L, "Nobody")), "authors");
        check(rows("SELECT id, author_id, title FROM hb_book WHERE author_id = 2 ORDER BY id"),
            List.of(row(3L, 2L, "Computing Machinery"), row(4L, 2L, "On Computable Numbers"),
                row(5L, 2L, "Morphogenesis")), "books of author 2");
        sf.inTransaction(s -> {
          Entities.Author alan = s.find(Entities.Author.class, 2L);
          check(alan.getBooks().stream().map(b -> b.title).collect(Collectors.toList()),
              List.of("Computing Machinery", "Morphogenesis", "On Computable Numbers"),
              "@OrderBy(title)");
          alan.getBooks().removeIf(b -> b.title.equals("Morphogenesis"));
          alan.addBook("Intelligent Machinery", "isbn-11", "9.99", 1948);
        });
        check(column("SELECT title FROM hb_book WHERE author_id = 2 ORDER BY title"),
            row("Computing Machinery", "Intelligent Machinery", "On Computable Numbers"),
            "after orphan removal and add");
        sf.inTransaction(s -> s.remove(s.find(Entities.Author.class, 2L)));
        check(count("SELECT count(*) FROM hb_book WHERE author_id = 2"), 0L, "cascaded delete");
        check(count("SELECT count(*) FROM hb_book"), 7L, "other books kept");
      }
    });

    kase("lazy_loading", () -> {
      SqlLog log = new SqlLog();
      try (SessionFactory sf = factory(Action.CREATE, opts().log(log), LIBRARY)) {
        seedLibrary(sf);
        log.clear();
        Entities.Book detached;
        try (Session s = sf.openSession()) {
          Entities.Book b = s.find(Entities.Book.class, 6L);
          check(log.size(), 1, "statements for find");
          checkTrue(!Hibernate.isInitialized(b.getAuthor()), "author is an uninitialized proxy");
          check(Hibernate.getClassLazy(b.getAuthor()), Entities.Author.class, "proxy class");
          check(b.getAuthor().id, null, "field of a proxy before it loads");
          check(b.getAuthor().getName(), "Grace Hopper", "author via proxy");
          check(log.size(), 2, "statements after touching the proxy");
          List<Entities.Book> books = b.getAuthor().getBooks();
          checkTrue(!Hibernate.isInitialized(books), "books not loaded yet");
          check(books.stream().map(x -> x.title).collect(Collectors.toList()),
              List.of("COBOL Manual", "Compilers"), "lazy collection");
          check(log.size(), 3, "statements after the collection");
          detached = s.find(Entities.Book.class, 1L);
        }
        Entities.Book d = detached;
        expect(LazyInitializationException.class, "proxy after the session closed",
            () -> d.getAuthor().getName());
      }
    });

    kase("batch_fetch_and_multi_load", () -> {
      SqlLog log = new SqlLog();
      try (SessionFactory sf = factory(Action.CREATE,
          opts().log(log).set("hibernate.default_batch_fetch_size", 16), LIBRARY)) {
        seedLibrary(sf);
        sf.inTransaction(s -> {
          log.clear();
          List<Entities.Author> authors = s.findMultiple(Entities.Author.class,
              List.of(4L, 1L, 99L, 3L));
          check(authors.stream().map(a -> a == null ? null : a.name)
              .collect(Collectors.toList()),
              Arrays.asList("Edsger Dijkstra", "Ada Lovelace", null, "Grace Hopper"),
              "findMultiple in the order asked");
          check(log.size(), 1, "one statement for findMultiple");
          // Touching one lazy collection loads the others of the session in the same batch.
          log.clear();
          Map<String, Integer> sizes = new LinkedHashMap<>();
          for (Entities.Author a : authors) {
            if (a != null) {
              sizes.put(a.name, a.getBooks().size());
            }
          }
          check(sizes, Map.of("Edsger Dijkstra", 3, "Ada Lovelace", 2, "Grace Hopper", 2),
              "collection sizes");
          check(log.size(), 1, "one statement for three collections: " + log.sql);
        });
        sf.inTransaction(s -> {
          List<Entities.Book> books = s.createSelectionQuery("from Book b order by b.id",
              Entities.Book.class).getResultList();
          log.clear();
          Set<String> names = new TreeSet<>();
          for (Entities.Book b : books) {
            names.add(b.getAuthor().getName());
          }
          check(names, new TreeSet<>(List.of("Ada Lovelace", "Alan Turing", "Grace Hopper",
              "Edsger Dijkstra")), "authors of all books");
          check(log.size(), 1, "one statement for four proxies: " + log.sql);
        });
      }
    });

    kase("fetch_join_and_entity_graph", () -> {
      SqlLog log = new SqlLog();
      try (SessionFactory sf = factory(Action.CREATE, opts().log(log), LIBRARY)) {
        seedLibrary(sf);
        log.clear();
        List<Entities.Author> authors = sf.fromTransaction(s -> s.createSelectionQuery(
            "select a from Author a join fetch a.books b where a.country = :c order by a.name",
            Entities.Author.class).setParameter("c", "UK").getResultList());
        check(log.size(), 1, "one statement");
        check(authors.stream().map(a -> a.name + ":" + a.books.size())
            .collect(Collectors.toList()), List.of("Ada Lovelace:2", "Alan Turing:3"),
            "authors with their books, no duplicates");
        checkTrue(Hibernate.isInitialized(authors.get(1).books), "books fetched");
        log.clear();
        List<Entities.Book> books = sf.fromTransaction(s -> s.createSelectionQuery(
            "from Book b join fetch b.author left join fetch b.tags where b.price > :p "
                + "order by b.price desc", Entities.Book.class)
            .setParameter("p", dec("40")).getResultList());
        check(books.stream().map(b -> b.title + "/" + b.author.name)
            .collect(Collectors.toList()), List.of("Compilers/Grace Hopper",
            "Discipline of Programming/Edsger Dijkstra", "Computing Machinery/Alan Turing"),
            "books with authors");
        check(log.size(), 1, "one statement for the books");
        log.clear();
        Entities.Book viaGraph = sf.fromTransaction(s -> {
          EntityGraph<Entities.Book> g = s.createEntityGraph(Entities.Book.class);
          g.addAttributeNodes("author");
          return s.find(Entities.Book.class, 9L,
              Map.of("jakarta.persistence.fetchgraph", g));
        });
        check(log.size(), 1, "one statement for the entity graph");
        checkTrue(Hibernate.isInitialized(viaGraph.author), "graph fetched the author");
        check(viaGraph.author.name, "Edsger Dijkstra", "author from the graph");
      }
    });

    kase("many_to_many_join_table", () -> {
      try (SessionFactory sf = factory(Action.CREATE, LIBRARY)) {
        seedLibrary(sf);
        sf.inTransaction(s -> {
          Entities.Tag cs = new Entities.Tag("cs");
          Entities.Tag math = new Entities.Tag("math");
          Entities.Tag lang = new Entities.Tag("languages");
          s.persist(cs);
          s.persist(math);
          s.persist(lang);
          s.find(Entities.Book.class, 3L).getTags().addAll(List.of(cs, math));
          s.find(Entities.Book.class, 4L).getTags().addAll(List.of(cs, math));
          s.find(Entities.Book.class, 6L).getTags().addAll(List.of(cs, lang));
          s.find(Entities.Book.class, 7L).getTags().add(lang);
        });
        check(rows("SELECT book_id, tag_id FROM hb_book_tag ORDER BY 1, 2"), List.of(
            row(3L, 1L), row(3L, 2L), row(4L, 1L), row(4L, 2L), row(6L, 1L), row(6L, 3L),
            row(7L, 3L)), "join table rows");
        sf.inTransaction(s -> {
          check(s.createSelectionQuery("select b.title from Book b join b.tags t "
              + "where t.label = :l order by b.title", String.class)
              .setParameter("l", "languages").getResultList(),
              List.of("COBOL Manual", "Compilers"), "books by tag");
          check(s.createSelectionQuery("select t.label, count(b) from Tag t left join t.books b "
              + "group by t.label order by t.label", Object[].class).getResultList()
              .stream().map(Arrays::asList).collect(Collectors.toList()),
              List.of(row("cs", 3L), row("languages", 2L), row("math", 2L)), "books per tag");
          Entities.Tag math = s.createSelectionQuery("from Tag where label = 'math'",
              Entities.Tag.class).getSingleResult();
          check(math.books.stream().map(b -> b.title).sorted().collect(Collectors.toList()),
              List.of("Computing Machinery", "On Computable Numbers"), "inverse side");
          Entities.Book b = s.find(Entities.Book.class, 3L);
          b.getTags().remove(math);
        });
        check(rows("SELECT book_id, tag_id FROM hb_book_tag WHERE book_id = 3"),
            List.of(row(3L, 1L)), "link removed");
        check(one("SELECT version FROM hb_book WHERE id = 3"), 2, "owner's version bumped by "
            + "each collection change");
      }
    });

    kase("embedded_and_element_collections", () -> {
      try (SessionFactory sf = factory(Action.CREATE, Entities.Person.class)) {
        check(describe("hb_person"), List.of("city character varying(40) null",
            "id bigint not null", "name character varying(60) not null",
            "street character varying(60) null", "zip character varying(10) null"),
            "embedded columns");
        check(describe("hb_person_phone"), List.of("person_id bigint not null",
            "phone character varying(20) null", "pos integer not null"), "list table");
        long id = sf.fromTransaction(s -> {
          Entities.Person p = new Entities.Person();
          p.name = "Zoe";
          p.home = new Entities.Address("1 Main St", "Springfield", "12345");
          p.phones.addAll(List.of("+44 1", "+1 2", "+44 3"));
          p.nicks.addAll(List.of("z", "zo"));
          s.persist(p);
          Entities.Person q = new Entities.Person();
          q.name = "Yan";
          q.home = new Entities.Address("2 Side St", "Shelbyville", null);
          s.persist(q);
          return p.id;
        });
        check(rows("SELECT person_id, pos, phone FROM hb_person_phone ORDER BY pos"), List.of(
            row(id, 0, "+44 1"), row(id, 1, "+1 2"), row(id, 2, "+44 3")), "list rows");
        sf.inTransaction(s -> {
          check(s.createSelectionQuery("select p.name from Person p where p.home.city = :c",
              String.class).setParameter("c", "Shelbyville").getResultList(), List.of("Yan"),
              "query on an embedded field");
          check(s.createSelectionQuery("select ph from Person p join p.phones ph "
              + "where ph like '+44%' order by index(ph) desc", String.class).getResultList(),
              List.of("+44 3", "+44 1"), "query on the element collection");
          Entities.Person p = s.find(Entities.Person.class, id);
          check(p.phones, List.of("+44 1", "+1 2", "+44 3"), "list order");
          check(new TreeSet<>(p.nicks), new TreeSet<>(List.of("z", "zo")), "set");
          check(p.home.zip, "12345", "embedded");
          p.phones.remove(0);
          p.nicks.remove("z");
          p.home.city = "Capital City";
        });
        check(rows("SELECT pos, phone FROM hb_person_phone ORDER BY pos"), List.of(
            row(0, "+1 2"), row(1, "+44 3")), "list rows after removing the first");
        check(column("SELECT nick FROM hb_person_nick"), row("zo"), "set rows");
        check(one("SELECT city FROM hb_person WHERE id = ?", id), "Capital City",
            "embedded update");
      }
    });

    kase("inheritance_single_table_and_joined", () -> {
      try (SessionFactory sf = factory(Action.CREATE, Entities.Payment.class,
          Entities.CardPayment.class, Entities.BankPayment.class, Entities.Vehicle.class,
          Entities.Car.class, Entities.Truck.class)) {
        sf.inTransaction(s -> {
          Entities.CardPayment c1 = new Entities.CardPayment();
          c1.amount = dec("10.00");
          c1.last4 = "4242";
          Entities.BankPayment b1 = new Entities.BankPayment();
          b1.amount = dec("250.50");
          b1.iban = "DE89370400440532013000";
          Entities.CardPayment c2 = new Entities.CardPayment();
          c2.amount = dec("99.99");
          c2.last4 = "1111";
          s.persist(c1);
          s.persist(b1);
          s.persist(c2);
          Entities.Car car = new Entities.Car();
          car.id = 1L;
          car.maker = "Volvo";
          car.seats = 5;
          Entities.Truck truck = new Entities.Truck();
          truck.id = 2L;
          truck.maker = "Scania";
          truck.payloadTons = dec("18.5");
          s.persist(car);
          s.persist(truck);
        });
        check(rows("SELECT kind, amount, last4, iban FROM hb_payment ORDER BY amount"), List.of(
            row("CARD", dec("10.00"), "4242", null), row("CARD", dec("99.99"), "1111", null),
            row("BANK", dec("250.50"), null, "DE89370400440532013000")), "one table");
        sf.inTransaction(s -> {
          List<Entities.Payment> all = s.createSelectionQuery("from Payment p order by p.amount",
              Entities.Payment.class).getResultList();
          check(all.stream().map(p -> p.getClass().getSimpleName()).collect(Collectors.toList()),
              List.of("CardPayment", "CardPayment", "BankPayment"), "polymorphic query");
          check(s.createSelectionQuery("select sum(p.amount) from CardPayment p",
              BigDecimal.class).getSingleResult(), dec("109.99"), "subclass query");
          check(s.createSelectionQuery("select p.amount from Payment p where type(p) = "
              + "BankPayment", BigDecimal.class).getResultList(), List.of(dec("250.50")),
              "type()");
          check(s.createSelectionQuery("select p.amount from Payment p "
              + "where treat(p as CardPayment).last4 = :l", BigDecimal.class)
              .setParameter("l", "1111").getResultList(), List.of(dec("99.99")), "treat()");
          List<Entities.Vehicle> vs = s.createSelectionQuery("from Vehicle v order by v.id",
              Entities.Vehicle.class).getResultList();
          check(vs.stream().map(v -> v.getClass().getSimpleName() + ":" + v.maker)
              .collect(Collectors.toList()), List.of("Car:Volvo", "Truck:Scania"), "joined");
          check(((Entities.Truck) vs.get(1)).payloadTons, dec("18.5"), "subclass column");
        });
        check(rows("SELECT (SELECT count(*) FROM hb_vehicle), (SELECT count(*) FROM hb_car), "
            + "(SELECT count(*) FROM hb_truck)"), List.of(row(2L, 1L, 1L)), "joined tables");
        sf.inTransaction(s -> s.remove(s.find(Entities.Vehicle.class, 2L)));
        check(rows("SELECT (SELECT count(*) FROM hb_vehicle), (SELECT count(*) FROM hb_truck)"),
            List.of(row(1L, 0L)), "joined delete");
      }
    });

    // ---- versions and locks

    kase("optimistic_locking_version", () -> {
      try (SessionFactory sf = factory(Action.CREATE, Entities.Account.class)) {
        long id = sf.fromTransaction(s -> {
          Entities.Account a = new Entities.Account("a@example.com", "Ann", "100.00");
          s.persist(a);
          return a.id;
        });
        check(one("SELECT version FROM hb_account WHERE id = ?", id), 0L, "initial version");
        try (Session s1 = sf.openSession(); Session s2 = sf.openSession()) {
          Transaction t1 = s1.beginTransaction();
          Transaction t2 = s2.beginTransaction();
          Entities.Account a1 = s1.find(Entities.Account.class, id);
          Entities.Account a2 = s2.find(Entities.Account.class, id);
          a1.balance = dec("150.00");
          t1.commit();
          check(a1.version, 1L, "version after the first update");
          a2.owner = "Ann B.";
          expect(OptimisticLockException.class, "stale update", s2::flush);
          t2.rollback();
        }
        check(rows("SELECT owner, balance, version FROM hb_account WHERE id = ?", id),
            List.of(row("Ann", dec("150.00"), 1L)), "row after the stale update");
        // A detached copy that is out of date cannot be merged either.
        Entities.Account stale = sf.fromTransaction(s -> s.find(Entities.Account.class, id));
        sf.inTransaction(s -> s.find(Entities.Account.class, id).balance = dec("175.00"));
        stale.balance = dec("0.00");
        expect(OptimisticLockException.class, "merge of a stale copy",
            () -> sf.inTransaction(s -> s.merge(stale)));
        // OPTIMISTIC_FORCE_INCREMENT bumps the version without a change.
        sf.inTransaction(s -> s.find(Entities.Account.class, id,
            LockModeType.OPTIMISTIC_FORCE_INCREMENT));
        check(rows("SELECT balance, version FROM hb_account WHERE id = ?", id),
            List.of(row(dec("175.00"), 3L)), "row at the end");
      }
    });

    kase("dirty_checking_merge_refresh", () -> {
      SqlLog log = new SqlLog();
      try (SessionFactory sf = factory(Action.CREATE, opts().log(log), Entities.Account.class)) {
        long id = sf.fromTransaction(s -> {
          Entities.Account a = new Entities.Account("d@example.com", "Dan", "10.00");
          s.persist(a);
          return a.id;
        });
        log.clear();
        sf.inTransaction(s -> {
          Entities.Account a = s.find(Entities.Account.class, id);
          a.balance = dec("10.00");
          checkTrue(!s.isDirty(), "an equal BigDecimal is no change");
          a.balance = dec("11.50");
          checkTrue(s.isDirty(), "dirty after a change");
        });
        check(log.matching("update").size(), 1, "one UPDATE: " + log.sql);
        check(rows("SELECT balance, version FROM hb_account WHERE id = ?", id),
            List.of(row(dec("11.50"), 1L)), "after dirty checking");
        Entities.Account detached = sf.fromTransaction(s -> s.find(Entities.Account.class, id));
        detached.owner = "Daniel";
        Entities.Account merged = sf.fromTransaction(s -> s.merge(detached));
        check(merged.version, 2L, "version after merge");
        check(rows("SELECT owner, version FROM hb_account WHERE id = ?", id),
            List.of(row("Daniel", 2L)), "after merge");
        sf.inTransaction(s -> {
          Entities.Account a = s.find(Entities.Account.class, id);
          check(s.createNativeMutationQuery("UPDATE hb_account SET balance = balance * 2 "
              + "WHERE id = :id").setParameter("id", id).executeUpdate(), 1, "native update");
          check(a.balance, dec("11.50"), "managed copy before refresh");
          s.refresh(a);
          check(a.balance, dec("23.00"), "after refresh");
        });
      }
    });

    kase("pessimistic_write_lock", () -> {
      SqlLog log = new SqlLog();
      ExecutorService pool = Executors.newSingleThreadExecutor();
      try (SessionFactory sf = factory(Action.CREATE, opts().log(log), Entities.Account.class)) {
        long id = sf.fromTransaction(s -> {
          Entities.Account a = new Entities.Account("p@example.com", "Pat", "100.00");
          s.persist(a);
          return a.id;
        });
        try (Session s1 = sf.openSession()) {
          Transaction t1 = s1.beginTransaction();
          log.clear();
          Entities.Account a = s1.find(Entities.Account.class, id,
              LockModeType.PESSIMISTIC_WRITE);
          check(log.size(), 1, "one statement");
          checkTrue(log.sql.get(0).endsWith(" for no key update of a1_0"),
              "locking clause in: " + log.sql.get(0));
          // Another session with NOWAIT fails at once.
          Future<Exception> nowait = pool.submit(() -> {
            try (Session s2 = sf.openSession()) {
              s2.beginTransaction();
              try {
                s2.find(Entities.Account.class, id, LockModeType.PESSIMISTIC_WRITE,
                    Map.of("jakarta.persistence.lock.timeout", 0));
                return null;
              } catch (Exception e) {
                return e;
              } finally {
                s2.getTransaction().rollback();
              }
            }
          });
          Exception e = nowait.get(20, TimeUnit.SECONDS);
          checkTrue(e instanceof jakarta.persistence.LockTimeoutException
              || e instanceof jakarta.persistence.PessimisticLockException,
              "NOWAIT on a locked row: " + e);
          check(sqlCause(e) == null ? null : sqlCause(e).getSQLState(), "55P03",
              "SQLSTATE of NOWAIT");
          checkTrue(log.sql.stream().anyMatch(x -> x.endsWith(" for no key update of a1_0 nowait")),
              "nowait statement in " + log.sql);
          // Another session without a timeout waits until the first commits, then sees its
          // change.
          long start = System.nanoTime();
          Future<BigDecimal> waiter = pool.submit(() -> {
            try (Session s2 = sf.openSession()) {
              Transaction t2 = s2.beginTransaction();
              Entities.Account b = s2.find(Entities.Account.class, id,
                  LockModeType.PESSIMISTIC_WRITE);
              BigDecimal seen = b.balance;
              b.balance = b.balance.add(dec("1.00"));
              t2.commit();
              return seen;
            }
          });
          Thread.sleep(400);
          checkTrue(!waiter.isDone(), "the second locker waits");
          a.balance = dec("200.00");
          t1.commit();
          check(waiter.get(20, TimeUnit.SECONDS), dec("200.00"), "balance the waiter saw");
          checkTrue(System.nanoTime() - start >= 350_000_000L, "the waiter waited");
        }
        check(rows("SELECT balance, version FROM hb_account WHERE id = ?", id),
            List.of(row(dec("201.00"), 2L)), "row at the end");
        // A query can lock too.
        sf.inTransaction(s -> {
          log.clear();
          List<Entities.Account> locked = s.createSelectionQuery(
              "from Account a where a.owner = :o", Entities.Account.class)
              .setParameter("o", "Pat").setLockMode(LockModeType.PESSIMISTIC_WRITE)
              .getResultList();
          check(locked.size(), 1, "locked rows");
          checkTrue(log.sql.get(0).endsWith(" for no key update of a1_0"),
              "query lock: " + log.sql);
        });
      } finally {
        pool.shutdownNow();
      }
    });

    kase("skip_locked_queue", () -> {
      ExecutorService pool = Executors.newSingleThreadExecutor();
      try (SessionFactory sf = factory(Action.CREATE, Entities.Account.class)) {
        sf.inTransaction(s -> {
          for (int i = 1; i <= 5; i++) {
            s.persist(new Entities.Account("job" + i + "@q", "queue", i + ".00"));
          }
        });
        String claim = "from Account a where a.owner = 'queue' order by a.id";
        try (Session s1 = sf.openSession()) {
          Transaction t1 = s1.beginTransaction();
          List<Long> first = s1.createSelectionQuery(claim, Entities.Account.class)
              .setLockMode(LockModeType.PESSIMISTIC_WRITE)
              .setHint("jakarta.persistence.lock.timeout", -2)
              .setMaxResults(2).getResultList().stream().map(a -> a.id)
              .collect(Collectors.toList());
          check(first, List.of(1L, 2L), "first worker's jobs");
          List<Long> second = pool.submit(() -> {
            try (Session s2 = sf.openSession()) {
              Transaction t2 = s2.beginTransaction();
              List<Long> got = s2.createSelectionQuery(claim, Entities.Account.class)
                  .setLockMode(LockModeType.PESSIMISTIC_WRITE)
                  .setHint("jakarta.persistence.lock.timeout", -2)
                  .setMaxResults(2).getResultList().stream().map(a -> a.id)
                  .collect(Collectors.toList());
              t2.commit();
              return got;
            }
          }).get(20, TimeUnit.SECONDS);
          check(second, List.of(3L, 4L), "second worker skips the locked jobs");
          t1.commit();
        }
      } finally {
        pool.shutdownNow();
      }
    });

    // ---- queries

    kase("jpql_parameters_and_paging", () -> {
      try (SessionFactory sf = factory(Action.CREATE, LIBRARY)) {
        seedLibrary(sf);
        sf.inTransaction(s -> {
          check(s.createSelectionQuery("select b.title from Book b where b.price between :lo "
              + "and :hi and lower(b.title) like :pat order by b.price desc, b.title",
              String.class).setParameter("lo", dec("10")).setParameter("hi", dec("46"))
              .setParameter("pat", "%o%").getResultList(),
              List.of("Computing Machinery", "Shortest Paths", "Poetical Science",
                  "COBOL Manual", "On Computable Numbers", "Morphogenesis",
                  "Notes on the Engine"), "named parameters");
          check(s.createSelectionQuery("select b.isbn from Book b where b.author.name in "
              + "(:names) and b.published >= ?1 order by b.isbn", String.class)
              .setParameterList("names", List.of("Grace Hopper", "Edsger Dijkstra"))
              .setParameter(1, LocalDate.of(1960, 1, 1)).getResultList(),
              List.of("isbn-08", "isbn-09"), "list and positional parameters");
          String page = "select b.title from Book b order by b.title";
          check(s.createSelectionQuery(page, String.class).setFirstResult(3).setMaxResults(4)
              .getResultList(), List.of("Discipline of Programming", "Goto Considered Harmful",
              "Morphogenesis", "Notes on the Engine"), "rows 4 to 7");
          check(s.createSelectionQuery(page, String.class).setFirstResult(8).setMaxResults(4)
              .getResultList(), List.of("Poetical Science", "Shortest Paths"), "last page");
          check(s.createSelectionQuery(page, String.class).setMaxResults(1).getResultList(),
              List.of("COBOL Manual"), "first row");
          check(s.createSelectionQuery("select a.name from Author a where (:country is null "
              + "or a.country = :country) order by a.id", String.class)
              .setParameter("country", null).getResultList().size(), 5, "null parameter");
          check(s.createSelectionQuery("select a.name from Author a where (:country is null "
              + "or a.country = :country) order by a.id", String.class)
              .setParameter("country", "US").getResultList(), List.of("Grace Hopper"),
              "non-null parameter");
          check(s.createSelectionQuery("select a.name from Author a where a.country is null",
              String.class).getSingleResult(), "Nobody", "is null");
          check(s.createSelectionQuery("from Book b where b.isbn = :i", Entities.Book.class)
              .setParameter("i", "none").getSingleResultOrNull(), null, "no result");
          Entities.Author ada = s.find(Entities.Author.class, 1L);
          check(s.createSelectionQuery("select count(*) from Book b where b.author = :a",
              Long.class).setParameter("a", ada).getSingleResult(), 2L, "entity parameter");
        });
      }
    });

    kase("jpql_aggregates_group_by", () -> {
      try (SessionFactory sf = factory(Action.CREATE, LIBRARY)) {
        seedLibrary(sf);
        sf.inTransaction(s -> {
          List<Tuple> rows = s.createSelectionQuery("select a.name as name, count(b) as n, "
              + "sum(b.price) as total, avg(b.price) as mean, min(b.published) as first, "
              + "max(b.price) as top from Author a join a.books b group by a.name "
              + "having count(b) > 1 order by count(b) desc, a.name", Tuple.class)
              .getResultList();
          List<List<Object>> got = new ArrayList<>();
          for (Tuple t : rows) {
            got.add(row(t.get("name"), t.get("n"), t.get("total"), t.get("mean"),
                t.get("first"), t.get("top")));
          }
          check(got, List.of(
              row("Alan Turing", 3L, dec("80.75"), 26.916666666666668, LocalDate.of(1936, 1, 1),
                  dec("45.00")),
              row("Edsger Dijkstra", 3L, dec("87.20"), 29.066666666666666,
                  LocalDate.of(1959, 1, 1), dec("48.90")),
              row("Ada Lovelace", 2L, dec("42.50"), 21.25, LocalDate.of(1843, 1, 1),
                  dec("30.00")),
              row("Grace Hopper", 2L, dec("85.25"), 42.625, LocalDate.of(1952, 1, 1),
                  dec("60.00"))), "group by with aggregates");
          check(s.createSelectionQuery("select a.country, count(distinct a), count(b.id), "
              + "coalesce(sum(b.price), 0) from Author a left join a.books b "
              + "group by a.country order by a.country nulls first", Object[].class)
              .getResultList().stream().map(Arrays::asList).collect(Collectors.toList()),
              List.of(row(null, 1L, 0L, dec("0")), row("NL", 1L, 3L, dec("87.20")),
                  row("UK", 2L, 5L, dec("123.25")), row("US", 1L, 2L, dec("85.25"))),
              "left join, nulls first");
          check(Arrays.asList(s.createSelectionQuery("select count(b), sum(b.price), "
              + "max(b.published), min(b.title) from Book b", Object[].class)
              .getSingleResult()), row(10L, dec("295.70"), LocalDate.of(1976, 1, 1),
              "COBOL Manual"), "whole-table aggregates");
          check(s.createSelectionQuery("select year(b.published) - mod(year(b.published), 10), "
              + "count(*) from Book b group by year(b.published) - mod(year(b.published), 10) "
              + "order by 1", Object[].class)
              .getResultList().stream().map(Arrays::asList).collect(Collectors.toList()),
              List.of(row(1840, 2L), row(1930, 1L), row(1950, 5L), row(1960, 1L),
                  row(1970, 1L)),
              "group by an expression");
        });
      }
    });

    kase("jpql_subqueries", () -> {
      try (SessionFactory sf = factory(Action.CREATE, LIBRARY)) {
        seedLibrary(sf);
        sf.inTransaction(s -> {
          check(s.createSelectionQuery("select a.name from Author a where exists (select 1 "
              + "from Book b where b.author = a and b.price > :p) order by a.name", String.class)
              .setParameter("p", dec("45")).getResultList(),
              List.of("Edsger Dijkstra", "Grace Hopper"), "exists");
          check(s.createSelectionQuery("select a.name from Author a where not exists (select 1 "
              + "from Book b where b.author = a)", String.class).getResultList(),
              List.of("Nobody"), "not exists");
          check(s.createSelectionQuery("select b.title from Book b where b.price > (select "
              + "avg(b2.price) from Book b2) order by b.title", String.class).getResultList(),
              List.of("Compilers", "Computing Machinery", "Discipline of Programming",
                  "Poetical Science", "Shortest Paths"), "scalar subquery");
          check(s.createSelectionQuery("select b.isbn from Book b where b.author.id in (select "
              + "a.id from Author a where a.country = :c) order by b.isbn", String.class)
              .setParameter("c", "UK").getResultList(),
              List.of("isbn-01", "isbn-02", "isbn-03", "isbn-04", "isbn-05"), "in (subquery)");
          check(s.createSelectionQuery("select a.name, (select count(b) from Book b where "
              + "b.author = a) from Author a order by a.id", Object[].class).getResultList()
              .stream().map(Arrays::asList).collect(Collectors.toList()), List.of(
              row("Ada Lovelace", 2L), row("Alan Turing", 3L), row("Grace Hopper", 2L),
              row("Edsger Dijkstra", 3L), row("Nobody", 0L)), "subquery in select");
          check(s.createSelectionQuery("select b.title from Book b where b.price = (select "
              + "max(b2.price) from Book b2 where b2.author = b.author) order by b.title",
              String.class).getResultList(), List.of("Compilers", "Computing Machinery",
              "Discipline of Programming", "Poetical Science"), "correlated subquery");
          check(s.createSelectionQuery("select b.title from Book b where b.price > all (select "
              + "b2.price from Book b2 where b2.author.country = 'UK')", String.class)
              .getResultList(), List.of("Compilers", "Discipline of Programming"), "> all");
        });
      }
    });

    kase("hql_functions", () -> {
      try (SessionFactory sf = factory(Action.CREATE, LIBRARY)) {
        seedLibrary(sf);
        sf.inTransaction(s -> {
          Object[] r = s.createSelectionQuery("select upper(a.name), lower(a.name), "
              + "length(a.name), concat(a.name, ' (', a.country, ')'), substring(a.name, 1, 3), "
              + "locate('a', a.name), trim('  x  '), coalesce(a.country, '?'), "
              + "case when a.country = 'UK' then 'Britain' else 'elsewhere' end, "
              + "replace(a.name, ' ', '_'), left(a.name, 3), right(a.name, 3), "
              + "a.name || '!' from Author a where a.id = 2", Object[].class).getSingleResult();
          check(Arrays.asList(r), row("ALAN TURING", "alan turing", 11, "Alan Turing (UK)",
              "Ala", 3, "x", "UK", "Britain", "Alan_Turing", "Ala", "ing", "Alan Turing!"),
              "string functions");
          Object[] n = s.createSelectionQuery("select b.price, round(b.price, 0), floor(b.price), "
              + "ceiling(b.price), abs(-b.price), mod(b.id, 4), b.price * 2, b.price / 4, "
              + "cast(b.price as String), cast('7' as Integer), sqrt(16.0), power(2, 10) "
              + "from Book b where b.id = 5", Object[].class).getSingleResult();
          check(Arrays.asList(n), row(dec("15.75"), dec("16"), dec("15"), dec("16"),
              dec("15.75"), 1, dec("31.50"), dec("3.9375000000000000"), "15.75", 7, 4.0, 1024.0),
              "numeric functions");
          Object[] d = s.createSelectionQuery("select year(b.published), "
              + "extract(month from b.published), b.published + 30 day, "
              + "cast(b.published as String), day(b.published), "
              + "local date > b.published, local datetime > cast(b.published as LocalDateTime) "
              + "from Book b where b.id = 9", Object[].class).getSingleResult();
          check(Arrays.asList(d), row(1976, 1, LocalDate.of(1976, 1, 31), "1976-01-01", 1, true,
              true), "date functions");
          check(s.createSelectionQuery("select b.title from Book b where lower(b.title) like "
              + "'%mach%' escape '\\' and length(b.title) between 10 and 30 order by 1",
              String.class).getResultList(), List.of("Computing Machinery"), "like, between");
          check(s.createSelectionQuery("select nullif(a.country, 'UK') from Author a "
              + "where a.id in (1, 3) order by a.id", String.class).getResultList(),
              Arrays.asList(null, "US"), "nullif");
        });
      }
    });

    kase("criteria_queries", () -> {
      try (SessionFactory sf = factory(Action.CREATE, LIBRARY)) {
        seedLibrary(sf);
        sf.inTransaction(s -> {
          CriteriaBuilder cb = s.getCriteriaBuilder();
          CriteriaQuery<String> q = cb.createQuery(String.class);
          Root<Entities.Book> b = q.from(Entities.Book.class);
          Join<Entities.Book, Entities.Author> a = b.join("author");
          ParameterExpression<BigDecimal> min = cb.parameter(BigDecimal.class, "min");
          q.select(b.get("title")).where(cb.ge(b.get("price"), min),
              cb.equal(a.get("country"), "UK")).orderBy(cb.desc(b.get("price")));
          check(s.createQuery(q).setParameter("min", dec("20")).getResultList(),
              List.of("Computing Machinery", "Poetical Science", "On Computable Numbers"),
              "criteria with a join and a parameter");

          CriteriaQuery<Tuple> g = cb.createTupleQuery();
          Root<Entities.Book> gb = g.from(Entities.Book.class);
          Join<Entities.Book, Entities.Author> ga = gb.join("author");
          g.multiselect(ga.get("country").alias("country"), cb.count(gb).alias("n"),
              cb.max(gb.<BigDecimal>get("price")).alias("top"))
              .groupBy(ga.get("country"))
              .having(cb.gt(cb.count(gb), 2L))
              .orderBy(cb.asc(ga.get("country")));
          check(s.createQuery(g).getResultList().stream()
              .map(t -> row(t.get("country"), t.get("n"), t.get("top")))
              .collect(Collectors.toList()),
              List.of(row("NL", 3L, dec("48.90")), row("UK", 5L, dec("45.00"))),
              "criteria group by / having");

          CriteriaQuery<Long> c = cb.createQuery(Long.class);
          Root<Entities.Author> ca = c.from(Entities.Author.class);
          Subquery<Long> sub = c.subquery(Long.class);
          Root<Entities.Book> sb = sub.from(Entities.Book.class);
          sub.select(cb.count(sb)).where(cb.equal(sb.get("author"), ca));
          c.select(ca.get("id")).where(cb.or(cb.isNull(ca.get("country")),
              cb.like(ca.get("name"), "G%")), cb.lt(sub, 5L)).orderBy(cb.asc(ca.get("id")));
          check(s.createQuery(c).getResultList(), List.of(3L, 5L), "criteria subquery, or, like");
        });
        sf.inTransaction(s -> {
          CriteriaBuilder cb = s.getCriteriaBuilder();
          CriteriaUpdate<Entities.Book> u = cb.createCriteriaUpdate(Entities.Book.class);
          Root<Entities.Book> b = u.from(Entities.Book.class);
          u.set(b.<BigDecimal>get("price"), cb.prod(b.get("price"), dec("1.1")))
              .where(cb.lessThan(b.get("price"), dec("20")));
          check(s.createMutationQuery(u).executeUpdate(), 3, "criteria update count");
          CriteriaDelete<Entities.Book> d = cb.createCriteriaDelete(Entities.Book.class);
          Root<Entities.Book> db = d.from(Entities.Book.class);
          d.where(cb.greaterThan(db.get("published"), LocalDate.of(1970, 1, 1)));
          check(s.createMutationQuery(d).executeUpdate(), 1, "criteria delete count");
        });
        check(rows("SELECT isbn, price FROM hb_book WHERE isbn IN ('isbn-01', 'isbn-05', "
            + "'isbn-08', 'isbn-09') ORDER BY isbn"), List.of(row("isbn-01", dec("13.75")),
            row("isbn-05", dec("17.33")), row("isbn-08", dec("5.50"))),
            "rows after criteria update and delete");
      }
    });

    kase("native_queries", () -> {
      try (SessionFactory sf = factory(Action.CREATE, LIBRARY)) {
        seedLibrary(sf);
        sf.inTransaction(s -> {
          List<Object[]> r = s.createNativeQuery("SELECT id, name, country FROM hb_author "
              + "WHERE country = ?1 ORDER BY name", Object[].class).setParameter(1, "UK")
              .getResultList();
          check(r.stream().map(Arrays::asList).collect(Collectors.toList()), List.of(
              row(1L, "Ada Lovelace", "UK"), row(2L, "Alan Turing", "UK")), "positional");
          List<Entities.Book> books = s.createNativeQuery("SELECT * FROM hb_book "
              + "WHERE price > :p ORDER BY price", Entities.Book.class)
              .setParameter("p", dec("45")).getResultList();
          check(books.stream().map(b -> b.title).collect(Collectors.toList()),
              List.of("Discipline of Programming", "Compilers"), "entity result");
          checkTrue(s.contains(books.get(0)), "native entities are managed");
          check(s.createNativeQuery("SELECT count(*) FROM hb_book", Long.class)
              .getSingleResult(), 10L, "count(*)");
          check(s.createNativeQuery("SELECT sum(price) FROM hb_book", BigDecimal.class)
              .getSingleResult(), dec("295.70"), "sum(numeric)");
          List<Object[]> ranked = s.createNativeQuery("WITH priced AS (SELECT author_id, title, "
              + "price FROM hb_book WHERE price >= :min) SELECT a.name, p.title, rank() OVER "
              + "(PARTITION BY p.author_id ORDER BY p.price DESC) AS r FROM priced p "
              + "JOIN hb_author a ON a.id = p.author_id ORDER BY a.name, r", Object[].class)
              .setParameter("min", dec("30")).getResultList();
          check(ranked.stream().map(Arrays::asList).collect(Collectors.toList()), List.of(
              row("Ada Lovelace", "Poetical Science", 1L),
              row("Alan Turing", "Computing Machinery", 1L),
              row("Edsger Dijkstra", "Discipline of Programming", 1L),
              row("Edsger Dijkstra", "Shortest Paths", 2L),
              row("Grace Hopper", "Compilers", 1L)), "CTE and window function");
          check(s.createNativeMutationQuery("UPDATE hb_book SET price = price + 1 "
              + "WHERE author_id = :a").setParameter("a", 3L).executeUpdate(), 2,
              "native update count");
          check(s.createNativeQuery("SELECT price FROM hb_book WHERE author_id = 3 ORDER BY id",
              BigDecimal.class).getResultList(), List.of(dec("61.00"), dec("26.25")),
              "native update applied");
          check(s.createNativeQuery("SELECT CAST(:d AS date) + 1, :t, CAST(:u AS uuid)",
              Object[].class).setParameter("d", LocalDate.of(2020, 2, 28))
              .setParameter("t", "text").setParameter("u",
                  "6ba7b810-9dad-11d1-80b4-00c04fd430c8").getSingleResult()[0],
              LocalDate.of(2020, 2, 29), "date arithmetic on a parameter");
        });
      }
    });

    kase("bulk_update_and_delete", () -> {
      try (SessionFactory sf = factory(Action.CREATE, LIBRARY)) {
        seedLibrary(sf);
        sf.inTransaction(s -> {
          check(s.createMutationQuery("update Book b set b.price = b.price * 0.5 "
              + "where b.author.country = :c").setParameter("c", "UK").executeUpdate(), 5,
              "bulk update count");
          check(s.createMutationQuery("update versioned Book b set b.title = upper(b.title) "
              + "where b.id = :id").setParameter("id", 8L).executeUpdate(), 1,
              "versioned bulk update");
          check(s.createMutationQuery("delete from Book b where b.published < :d")
              .setParameter("d", LocalDate.of(1900, 1, 1)).executeUpdate(), 2,
              "bulk delete count");
          check(s.createMutationQuery("insert into Tag (id, label) select b.id + 100, "
              + "lower(b.isbn) from Book b where b.price < 10").executeUpdate(), 2,
              "insert ... select");
        });
        check(rows("SELECT isbn, price, title, version FROM hb_book WHERE isbn IN ('isbn-03', "
            + "'isbn-05', 'isbn-08') ORDER BY isbn"), List.of(
            row("isbn-03", dec("22.50"), "Computing Machinery", 0),
            row("isbn-05", dec("7.88"), "Morphogenesis", 0),
            row("isbn-08", dec("5.00"), "GOTO CONSIDERED HARMFUL", 1)), "after bulk update");
        check(count("SELECT count(*) FROM hb_book"), 8L, "after bulk delete");
        check(rows("SELECT id, label FROM hb_tag ORDER BY id"), List.of(
            row(105L, "isbn-05"), row(108L, "isbn-08")), "after insert ... select");
      }
    });

    kase("batch_inserts_updates_deletes", () -> {
      SqlLog log = new SqlLog();
      Opts o = opts().log(log).set("hibernate.jdbc.batch_size", 20)
          .set("hibernate.order_inserts", true).set("hibernate.order_updates", true);
      try (SessionFactory sf = factory(Action.CREATE, o, Entities.Reading.class)) {
        Statistics stats = sf.getStatistics();
        log.clear();
        LocalDateTime t0 = LocalDateTime.of(2025, 5, 1, 12, 0);
        sf.inTransaction(s -> {
          for (int i = 0; i < 45; i++) {
            s.persist(new Entities.Reading("batch", i * 0.5, t0.plusMinutes(i)));
          }
        });
        check(log.matching("select nextval").size(), 2, "sequence calls (pooled: 1, then 51)");
        check(log.matching("insert").size(), 1, "insert statements prepared (one, batched)");
        check(rows("SELECT count(*), sum(value), min(taken_at), max(id) FROM hb_reading"),
            List.of(row(45L, 495.0, java.sql.Timestamp.valueOf(t0), 45L)), "inserted rows");
        log.clear();
        sf.inTransaction(s -> {
          for (Entities.Reading r : s.createSelectionQuery("from Reading", Entities.Reading.class)
              .getResultList()) {
            r.value = r.value + 1;
          }
        });
        check(log.matching("update").size(), 1, "update statements prepared (batched)");
        check(one("SELECT sum(value) FROM hb_reading"), 540.0, "updated rows");
        sf.inTransaction(s -> s.createSelectionQuery("from Reading r where r.id > 10",
            Entities.Reading.class).getResultList().forEach(s::remove));
        check(count("SELECT count(*) FROM hb_reading"), 10L, "after batched deletes");
      }
      // pgJDBC's reWriteBatchedInserts turns each batch into one multi-row INSERT.
      try (SessionFactory sf = factory(Action.NONE, opts().set("hibernate.jdbc.batch_size", 20)
          .url("reWriteBatchedInserts=true"), Entities.Reading.class)) {
        sf.inTransaction(s -> {
          for (int i = 0; i < 33; i++) {
            s.persist(new Entities.Reading("rewritten", i, null));
          }
        });
        check(rows("SELECT count(*), sum(value) FROM hb_reading WHERE sensor = 'rewritten'"),
            List.of(row(33L, 528.0)), "rows from rewritten batches");
      }
    });

    kase("transaction_rollback", () -> {
      try (SessionFactory sf = factory(Action.CREATE, Entities.Account.class)) {
        try (Session s = sf.openSession()) {
          Transaction t = s.beginTransaction();
          s.persist(new Entities.Account("r1@example.com", "R1", "1.00"));
          s.persist(new Entities.Account("r2@example.com", "R2", "2.00"));
          s.flush();
          check(s.createNativeQuery("SELECT count(*) FROM hb_account", Long.class)
              .getSingleResult(), 2L, "rows inside the transaction");
          check(count("SELECT count(*) FROM hb_account"), 0L, "invisible to others");
          t.rollback();
        }
        check(count("SELECT count(*) FROM hb_account"), 0L, "after rollback");
        // An exception in the unit of work rolls it back.
        expect(IllegalStateException.class, "exception in inTransaction",
            () -> sf.inTransaction(s -> {
              s.persist(new Entities.Account("r3@example.com", "R3", "3.00"));
              s.flush();
              throw new IllegalStateException("boom");
            }));
        check(count("SELECT count(*) FROM hb_account"), 0L, "after an exception");
        // setRollbackOnly makes commit roll back.
        try (Session s = sf.openSession()) {
          Transaction t = s.beginTransaction();
          s.persist(new Entities.Account("r4@example.com", "R4", "4.00"));
          s.flush();
          t.setRollbackOnly();
          checkTrue(t.getRollbackOnly(), "marked rollback-only");
          try {
            t.commit();
          } catch (RuntimeException expected) {
            // JPA allows commit of a rollback-only transaction to throw RollbackException.
          }
        }
        check(count("SELECT count(*) FROM hb_account"), 0L, "after rollback-only");
        // Work after a rollback commits normally, on the same connection pool.
        sf.inTransaction(s -> s.persist(new Entities.Account("r5@example.com", "R5", "5.00")));
        check(column("SELECT owner FROM hb_account"), row("R5"), "after commit");
      }
    });

    kase("constraint_violations_named", () -> {
      try (SessionFactory sf = factory(Action.CREATE, LIBRARY)) {
        seedLibrary(sf);
        ConstraintViolationException unique = expect(ConstraintViolationException.class,
            "duplicate isbn", () -> sf.inTransaction(s -> {
              Entities.Author a = s.find(Entities.Author.class, 1L);
              a.addBook("Copy", "isbn-02", "1.00", 2000);
              s.flush();
            }));
        check(unique.getConstraintName(), "uk_hb_book_isbn", "unique constraint name");
        check(unique.getKind(), ConstraintViolationException.ConstraintKind.UNIQUE, "kind");
        check(unique.getSQLState(), "23505", "SQLSTATE");
        ConstraintViolationException fk = expect(ConstraintViolationException.class,
            "delete a referenced author", () -> sf.inTransaction(s ->
                s.createNativeMutationQuery("DELETE FROM hb_author WHERE id = 1")
                    .executeUpdate()));
        check(fk.getConstraintName(), "fk_hb_book_author", "foreign key name");
        check(fk.getKind(), ConstraintViolationException.ConstraintKind.FOREIGN_KEY, "kind");
        check(fk.getSQLState(), "23503", "SQLSTATE");
        ConstraintViolationException notNull = expect(ConstraintViolationException.class,
            "null title", () -> sf.inTransaction(s ->
                s.createNativeMutationQuery("UPDATE hb_book SET title = NULL WHERE id = 1")
                    .executeUpdate()));
        check(notNull.getKind(), ConstraintViolationException.ConstraintKind.NOT_NULL, "kind");
        check(notNull.getSQLState(), "23502", "SQLSTATE");
        check(notNull.getConstraintName(), "title", "not-null constraint name");
        // The failed transactions left nothing behind, and the factory still works.
        check(count("SELECT count(*) FROM hb_book"), 10L, "books");
        check(count("SELECT count(*) FROM hb_author"), 5L, "authors");
      }
    });

    kase("stateless_scroll_and_stream", () -> {
      try (SessionFactory sf = factory(Action.CREATE, opts().set("hibernate.jdbc.batch_size",
          50), Entities.Reading.class)) {
        LocalDateTime t0 = LocalDateTime.of(2025, 1, 1, 0, 0);
        sf.inStatelessTransaction(ss -> {
          for (int i = 1; i <= 300; i++) {
            ss.insert(new Entities.Reading(i % 3 == 0 ? "c" : "ab", i, t0.plusSeconds(i)));
          }
        });
        check(count("SELECT count(*) FROM hb_reading"), 300L, "inserted");
        sf.inStatelessTransaction(ss -> {
          long n = 0;
          double sum = 0;
          long lastId = 0;
          try (ScrollableResults<Entities.Reading> sr = ss.createSelectionQuery(
              "from Reading r where r.sensor = :s order by r.id", Entities.Reading.class)
              .setParameter("s", "ab").setFetchSize(40).scroll(ScrollMode.FORWARD_ONLY)) {
            while (sr.next()) {
              Entities.Reading r = sr.get();
              checkTrue(r.id > lastId, "ascending ids");
              lastId = r.id;
              n++;
              sum += r.value;
            }
          }
          check(n, 200L, "scrolled rows");
          check(sum, 30000.0, "scrolled sum");
          try (ScrollableResults<Long> sr = ss.createSelectionQuery(
              "select r.id from Reading r order by r.id desc", Long.class)
              .scroll(ScrollMode.SCROLL_INSENSITIVE)) {
            checkTrue(sr.last(), "last()");
            check(sr.get(), 1L, "value at last()");
            check(sr.getRowNumber(), 299, "row number at last()");
            checkTrue(sr.setRowNumber(10), "setRowNumber(10)");
            check(sr.get(), 291L, "value at row 10");
            checkTrue(sr.scroll(-5), "scroll(-5)");
            check(sr.get(), 296L, "value after scroll(-5)");
            checkTrue(sr.first(), "first()");
            check(sr.get(), 300L, "value at first()");
          }
          try (Stream<Entities.Reading> st = ss.createSelectionQuery(
              "from Reading r where r.sensor = 'c' order by r.takenAt", Entities.Reading.class)
              .setFetchSize(25).getResultStream()) {
            check(st.map(r -> (long) r.value).filter(v -> v % 2 == 0).count(), 50L,
                "stream of entities");
          }
          Entities.Reading r = ss.get(Entities.Reading.class, 7L);
          r.value = -1;
          ss.update(r);
          ss.delete(ss.get(Entities.Reading.class, 8L));
        });
        check(rows("SELECT (SELECT value FROM hb_reading WHERE id = 7), "
            + "(SELECT count(*) FROM hb_reading)"), List.of(row(-1.0, 299L)),
            "stateless update and delete");
        // A stream from a regular session, in a read-only transaction.
        try (Session s = sf.openSession()) {
          s.setDefaultReadOnly(true);
          Transaction t = s.beginTransaction();
          try (Stream<Object[]> st = s.createSelectionQuery("select r.sensor, r.value "
              + "from Reading r order by r.id", Object[].class).setFetchSize(64)
              .getResultStream()) {
            Map<Object, Double> sums = st.collect(Collectors.groupingBy(x -> x[0],
                Collectors.summingDouble(x -> (Double) x[1])));
            check(sums, Map.of("ab", 29984.0, "c", 15150.0), "sums of a stream");
          }
          t.commit();
        }
      }
    });

    kase("stateless_upsert", () -> {
      SqlLog log = new SqlLog();
      String upsert = "insert into hb_evolve (name,id) values (?,?) on conflict (id) do update "
          + "set name=excluded.name";
      try (SessionFactory sf = factory(Action.CREATE, opts().log(log),
          Entities.EvolveV1.class)) {
        sf.inStatelessTransaction(ss -> {
          Entities.EvolveV1 e = new Entities.EvolveV1();
          e.id = 1L;
          e.name = "one";
          ss.upsert(e);
          e.name = "uno";
          ss.upsert(e);
          Entities.EvolveV1 f = new Entities.EvolveV1();
          f.id = 2L;
          f.name = "two";
          ss.upsert(f);
        });
        check(log.sql, List.of(upsert, upsert, upsert), "upsert statements");
        check(rows("SELECT id, name FROM hb_evolve ORDER BY id"),
            List.of(row(1L, "uno"), row(2L, "two")), "rows after upserts");
      }
    });

    kase("query_timeout_cancels", () -> {
      try (SessionFactory sf = factory(Action.CREATE, Entities.Account.class)) {
        long start = System.nanoTime();
        SQLException e = expect(SQLException.class, "slow query",
            () -> sf.inTransaction(s -> s.createNativeQuery("SELECT 1 FROM pg_sleep(10)",
                Integer.class).setHint("jakarta.persistence.query.timeout", 1000)
                .getSingleResult()));
        long ms = (System.nanoTime() - start) / 1_000_000;
        checkTrue(ms < 8000, "cancelled after " + ms + " ms");
        check(e.getSQLState(), "57014", "SQLSTATE");
        check(e.getMessage(), "ERROR: canceling statement due to user request", "message");
        // The connection went back to the pool in a usable state.
        sf.inTransaction(s -> s.persist(new Entities.Account("t@example.com", "T", "1.00")));
        check(count("SELECT count(*) FROM hb_account"), 1L, "work after the timeout");
      }
    });
  }

  // ---------------------------------------------------------------- runner

  static String describeFailure(Throwable t) {
    String msg = t.getMessage();
    if (msg == null && t.getCause() != null) {
      msg = t.getCause().toString();
    }
    StringBuilder out = new StringBuilder(t.getClass().getSimpleName() + ": " + msg);
    SQLException sql = sqlCause(t);
    if (sql != null && (msg == null || !msg.contains(String.valueOf(sql.getMessage())))) {
      out.append(" [").append(sql.getSQLState()).append(" ").append(sql.getMessage())
          .append("]");
    }
    return out.toString();
  }

  public static void main(String[] args) throws Exception {
    Set<String> only = new TreeSet<>();
    for (String a : args) {
      if (a.equals("-v")) {
        verbose = true;
      } else {
        only.add(a);
      }
    }
    // Hibernate logs through JBoss Logging to java.util.logging: warnings and errors only,
    // unless -v.
    Logger.getLogger("org.hibernate").setLevel(verbose ? Level.INFO : Level.SEVERE);
    Class.forName("org.postgresql.Driver");
    ExecutorService runner = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r);
      t.setDaemon(true);
      return t;
    });
    for (Map.Entry<String, Body> e : CASES.entrySet()) {
      String name = e.getKey();
      if (!only.isEmpty() && !only.contains(name)) {
        continue;
      }
      Future<?> f = runner.submit(() -> {
        e.getValue().run();
        return null;
      });
      String failure = null;
      Throwable cause = null;
      try {
        f.get(CASE_TIMEOUT_S, TimeUnit.SECONDS);
      } catch (TimeoutException te) {
        f.cancel(true);
        failure = "timed out after " + CASE_TIMEOUT_S + " s";
      } catch (java.util.concurrent.ExecutionException ee) {
        cause = ee.getCause();
        failure = describeFailure(cause);
      }
      if (failure == null) {
        System.out.println("ok " + name);
      } else {
        String flat = String.join(" ", failure.trim().split("\\s+"));
        if (flat.length() > 600) {
          flat = flat.substring(0, 600);
        }
        System.out.println("not ok " + name + ": " + flat);
        if (verbose && cause != null) {
          StringWriter sw = new StringWriter();
          cause.printStackTrace(new PrintWriter(sw));
          System.err.println(sw);
        }
      }
      System.out.flush();
    }
    System.exit(0);
  }

  private HibernateSuite() {}
}
