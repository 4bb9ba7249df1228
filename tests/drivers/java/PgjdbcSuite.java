import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringReader;
import java.io.StringWriter;
import java.math.BigDecimal;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.security.cert.X509Certificate;
import java.sql.Array;
import java.sql.BatchUpdateException;
import java.sql.CallableStatement;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;
import java.sql.Types;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.time.OffsetTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.Set;
import java.util.TimeZone;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import javax.net.ssl.SSLHandshakeException;
import javax.net.ssl.SSLSession;
import javax.net.ssl.SSLSocket;

import org.postgresql.PGConnection;
import org.postgresql.PGNotification;
import org.postgresql.PGResultSetMetaData;
import org.postgresql.PGStatement;
import org.postgresql.copy.CopyManager;
import org.postgresql.ssl.LibPQFactory;
import org.postgresql.util.PGInterval;
import org.postgresql.util.PGobject;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

/**
 * What applications do with the PostgreSQL JDBC driver (pgJDBC), case by case; see
 * tests/drivers/run.py for the output protocol ("ok CASE" / "not ok CASE: MESSAGE"). Connects with
 * the libpq environment variables (JDBC does not read them, so the URL is built from them); each
 * case uses its own connections and tables, so one failure does not spill into the next. The tls_
 * cases use the certificates run.py made for the run (SHOAL_TEST_SSLROOTCERT and the others of its
 * TestPki.env()).
 */
public final class PgjdbcSuite {

  /** Seconds one case may take before it counts as hung (the suite then goes on). */
  private static final int CASE_TIMEOUT_S = 60;

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

  static String url() {
    return url(env("PGHOST", "127.0.0.1"));
  }

  static String url(String host) {
    return "jdbc:postgresql://" + host + ":" + env("PGPORT", "5432") + "/"
        + env("PGDATABASE", "postgres");
  }

  /** A connection in autocommit mode; extra driver properties as name, value pairs. */
  static Connection connect(String... props) throws SQLException {
    return connectTo(url(), props);
  }

  static Connection connectTo(String url, String... props) throws SQLException {
    Properties p = new Properties();
    p.setProperty("user", env("PGUSER", "postgres"));
    String password = System.getenv("PGPASSWORD");
    if (password != null) {
      p.setProperty("password", password);
    }
    p.setProperty("sslmode", env("PGSSLMODE", "disable"));
    p.setProperty("connectTimeout", "10");
    p.setProperty("loginTimeout", "10");
    p.setProperty("socketTimeout", "30");
    for (int i = 0; i + 1 < props.length; i += 2) {
      p.setProperty(props[i], props[i + 1]);
    }
    return DriverManager.getConnection(url, p);
  }

  static Connection connectTx(String... props) throws SQLException {
    Connection c = connect(props);
    c.setAutoCommit(false);
    return c;
  }

  static void check(Object got, Object want, String what) {
    if (!Objects.deepEquals(got, want)) {
      throw new AssertionError(what + ": got " + show(got) + ", want " + show(want));
    }
  }

  static void checkTrue(boolean condition, String what) {
    if (!condition) {
      throw new AssertionError(what);
    }
  }

  static String show(Object o) {
    if (o instanceof byte[]) {
      return "bytes" + Arrays.toString((byte[]) o);
    }
    if (o instanceof Object[]) {
      return Arrays.deepToString((Object[]) o);
    }
    if (o instanceof int[]) {
      return Arrays.toString((int[]) o);
    }
    if (o instanceof String) {
      return "'" + o + "'";
    }
    return o == null ? "null" : o + " (" + o.getClass().getSimpleName() + ")";
  }

  static void exec(Connection c, String sql) throws SQLException {
    try (Statement st = c.createStatement()) {
      st.execute(sql);
    }
  }

  static PreparedStatement prepare(Connection c, String sql, Object... params) throws SQLException {
    PreparedStatement ps = c.prepareStatement(sql);
    for (int i = 0; i < params.length; i++) {
      ps.setObject(i + 1, params[i]);
    }
    return ps;
  }

  /** All rows of a query, each a list of getObject values. */
  static List<List<Object>> rows(Connection c, String sql, Object... params) throws SQLException {
    try (PreparedStatement ps = prepare(c, sql, params); ResultSet rs = ps.executeQuery()) {
      return rows(rs);
    }
  }

  static List<List<Object>> rows(ResultSet rs) throws SQLException {
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

  /** The single value of a one-row, one-column query. */
  static Object one(Connection c, String sql, Object... params) throws SQLException {
    List<List<Object>> r = rows(c, sql, params);
    if (r.size() != 1 || r.get(0).size() != 1) {
      throw new AssertionError(sql + ": want one value, got " + r);
    }
    return r.get(0).get(0);
  }

  static long count(Connection c, String sql, Object... params) throws SQLException {
    return ((Number) one(c, sql, params)).longValue();
  }

  static List<Object> row(Object... values) {
    return Arrays.asList(values);
  }

  /** Runs body, which must fail with the given SQLSTATE; returns the exception. */
  static SQLException expectState(String sqlstate, String what, Body body) throws Exception {
    try {
      body.run();
    } catch (SQLException e) {
      if (!sqlstate.equals(e.getSQLState())) {
        throw new AssertionError(what + ": want SQLSTATE " + sqlstate + ", got " + e.getSQLState()
            + " " + e.getMessage());
      }
      return e;
    }
    throw new AssertionError(what + ": succeeded, want SQLSTATE " + sqlstate);
  }

  static ServerErrorMessage serverError(SQLException e, String what) {
    if (!(e instanceof PSQLException)) {
      throw new AssertionError(what + ": not a PSQLException: " + e);
    }
    ServerErrorMessage m = ((PSQLException) e).getServerErrorMessage();
    if (m == null) {
      throw new AssertionError(what + ": PSQLException without a ServerErrorMessage: " + e);
    }
    return m;
  }

  // ---------------------------------------------------------------- cases

  static {
    kase("connect_and_server_parameters", () -> {
      try (Connection c = connect()) {
        PGConnection pg = c.unwrap(PGConnection.class);
        check(pg.getParameterStatus("server_encoding"), "UTF8", "server_encoding");
        check(pg.getParameterStatus("client_encoding"), "UTF8", "client_encoding");
        check(pg.getParameterStatus("integer_datetimes"), "on", "integer_datetimes");
        check(pg.getParameterStatus("standard_conforming_strings"), "on",
            "standard_conforming_strings");
        check(pg.getParameterStatus("DateStyle"), "ISO, MDY", "DateStyle");
        DatabaseMetaData md = c.getMetaData();
        check(md.getDatabaseProductName(), "PostgreSQL", "getDatabaseProductName");
        checkTrue(md.getDatabaseMajorVersion() >= 10,
            "getDatabaseMajorVersion " + md.getDatabaseMajorVersion());
        check(md.getUserName(), env("PGUSER", "postgres"), "getUserName");
        check(c.getCatalog(), env("PGDATABASE", "postgres"), "getCatalog");
        check(c.getSchema(), "public", "getSchema");
        checkTrue(c.isValid(5), "isValid");
        check(count(c, "SELECT pg_backend_pid()"), (long) pg.getBackendPID(), "getBackendPID");
        // The driver sends the JVM's zone as TimeZone in the startup packet.
        check(one(c, "SHOW TimeZone"), TimeZone.getDefault().getID(), "TimeZone");
      }
    });

    kase("connection_properties_reach_the_session", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE SCHEMA IF NOT EXISTS cp_app");
        exec(c, "CREATE TABLE cp_app.only_here (id int)");
        exec(c, "INSERT INTO cp_app.only_here VALUES (7)");
      }
      try (Connection c = connect("ApplicationName", "shoal-pgjdbc", "currentSchema", "cp_app",
          "options", "-c statement_timeout=4321 -c lock_timeout=1234")) {
        check(one(c, "SHOW application_name"), "shoal-pgjdbc", "application_name");
        check(c.unwrap(PGConnection.class).getParameterStatus("application_name"), "shoal-pgjdbc",
            "application_name ParameterStatus");
        check(one(c, "SELECT current_schema()"), "cp_app", "current_schema");
        check(c.getSchema(), "cp_app", "getSchema");
        check(one(c, "SELECT id FROM only_here"), 7, "unqualified table via currentSchema");
        check(one(c, "SHOW statement_timeout"), "4321ms", "statement_timeout from options");
        check(one(c, "SHOW lock_timeout"), "1234ms", "lock_timeout from options");
        c.setClientInfo("ApplicationName", "renamed");
        check(one(c, "SHOW application_name"), "renamed", "setClientInfo ApplicationName");
        c.setSchema("public");
        check(one(c, "SELECT current_schema()"), "public", "setSchema");
      }
    });

    kase("types_round_trip_text_format", () -> roundTrip("t", "0"));
    kase("types_round_trip_binary_format", () -> roundTrip("b", "-1"));

    kase("java_time_types", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE jt (id serial PRIMARY KEY, d date, t time, ts timestamp, "
            + "tz timestamptz, ttz timetz)");
        LocalDate d = LocalDate.of(1999, 12, 31);
        LocalTime t = LocalTime.of(23, 59, 59, 999_999_000);
        LocalDateTime ts = LocalDateTime.of(2038, 1, 19, 3, 14, 8, 1000);
        OffsetDateTime tz = OffsetDateTime.of(2024, 6, 30, 23, 30, 0, 0, ZoneOffset.ofHours(2));
        OffsetTime ttz = OffsetTime.of(10, 11, 12, 0, ZoneOffset.ofHours(-3));
        try (PreparedStatement ps = c.prepareStatement(
            "INSERT INTO jt (d, t, ts, tz, ttz) VALUES (?, ?, ?, ?, ?)")) {
          ps.setObject(1, d);
          ps.setObject(2, t);
          ps.setObject(3, ts);
          ps.setObject(4, tz);
          ps.setObject(5, ttz);
          check(ps.executeUpdate(), 1, "insert count");
        }
        try (Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT d, t, ts, tz, ttz, tz::text, "
                 + "d::text, ts::text FROM jt")) {
          checkTrue(rs.next(), "a row");
          check(rs.getObject(1, LocalDate.class), d, "date as LocalDate");
          check(rs.getObject(2, LocalTime.class), t, "time as LocalTime");
          check(rs.getObject(3, LocalDateTime.class), ts, "timestamp as LocalDateTime");
          // timestamptz comes back in UTC, the same instant.
          check(rs.getObject(4, OffsetDateTime.class),
              OffsetDateTime.of(2024, 6, 30, 21, 30, 0, 0, ZoneOffset.UTC), "timestamptz");
          check(rs.getObject(4, OffsetDateTime.class).toInstant(), tz.toInstant(), "instant");
          check(rs.getObject(5, OffsetTime.class), ttz, "timetz as OffsetTime");
          check(rs.getString(7), "1999-12-31", "date text");
          check(rs.getString(8), "2038-01-19 03:14:08.000001", "timestamp text");
          check(rs.getObject(1).getClass(), java.sql.Date.class, "getObject(date) class");
          check(rs.getObject(3).getClass(), java.sql.Timestamp.class, "getObject(timestamp) class");
        }
        check(count(c, "SELECT count(*) FROM jt WHERE d = ? AND ts = ? AND tz = ?", d, ts,
            tz.withOffsetSameInstant(ZoneOffset.ofHours(-7))), 1L, "WHERE with java.time params");
        check(count(c, "SELECT count(*) FROM jt WHERE tz > ?",
            OffsetDateTime.of(2024, 6, 30, 21, 29, 59, 0, ZoneOffset.UTC)), 1L, "tz > param");
        // infinity maps to the LocalDate / OffsetDateTime extremes.
        try (Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT 'infinity'::date, '-infinity'::timestamptz")) {
          checkTrue(rs.next(), "a row");
          check(rs.getObject(1, LocalDate.class), LocalDate.MAX, "infinity date");
          check(rs.getObject(2, OffsetDateTime.class), OffsetDateTime.MIN, "-infinity timestamptz");
        }
      }
    });

    kase("session_time_zone_follows_the_jvm", () -> {
      TimeZone saved = TimeZone.getDefault();
      TimeZone.setDefault(TimeZone.getTimeZone("America/New_York"));
      try (Connection c = connect()) {
        check(one(c, "SHOW TimeZone"), "America/New_York", "TimeZone from the JVM");
        check(one(c, "SELECT '2024-01-02 03:04:05+00'::timestamptz::text"),
            "2024-01-01 22:04:05-05", "timestamptz text in the session zone");
        check(one(c, "SELECT '2024-07-02 03:04:05+00'::timestamptz::text"),
            "2024-07-01 23:04:05-04", "daylight saving time");
        try (Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT '2024-01-02 03:04:05+00'::timestamptz")) {
          checkTrue(rs.next(), "a row");
          check(rs.getTimestamp(1).toInstant().toString(), "2024-01-02T03:04:05Z",
              "getTimestamp instant");
        }
      } finally {
        TimeZone.setDefault(saved);
      }
    });

    kase("numeric_and_big_decimal", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE num (id int PRIMARY KEY, exact numeric, money numeric(10,2), "
            + "f float8)");
        BigDecimal big = new BigDecimal("-123456789012345678901234567890.000000000001");
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO num VALUES (?, ?, ?, ?)")) {
          ps.setInt(1, 1);
          ps.setBigDecimal(2, big);
          ps.setBigDecimal(3, new BigDecimal("12.345")); // rounds half away from zero to 12.35
          ps.setDouble(4, 0.1);
          ps.executeUpdate();
          ps.setInt(1, 2);
          ps.setBigDecimal(2, new BigDecimal("1E+3"));
          ps.setObject(3, new BigDecimal("0.005"));
          ps.setObject(4, Double.NaN);
          ps.executeUpdate();
        }
        try (Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT exact, money, f FROM num ORDER BY id")) {
          checkTrue(rs.next(), "row 1");
          check(rs.getBigDecimal(1), big, "unconstrained numeric");
          check(rs.getBigDecimal(2), new BigDecimal("12.35"), "numeric(10,2) rounding");
          check(rs.getDouble(3), 0.1, "float8");
          checkTrue(rs.next(), "row 2");
          check(rs.getBigDecimal(1).compareTo(new BigDecimal("1000")), 0, "1E+3");
          check(rs.getBigDecimal(2), new BigDecimal("0.01"), "0.005 rounds to 0.01");
          checkTrue(Double.isNaN(rs.getDouble(3)), "float8 NaN");
        }
        check(one(c, "SELECT sum(money) FROM num"), new BigDecimal("12.36"), "sum(numeric)");
        check(one(c, "SELECT 'NaN'::numeric::text"), "NaN", "numeric NaN as text");
        expectState("22003", "numeric(10,2) overflow",
            () -> exec(c, "INSERT INTO num VALUES (3, 0, 123456789.5, 0)"));
      }
    });

    kase("bytea_large_values_and_streams", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE blobs (id bigserial PRIMARY KEY, data bytea NOT NULL, "
            + "created timestamptz DEFAULT now())");
        byte[] big = new byte[1 << 20];
        for (int i = 0; i < big.length; i++) {
          big[i] = (byte) (i * 31 + (i >> 8));
        }
        byte[] small = {0, 1, 2, (byte) 0xff, (byte) '\\', (byte) '\''};
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO blobs (data) VALUES (?)")) {
          ps.setBytes(1, big);
          ps.executeUpdate();
          ps.setBinaryStream(1, new ByteArrayInputStream(small), small.length);
          ps.executeUpdate();
          ps.setObject(1, new byte[0]);
          ps.executeUpdate();
        }
        try (Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT id, data, length(data), created IS NOT NULL "
                 + "FROM blobs ORDER BY id")) {
          checkTrue(rs.next(), "row 1");
          check(rs.getLong(1), 1L, "bigserial 1");
          check(rs.getBytes(2), big, "1 MiB bytea");
          check(rs.getInt(3), big.length, "length()");
          check(rs.getBoolean(4), true, "default now()");
          checkTrue(rs.next(), "row 2");
          check(rs.getBinaryStream(2).readAllBytes(), small, "getBinaryStream");
          checkTrue(rs.next(), "row 3");
          check(rs.getBytes(2), new byte[0], "empty bytea");
        }
        check(one(c, "SELECT encode(data, 'hex') FROM blobs WHERE id = 2"), "000102ff5c27",
            "hex of the streamed value");
        check(count(c, "SELECT count(*) FROM blobs WHERE data = ?", (Object) small), 1L,
            "WHERE data = bytes");
      }
    });

    kase("uuid_values", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE uu (id uuid PRIMARY KEY, parent uuid)");
        UUID a = UUID.fromString("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
        UUID b = UUID.randomUUID();
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO uu VALUES (?, ?)")) {
          ps.setObject(1, a);
          ps.setNull(2, Types.OTHER);
          ps.executeUpdate();
          ps.setObject(1, b);
          ps.setObject(2, a);
          ps.executeUpdate();
          // A string bound as OTHER is typed by the server.
          ps.setObject(1, "00000000-0000-0000-0000-000000000001", Types.OTHER);
          ps.setObject(2, a.toString(), Types.OTHER);
          ps.executeUpdate();
        }
        check(one(c, "SELECT id FROM uu WHERE parent IS NULL"), a, "uuid as UUID");
        check(count(c, "SELECT count(*) FROM uu WHERE parent = ?", a), 2L, "WHERE uuid = UUID");
        try (Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT id FROM uu WHERE id = '" + b + "'")) {
          checkTrue(rs.next(), "row");
          check(rs.getObject(1, UUID.class), b, "getObject(UUID.class)");
          check(rs.getString(1), b.toString(), "getString of uuid");
        }
        check(one(c, "SELECT ?::uuid::text", new UUID(0, 1)),
            "00000000-0000-0000-0000-000000000001", "UUID param cast to text");
        expectState("22P02", "malformed uuid",
            () -> one(c, "SELECT 'not-a-uuid'::uuid"));
      }
    });

    kase("json_and_jsonb", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE docs (id int PRIMARY KEY, j json, jb jsonb)");
        String doc = "{\"s\": \"x\", \"a\": 1, \"b\": [1, 2, {\"c\": null}]}";
        PGobject j = new PGobject();
        j.setType("json");
        j.setValue(doc);
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO docs VALUES (?, ?, ?)")) {
          ps.setInt(1, 1);
          ps.setObject(2, j);
          ps.setObject(3, doc, Types.OTHER);
          ps.executeUpdate();
        }
        try (Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT j, jb, jb->>'s', jb->'b'->1, "
                 + "jb @> '{\"a\": 1}' FROM docs")) {
          checkTrue(rs.next(), "row");
          check(rs.getString(1), doc, "json keeps its text");
          check(rs.getString(2), "{\"a\": 1, \"b\": [1, 2, {\"c\": null}], \"s\": \"x\"}",
              "jsonb normalizes");
          Object o = rs.getObject(2);
          checkTrue(o instanceof PGobject, "jsonb getObject is a PGobject, got " + show(o));
          check(((PGobject) o).getType(), "jsonb", "PGobject type");
          check(rs.getString(3), "x", "->>");
          check(rs.getString(4), "2", "->");
          check(rs.getBoolean(5), true, "@>");
          check(rs.getMetaData().getColumnTypeName(1), "json", "json type name");
          check(rs.getMetaData().getColumnTypeName(2), "jsonb", "jsonb type name");
        }
        // In a PreparedStatement the jsonb ? operator is written ?? (a lone ? is a parameter).
        check(one(c, "SELECT jb->'b'->2->>'c' IS NULL FROM docs WHERE jb ?? 'a' AND id = ?", 1),
            true, "jsonb ?? operator");
      }
    });

    kase("arrays_via_create_array_of", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE arr (id int PRIMARY KEY, tags text[], nums int[], "
            + "grid int[][], ids uuid[])");
        UUID u = UUID.fromString("12345678-1234-5678-1234-567812345678");
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO arr VALUES (?, ?, ?, ?, ?)")) {
          ps.setInt(1, 1);
          ps.setArray(2, c.createArrayOf("text", new String[] {"a", "b c", null, "\"q\"", ""}));
          ps.setArray(3, c.createArrayOf("int4", new Integer[] {1, 2, 3}));
          ps.setArray(4, c.createArrayOf("int4", new Integer[][] {{1, 2}, {3, 4}}));
          ps.setArray(5, c.createArrayOf("uuid", new UUID[] {u}));
          ps.executeUpdate();
          ps.setInt(1, 2);
          ps.setObject(2, new String[] {});
          ps.setObject(3, new int[] {5, 6});
          ps.setNull(4, Types.ARRAY);
          ps.setNull(5, Types.ARRAY);
          ps.executeUpdate();
        }
        try (Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT tags, nums, grid, ids FROM arr ORDER BY id")) {
          checkTrue(rs.next(), "row 1");
          check(rs.getArray(1).getArray(), new String[] {"a", "b c", null, "\"q\"", ""}, "text[]");
          check(rs.getArray(1).getBaseTypeName(), "text", "text[] base type");
          check(rs.getArray(2).getArray(), new Integer[] {1, 2, 3}, "int[]");
          check(rs.getArray(2).getBaseType(), Types.INTEGER, "int[] base type");
          check(rs.getArray(3).getArray(), new Integer[][] {{1, 2}, {3, 4}}, "int[][]");
          check(rs.getArray(4).getArray(), new UUID[] {u}, "uuid[]");
          check(rs.getString(2), "{1,2,3}", "int[] text");
          check(rs.getMetaData().getColumnTypeName(2), "_int4", "int[] type name");
          check(rs.getMetaData().getColumnType(2), Types.ARRAY, "int[] sql type");
          checkTrue(rs.next(), "row 2");
          check(rs.getArray(1).getArray(), new String[] {}, "empty text[]");
          check(rs.getArray(2).getArray(), new Integer[] {5, 6}, "int[] from int[] param");
          check(rs.getArray(3), null, "NULL array");
        }
        check(one(c, "SELECT id FROM arr WHERE 2 = ANY(nums)"), 1, "= ANY(column)");
        check(count(c, "SELECT count(*) FROM arr WHERE id = ANY(?)",
            c.createArrayOf("int4", new Integer[] {1, 5})), 1L, "= ANY(array param)");
        check(one(c, "SELECT array_length(tags, 1) FROM arr WHERE id = 1"), 5, "array_length");
        try (Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT unnest(nums) FROM arr WHERE id = 1")) {
          List<Integer> got = new ArrayList<>();
          while (rs.next()) {
            got.add(rs.getInt(1));
          }
          check(got, List.of(1, 2, 3), "unnest");
        }
      }
    });

    kase("set_object_conversions_and_get_object_types", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE so (i int, l bigint, s smallint, n numeric, t text, b boolean, "
            + "ts timestamp, d date, u uuid, f real)");
        try (PreparedStatement ps = c.prepareStatement(
            "INSERT INTO so VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")) {
          ps.setObject(1, "42", Types.INTEGER);
          ps.setObject(2, 9_000_000_000L);
          ps.setObject(3, (short) 7);
          ps.setObject(4, 2.5, Types.NUMERIC);
          ps.setObject(5, 12, Types.VARCHAR);
          ps.setObject(6, "true", Types.BOOLEAN);
          ps.setTimestamp(7, java.sql.Timestamp.valueOf("2024-03-04 05:06:07.25"));
          ps.setDate(8, java.sql.Date.valueOf("2024-03-04"));
          ps.setObject(9, UUID.fromString("12345678-1234-5678-1234-567812345678"));
          ps.setFloat(10, 0.25f);
          ps.executeUpdate();
          for (int i = 1; i <= 10; i++) {
            ps.setNull(i, Types.NULL);
          }
          ps.executeUpdate();
        }
        try (Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT * FROM so ORDER BY i NULLS LAST")) {
          checkTrue(rs.next(), "row 1");
          check(rs.getObject(1), 42, "int4 -> Integer");
          check(rs.getObject(2), 9_000_000_000L, "int8 -> Long");
          check(rs.getObject(3), 7, "int2 -> Integer");
          check(rs.getObject(4), new BigDecimal("2.5"), "numeric -> BigDecimal");
          check(rs.getObject(5), "12", "text -> String");
          check(rs.getObject(6), Boolean.TRUE, "bool -> Boolean");
          check(rs.getObject(7), java.sql.Timestamp.valueOf("2024-03-04 05:06:07.25"),
              "timestamp -> Timestamp");
          check(rs.getObject(8), java.sql.Date.valueOf("2024-03-04"), "date -> Date");
          check(rs.getObject(9), UUID.fromString("12345678-1234-5678-1234-567812345678"),
              "uuid -> UUID");
          check(rs.getObject(10), 0.25f, "float4 -> Float");
          ResultSetMetaData md = rs.getMetaData();
          check(md.getColumnClassName(1), "java.lang.Integer", "class name int4");
          check(md.getColumnClassName(2), "java.lang.Long", "class name int8");
          check(md.getColumnClassName(4), "java.math.BigDecimal", "class name numeric");
          check(md.getColumnClassName(7), "java.sql.Timestamp", "class name timestamp");
          checkTrue(rs.next(), "row 2");
          for (int i = 1; i <= 10; i++) {
            check(rs.getObject(i), null, "NULL column " + i);
          }
          check(rs.getInt(1), 0, "getInt of NULL");
          check(rs.wasNull(), true, "wasNull");
        }
      }
    });

    kase("stringtype_unspecified_lets_the_server_type_strings", () -> {
      try (Connection c = connect("stringtype", "unspecified")) {
        exec(c, "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')");
        exec(c, "CREATE TABLE st (id uuid PRIMARY KEY, doc jsonb, m mood, n int, at date)");
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO st VALUES (?, ?, ?, ?, ?)")) {
          ps.setString(1, "12345678-1234-5678-1234-567812345678");
          ps.setString(2, "{\"k\": [1]}");
          ps.setString(3, "happy");
          ps.setString(4, "17");
          ps.setString(5, "2024-12-25");
          check(ps.executeUpdate(), 1, "insert count");
        }
        check(rows(c, "SELECT id::text, doc->'k'->>0, m::text, n, at::text FROM st"),
            List.of(row("12345678-1234-5678-1234-567812345678", "1", "happy", 17, "2024-12-25")),
            "values typed by the server");
        check(count(c, "SELECT count(*) FROM st WHERE m > ?", "ok"), 1L, "enum comparison");
      }
    });

    kase("crud_with_returning_and_update_counts", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL, qty int)");
        List<Integer> ids = new ArrayList<>();
        try (PreparedStatement ps = c.prepareStatement(
            "INSERT INTO items (name, qty) VALUES (?, ?) RETURNING id")) {
          for (int i = 0; i < 5; i++) {
            ps.setString(1, "n" + i);
            ps.setInt(2, i);
            try (ResultSet rs = ps.executeQuery()) {
              checkTrue(rs.next(), "RETURNING row");
              ids.add(rs.getInt(1));
            }
          }
        }
        check(ids, List.of(1, 2, 3, 4, 5), "serial ids");
        try (PreparedStatement ps = c.prepareStatement(
            "UPDATE items SET qty = qty + 10 WHERE id > ?")) {
          ps.setInt(1, 2);
          check(ps.executeUpdate(), 3, "UPDATE count");
        }
        try (Statement st = c.createStatement()) {
          check(st.executeUpdate("UPDATE items SET qty = 0 WHERE id = 999"), 0, "no-match UPDATE");
          checkTrue(st.execute("DELETE FROM items WHERE id = 1 RETURNING name"),
              "DELETE RETURNING gives a result set");
          check(rows(st.getResultSet()), List.of(row("n0")), "DELETE RETURNING");
          check(st.executeUpdate("DELETE FROM items WHERE id = 2"), 1, "DELETE count");
          checkTrue(!st.execute("INSERT INTO items (name) VALUES ('x')"), "INSERT gives no rows");
          check(st.getUpdateCount(), 1, "getUpdateCount");
          check(st.executeUpdate("CREATE TABLE items_copy AS SELECT * FROM items"), 4,
              "CREATE TABLE AS count");
        }
        check(one(c, "SELECT sum(qty) FROM items"), 39L, "sum");
        try (PreparedStatement ps = c.prepareStatement("SELECT name FROM items WHERE id = ?")) {
          ps.setInt(1, 1);
          try (ResultSet rs = ps.executeQuery()) {
            checkTrue(!rs.next(), "deleted row gone");
          }
        }
        check(one(c, "INSERT INTO items (name, qty) VALUES ('up', 1) "
            + "ON CONFLICT (id) DO UPDATE SET qty = excluded.qty RETURNING qty"), 1, "upsert");
      }
    });

    kase("generated_keys_after_insert", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE gk (id serial PRIMARY KEY, name text, note text DEFAULT 'd', "
            + "created timestamptz DEFAULT now())");
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO gk (name) VALUES (?)",
            Statement.RETURN_GENERATED_KEYS)) {
          ps.setString(1, "a");
          check(ps.executeUpdate(), 1, "update count with generated keys");
          try (ResultSet keys = ps.getGeneratedKeys()) {
            checkTrue(keys.next(), "a generated key row");
            check(keys.getInt("id"), 1, "generated id");
            check(keys.getString("note"), "d", "default column in the keys (RETURNING *)");
            checkTrue(keys.getTimestamp("created") != null, "created default");
            checkTrue(!keys.next(), "one key row");
          }
        }
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO gk (name) VALUES (?)",
            new String[] {"id"})) {
          ps.setString(1, "b");
          ps.executeUpdate();
          try (ResultSet keys = ps.getGeneratedKeys()) {
            checkTrue(keys.next(), "key row");
            check(keys.getMetaData().getColumnCount(), 1, "only the named column");
            check(keys.getLong(1), 2L, "id by column name");
          }
          // Generated keys from a batch.
          for (String n : List.of("c", "d", "e")) {
            ps.setString(1, n);
            ps.addBatch();
          }
          check(ps.executeBatch(), new int[] {1, 1, 1}, "batch counts");
          List<Long> keys = new ArrayList<>();
          try (ResultSet rs = ps.getGeneratedKeys()) {
            while (rs.next()) {
              keys.add(rs.getLong(1));
            }
          }
          check(keys, List.of(3L, 4L, 5L), "batch generated keys");
        }
        try (Statement st = c.createStatement()) {
          check(st.executeUpdate("INSERT INTO gk (name) VALUES ('f'), ('g')",
              Statement.RETURN_GENERATED_KEYS), 2, "Statement insert count");
          try (ResultSet keys = st.getGeneratedKeys()) {
            List<Integer> got = new ArrayList<>();
            while (keys.next()) {
              got.add(keys.getInt("id"));
            }
            check(got, List.of(6, 7), "Statement generated keys");
          }
        }
        check(one(c, "SELECT currval('gk_id_seq')"), 7L, "currval");
      }
    });

    kase("batch_insert_update_delete", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE many (id int PRIMARY KEY, v text)");
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO many VALUES (?, ?)")) {
          for (int i = 0; i < 200; i++) {
            ps.setInt(1, i);
            ps.setString(2, "v" + i);
            ps.addBatch();
          }
          int[] counts = ps.executeBatch();
          check(counts.length, 200, "count of update counts");
          for (int n : counts) {
            check(n, 1, "each insert count");
          }
        }
        try (Statement st = c.createStatement()) {
          st.addBatch("UPDATE many SET v = 'x' WHERE id < 10");
          st.addBatch("DELETE FROM many WHERE id >= 190");
          st.addBatch("INSERT INTO many VALUES (1000, 'k')");
          st.addBatch("UPDATE many SET v = 'none' WHERE id = -1");
          check(st.executeBatch(), new int[] {10, 10, 1, 0}, "Statement batch counts");
        }
        check(count(c, "SELECT count(*) FROM many"), 191L, "rows after batches");
        check(count(c, "SELECT count(*) FROM many WHERE v = 'x'"), 10L, "updated rows");
      }
    });

    kase("batch_failure_reports_and_rolls_back", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE bf (id int PRIMARY KEY)");
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO bf VALUES (?)")) {
          for (int id : new int[] {1, 2, 2, 3}) {
            ps.setInt(1, id);
            ps.addBatch();
          }
          SQLException next = null;
          try {
            ps.executeBatch();
            throw new AssertionError("duplicate key in a batch accepted");
          } catch (BatchUpdateException e) {
            next = e.getNextException();
          }
          checkTrue(next != null, "BatchUpdateException has a next exception");
          check(next.getSQLState(), "23505", "next exception SQLSTATE");
          // In autocommit mode the driver sends the batch as one implicit transaction (one Sync
          // after all statements): all or none.
          check(count(c, "SELECT count(*) FROM bf"), 0L, "rows after the failed batch");
          check(serverError(next, "batch").getConstraint(), "bf_pkey", "constraint");
        }
        exec(c, "INSERT INTO bf VALUES (1)");
        check(count(c, "SELECT count(*) FROM bf"), 1L, "connection usable after the batch");
      }
    });

    kase("batch_with_rewrite_batched_inserts", () -> {
      try (Connection c = connect("reWriteBatchedInserts", "true")) {
        exec(c, "CREATE TABLE rw (id int PRIMARY KEY, v text, at date, d numeric(6,2))");
        c.setAutoCommit(false);
        try (PreparedStatement ps = c.prepareStatement(
            "INSERT INTO rw (id, v, at, d) VALUES (?, ?, ?, ?)")) {
          for (int i = 0; i < 1000; i++) {
            ps.setInt(1, i);
            ps.setString(2, i % 7 == 0 ? null : "v" + i);
            ps.setObject(3, LocalDate.of(2024, 1, 1).plusDays(i));
            ps.setBigDecimal(4, new BigDecimal(i).movePointLeft(2));
            ps.addBatch();
          }
          int[] counts = ps.executeBatch();
          check(counts.length, 1000, "count of update counts");
          for (int n : counts) {
            // Rewritten into multi-row VALUES, the driver cannot tell rows apart.
            check(n, Statement.SUCCESS_NO_INFO, "each rewritten insert count");
          }
        }
        c.commit();
        check(rows(c, "SELECT count(*), count(v), max(at)::text, sum(d) FROM rw"),
            List.of(row(1000L, 857L, "2026-09-26", new BigDecimal("4995.00"))), "rewritten rows");
        c.commit();
        // A failing rewritten batch inside a transaction: nothing of it stays.
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO rw (id, v) VALUES (?, ?)")) {
          for (int id : new int[] {2000, 2001, 5}) {
            ps.setInt(1, id);
            ps.setString(2, "dup");
            ps.addBatch();
          }
          try {
            ps.executeBatch();
            throw new AssertionError("duplicate key accepted");
          } catch (BatchUpdateException e) {
            check(e.getNextException() == null ? e.getSQLState()
                : e.getNextException().getSQLState(), "23505", "SQLSTATE");
          }
        }
        c.rollback();
        check(count(c, "SELECT count(*) FROM rw WHERE v = 'dup'"), 0L, "failed batch rolled back");
        c.commit();
      }
    });

    kase("errors_carry_sqlstate_and_constraint", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE u (id int PRIMARY KEY CONSTRAINT u_positive CHECK (id > 0), "
            + "email text CONSTRAINT u_email_key UNIQUE, name text NOT NULL DEFAULT 'n')");
        exec(c, "CREATE TABLE u_child (id int PRIMARY KEY, u_id int "
            + "CONSTRAINT u_child_u_fkey REFERENCES u (id))");
        exec(c, "INSERT INTO u (id, email) VALUES (1, 'a@x')");
        SQLException e = expectState("23505", "duplicate",
            () -> exec(c, "INSERT INTO u (id, email) VALUES (2, 'a@x')"));
        ServerErrorMessage m = serverError(e, "unique");
        check(m.getConstraint(), "u_email_key", "unique constraint");
        check(m.getTable(), "u", "unique table");
        check(m.getSchema(), "public", "unique schema");
        check(m.getSeverity(), "ERROR", "severity");
        check(m.getDetail(), "Key (email)=(a@x) already exists.", "unique detail");
        check(m.getSQLState(), "23505", "ServerErrorMessage SQLSTATE");

        m = serverError(expectState("23502", "not null",
            () -> exec(c, "INSERT INTO u (id, name) VALUES (3, NULL)")), "not null");
        check(m.getColumn(), "name", "not null column");
        check(m.getTable(), "u", "not null table");

        m = serverError(expectState("23514", "check",
            () -> exec(c, "INSERT INTO u (id) VALUES (-1)")), "check");
        check(m.getConstraint(), "u_positive", "check constraint");
        check(m.getTable(), "u", "check table");

        m = serverError(expectState("23503", "foreign key",
            () -> exec(c, "INSERT INTO u_child VALUES (1, 42)")), "fk");
        check(m.getConstraint(), "u_child_u_fkey", "fk constraint");
        check(m.getTable(), "u_child", "fk table");
        check(m.getDetail(), "Key (u_id)=(42) is not present in table \"u\".", "fk detail");

        // The same through a PreparedStatement (extended protocol).
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO u (id, email) VALUES (?, ?)")) {
          ps.setInt(1, 9);
          ps.setString(2, "a@x");
          m = serverError(expectState("23505", "prepared duplicate", ps::executeUpdate),
              "prepared");
          check(m.getConstraint(), "u_email_key", "prepared unique constraint");
        }
        check(count(c, "SELECT count(*) FROM u"), 1L, "rows after the errors");
      }
    });

    kase("error_positions_and_messages", () -> {
      try (Connection c = connect()) {
        ServerErrorMessage m = serverError(expectState("42601", "syntax",
            () -> exec(c, "SELEC 1")), "syntax");
        check(m.getPosition(), 1, "syntax error position");
        check(m.getMessage(), "syntax error at or near \"SELEC\"", "syntax message");

        m = serverError(expectState("42P01", "undefined table",
            () -> exec(c, "SELECT * FROM no_such_table")), "undefined table");
        check(m.getPosition(), 15, "undefined table position");
        check(m.getMessage(), "relation \"no_such_table\" does not exist", "undefined table msg");

        exec(c, "CREATE TABLE ep (id int)");
        m = serverError(expectState("42703", "undefined column",
            () -> exec(c, "SELECT id, nope FROM ep")), "undefined column");
        check(m.getPosition(), 12, "undefined column position");

        expectState("22012", "division by zero", () -> {
          try (PreparedStatement ps = c.prepareStatement("SELECT 1 / ?")) {
            ps.setInt(1, 0);
            ps.executeQuery().close();
          }
        });
        expectState("22P02", "invalid integer", () -> one(c, "SELECT 'abc'::int"));
        expectState("42883", "undefined function", () -> one(c, "SELECT no_such_fn(1)"));
        expectState("42804", "datatype mismatch", () -> exec(c, "SELECT 1 WHERE 1"));
        m = serverError(expectState("P0001", "RAISE",
            () -> exec(c, "DO $$BEGIN RAISE EXCEPTION 'custom %', 42 USING HINT = 'h'; END$$")),
            "raise");
        check(m.getMessage(), "custom 42", "RAISE message");
        check(m.getHint(), "h", "RAISE hint");
        check(count(c, "SELECT 1"), 1L, "connection usable after errors");
      }
    });

    kase("aborted_transaction_refuses_statements_until_rollback", () -> {
      try (Connection c = connectTx()) {
        exec(c, "CREATE TABLE tx (id int PRIMARY KEY)");
        c.commit();
        exec(c, "INSERT INTO tx VALUES (1)");
        expectState("23505", "duplicate", () -> exec(c, "INSERT INTO tx VALUES (1)"));
        SQLException e = expectState("25P02", "statement in an aborted transaction",
            () -> exec(c, "INSERT INTO tx VALUES (2)"));
        checkTrue(e.getMessage().contains("current transaction is aborted"),
            "25P02 message: " + e.getMessage());
        c.rollback();
        check(count(c, "SELECT count(*) FROM tx"), 0L, "rows after rollback");
        c.commit();
        // COMMIT of an aborted transaction rolls it back.
        exec(c, "INSERT INTO tx VALUES (5)");
        expectState("22012", "division by zero", () -> one(c, "SELECT 1/0"));
        try {
          c.commit();
        } catch (SQLException ignored) {
          // pgJDBC reports the rollback of a failed transaction on commit; PostgreSQL rolled back.
        }
        check(count(c, "SELECT count(*) FROM tx"), 0L, "rows after COMMIT of a failed tx");
        c.commit();
      }
    });

    kase("savepoints", () -> {
      try (Connection c = connectTx()) {
        exec(c, "CREATE TABLE sp (id int PRIMARY KEY)");
        c.commit();
        exec(c, "INSERT INTO sp VALUES (1)");
        Savepoint s1 = c.setSavepoint();
        expectState("23505", "duplicate", () -> exec(c, "INSERT INTO sp VALUES (1)"));
        c.rollback(s1);
        exec(c, "INSERT INTO sp VALUES (2)");
        Savepoint s2 = c.setSavepoint("named");
        check(s2.getSavepointName(), "named", "savepoint name");
        exec(c, "INSERT INTO sp VALUES (3)");
        Savepoint s3 = c.setSavepoint("inner");
        exec(c, "INSERT INTO sp VALUES (4)");
        c.rollback(s3);
        c.releaseSavepoint(s2);
        c.commit();
        check(rows(c, "SELECT id FROM sp ORDER BY id"), List.of(row(1), row(2), row(3)),
            "rows kept");
        c.commit();
        // A savepoint rolled back past undoes everything after it, including DDL.
        Savepoint s4 = c.setSavepoint();
        exec(c, "CREATE TABLE sp_later (id int)");
        exec(c, "DELETE FROM sp");
        c.rollback(s4);
        c.commit();
        check(count(c, "SELECT count(*) FROM sp"), 3L, "delete undone");
        check(one(c, "SELECT to_regclass('sp_later') IS NULL"), true, "DDL undone");
        c.commit();
      }
    });

    kase("autosave_always_survives_errors_in_a_transaction", () -> {
      try (Connection c = connectTx("autosave", "always")) {
        exec(c, "CREATE TABLE aus (id int PRIMARY KEY)");
        c.commit();
        exec(c, "INSERT INTO aus VALUES (1)");
        expectState("23505", "duplicate", () -> exec(c, "INSERT INTO aus VALUES (1)"));
        exec(c, "INSERT INTO aus VALUES (2)");
        c.commit();
        check(rows(c, "SELECT id FROM aus ORDER BY id"), List.of(row(1), row(2)), "rows");
        c.commit();
      }
    });

    kase("isolation_levels", () -> {
      Map<Integer, String> levels = new LinkedHashMap<>();
      levels.put(Connection.TRANSACTION_READ_UNCOMMITTED, "read uncommitted");
      levels.put(Connection.TRANSACTION_READ_COMMITTED, "read committed");
      levels.put(Connection.TRANSACTION_REPEATABLE_READ, "repeatable read");
      levels.put(Connection.TRANSACTION_SERIALIZABLE, "serializable");
      List<String> failures = new ArrayList<>();
      for (Map.Entry<Integer, String> level : levels.entrySet()) {
        try (Connection c = connectTx()) {
          c.setTransactionIsolation(level.getKey());
          Object shown = one(c, "SHOW transaction_isolation");
          if (!level.getValue().equals(shown)) {
            failures.add(level.getValue() + ": SHOW transaction_isolation gave " + shown);
          }
          if (c.getTransactionIsolation() != level.getKey()) {
            failures.add(level.getValue() + ": getTransactionIsolation gave "
                + c.getTransactionIsolation());
          }
          c.commit();
        } catch (SQLException e) {
          failures.add(level.getValue() + ": " + e.getSQLState() + " " + e.getMessage());
        }
      }
      checkTrue(failures.isEmpty(), String.join("; ", failures));
      try (Connection c = connect()) {
        check(c.getTransactionIsolation(), Connection.TRANSACTION_READ_COMMITTED, "default");
        check(c.getMetaData().getDefaultTransactionIsolation(),
            Connection.TRANSACTION_READ_COMMITTED, "metadata default");
      }
    });

    kase("repeatable_read_sees_a_snapshot", () -> {
      try (Connection setup = connect()) {
        exec(setup, "CREATE TABLE rr (id int PRIMARY KEY, v int)");
        exec(setup, "INSERT INTO rr VALUES (1, 10)");
      }
      try (Connection a = connectTx(); Connection b = connect()) {
        a.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
        check(one(a, "SELECT v FROM rr WHERE id = 1"), 10, "first read");
        exec(b, "UPDATE rr SET v = 20 WHERE id = 1");
        check(one(a, "SELECT v FROM rr WHERE id = 1"), 10, "snapshot read");
        expectState("40001", "update of a row changed since the snapshot",
            () -> exec(a, "UPDATE rr SET v = v + 1 WHERE id = 1"));
        a.rollback();
        check(one(a, "SELECT v FROM rr WHERE id = 1"), 20, "new transaction sees the update");
        a.commit();
      }
    });

    kase("serializable_write_skew_fails_with_40001", () -> {
      try (Connection setup = connect()) {
        exec(setup, "CREATE TABLE oncall (name text PRIMARY KEY, on_duty bool)");
        exec(setup, "INSERT INTO oncall VALUES ('a', true), ('b', true)");
      }
      try (Connection a = connectTx(); Connection b = connectTx()) {
        a.setTransactionIsolation(Connection.TRANSACTION_SERIALIZABLE);
        b.setTransactionIsolation(Connection.TRANSACTION_SERIALIZABLE);
        check(count(a, "SELECT count(*) FROM oncall WHERE on_duty"), 2L, "a reads");
        check(count(b, "SELECT count(*) FROM oncall WHERE on_duty"), 2L, "b reads");
        exec(a, "UPDATE oncall SET on_duty = false WHERE name = 'a'");
        String failedAt = null;
        try {
          exec(b, "UPDATE oncall SET on_duty = false WHERE name = 'b'");
          a.commit();
          b.commit();
        } catch (SQLException e) {
          check(e.getSQLState(), "40001", "serialization failure SQLSTATE (" + e.getMessage() + ")");
          failedAt = e.getMessage();
        }
        checkTrue(failedAt != null, "write skew committed under SERIALIZABLE");
        b.rollback();
        a.commit();
      }
      try (Connection c = connect()) {
        check(count(c, "SELECT count(*) FROM oncall WHERE on_duty"), 1L,
            "exactly one update committed");
      }
    });

    kase("read_only_transactions", () -> {
      try (Connection c = connectTx()) {
        exec(c, "CREATE TABLE ro (id int)");
        c.commit();
        c.setReadOnly(true);
        checkTrue(c.isReadOnly(), "isReadOnly");
        check(one(c, "SHOW transaction_read_only"), "on", "transaction_read_only");
        expectState("25006", "write in a read-only transaction",
            () -> exec(c, "INSERT INTO ro VALUES (1)"));
        c.rollback();
        c.setReadOnly(false);
        exec(c, "INSERT INTO ro VALUES (1)");
        c.commit();
        check(count(c, "SELECT count(*) FROM ro"), 1L, "write after read-only");
        c.commit();
      }
    });

    kase("copy_manager_text_in_and_out", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE cp (id int PRIMARY KEY, name text, at date)");
        CopyManager cm = c.unwrap(PGConnection.class).getCopyAPI();
        StringBuilder in = new StringBuilder();
        for (int i = 0; i < 1000; i++) {
          in.append(i).append('\t').append("name ").append(i).append("\\t")
              .append('\t').append(i == 5 ? "\\N" : "2024-01-01").append('\n');
        }
        long copied = cm.copyIn("COPY cp (id, name, at) FROM STDIN", new StringReader(
            in.toString()));
        check(copied, 1000L, "copyIn row count");
        check(rows(c, "SELECT count(*), max(name), count(at) FROM cp"),
            List.of(row(1000L, "name 999\t", 999L)), "rows copied in");
        StringWriter out = new StringWriter();
        long n = cm.copyOut("COPY (SELECT id, name, at FROM cp WHERE id IN (0, 1, 5) ORDER BY id) "
            + "TO STDOUT", out);
        check(n, 3L, "copyOut row count");
        check(out.toString(), "0\tname 0\\t\t2024-01-01\n1\tname 1\\t\t2024-01-01\n"
            + "5\tname 5\\t\t\\N\n", "copyOut text");
        // CSV with a header, quoting and an explicit NULL marker.
        exec(c, "CREATE TABLE cp_csv (id int, note text)");
        check(cm.copyIn("COPY cp_csv FROM STDIN (FORMAT csv, HEADER true, NULL 'NULL')",
            new StringReader("id,note\n1,\"a, b\"\n2,NULL\n3,\"say \"\"hi\"\"\"\n")), 3L,
            "csv copyIn");
        StringWriter csv = new StringWriter();
        cm.copyOut("COPY (SELECT * FROM cp_csv ORDER BY id) TO STDOUT (FORMAT csv, HEADER)", csv);
        check(csv.toString(), "id,note\n1,\"a, b\"\n2,\n3,\"say \"\"hi\"\"\"\n", "csv copyOut");
      }
    });

    kase("copy_manager_binary_and_streaming_api", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE cpb (id int PRIMARY KEY, v numeric, b bytea, t timestamptz)");
        exec(c, "INSERT INTO cpb SELECT g, g + 0.5, decode(lpad(to_hex(g), 4, '0'), 'hex'), "
            + "'2024-05-06 07:08:09+00'::timestamptz + g * interval '1 minute' "
            + "FROM generate_series(0, 99) g");
        exec(c, "CREATE TABLE cpb2 (LIKE cpb)");
        CopyManager cm = c.unwrap(PGConnection.class).getCopyAPI();
        ByteArrayOutputStream bin = new ByteArrayOutputStream();
        check(cm.copyOut("COPY cpb TO STDOUT (FORMAT binary)", bin), 100L, "binary copyOut rows");
        byte[] bytes = bin.toByteArray();
        byte[] signature = "PGCOPY\n\377\r\n\0".getBytes(StandardCharsets.ISO_8859_1);
        check(Arrays.copyOf(bytes, signature.length), signature, "binary COPY signature");
        check(cm.copyIn("COPY cpb2 FROM STDIN (FORMAT binary)", new ByteArrayInputStream(bytes)),
            100L, "binary copyIn rows");
        check(count(c, "SELECT count(*) FROM cpb a JOIN cpb2 b USING (id) "
            + "WHERE a.v = b.v AND a.b = b.b AND a.t = b.t"), 100L, "binary round trip");
        // The low-level CopyIn: rows written in pieces, then endCopy.
        exec(c, "CREATE TABLE cps (id int, s text)");
        org.postgresql.copy.CopyIn ci = cm.copyIn("COPY cps FROM STDIN WITH (FORMAT text)");
        byte[] part1 = "1\tone\n2\ttw".getBytes(StandardCharsets.UTF_8);
        byte[] part2 = "o\n3\tthr\u00e9\u00e9\n".getBytes(StandardCharsets.UTF_8);
        ci.writeToCopy(part1, 0, part1.length);
        ci.writeToCopy(part2, 0, part2.length);
        check(ci.endCopy(), 3L, "CopyIn.endCopy rows");
        check(rows(c, "SELECT s FROM cps ORDER BY id"),
            List.of(row("one"), row("two"), row("thr\u00e9\u00e9")), "streamed rows");
        // Bad data: the COPY fails with 22P02 and the connection stays usable.
        SQLException e = expectState("22P02", "bad integer in COPY",
            () -> cm.copyIn("COPY cps FROM STDIN", new StringReader("x\ty\n")));
        checkTrue(e.getMessage().contains("COPY cps"), "COPY context in: " + e.getMessage());
        check(count(c, "SELECT count(*) FROM cps"), 3L, "connection usable after a failed COPY");
      }
    });

    kase("fetch_size_streams_in_a_transaction", () -> {
      try (Connection c = connectTx()) {
        exec(c, "CREATE TABLE big AS SELECT g AS id, repeat('x', 100) AS pad "
            + "FROM generate_series(1, 5000) g");
        c.commit();
        try (PreparedStatement ps = c.prepareStatement("SELECT id, pad FROM big ORDER BY id")) {
          ps.setFetchSize(100);
          try (ResultSet rs = ps.executeQuery()) {
            check(rs.getFetchSize(), 100, "getFetchSize");
            long total = 0;
            int seen = 0;
            while (rs.next()) {
              total += rs.getInt(1);
              seen++;
              if (seen == 1) {
                // The driver reads through a named portal, 100 rows at a time: other statements
                // can run beside the open portal.
                exec(c, "INSERT INTO big VALUES (0, 'meanwhile')");
              }
            }
            check(seen, 5000, "rows streamed");
            check(total, 5000L * 5001 / 2, "sum streamed");
          }
        }
        check(count(c, "SELECT count(*) FROM big"), 5001L, "insert beside the open portal");
        c.commit();
        // A second streamed query in the same transaction, through a plain Statement.
        try (Statement st = c.createStatement()) {
          st.setFetchSize(7);
          try (ResultSet rs = st.executeQuery("SELECT id FROM big WHERE id <= 20 ORDER BY id")) {
            int n = 0;
            while (rs.next()) {
              check(rs.getInt(1), n, "ordered id");
              n++;
            }
            check(n, 21, "rows through Statement");
          }
        }
        c.commit();
      }
    });

    kase("open_portal_listed_in_pg_cursors", () -> {
      try (Connection c = connectTx()) {
        exec(c, "CREATE TABLE big_cur AS SELECT g AS id FROM generate_series(1, 1000) g");
        c.commit();
        try (PreparedStatement ps = c.prepareStatement("SELECT id FROM big_cur ORDER BY id")) {
          ps.setFetchSize(10);
          try (ResultSet rs = ps.executeQuery()) {
            checkTrue(rs.next(), "first row");
            // The suspended named portal of the fetch-size read is a cursor of the transaction.
            check(count(c, "SELECT count(*) FROM pg_cursors WHERE name <> ''"), 1L,
                "open portal in pg_cursors");
            int n = 1;
            while (rs.next()) {
              n++;
            }
            check(n, 1000, "rows");
          }
        }
        c.commit();
        check(count(c, "SELECT count(*) FROM pg_cursors WHERE name <> ''"), 0L,
            "no portal after commit");
        c.commit();
      }
    });

    kase("listen_notify_with_timeout", () -> {
      try (Connection listener = connect(); Connection sender = connect()) {
        PGConnection pg = listener.unwrap(PGConnection.class);
        exec(listener, "LISTEN jobs");
        long t0 = System.nanoTime();
        PGNotification[] none = pg.getNotifications(300);
        long waitedMs = (System.nanoTime() - t0) / 1_000_000;
        checkTrue(none == null || none.length == 0, "no notification yet");
        checkTrue(waitedMs >= 250, "getNotifications(300) returned after " + waitedMs + " ms");
        exec(sender, "NOTIFY jobs, 'first'");
        exec(sender, "SELECT pg_notify('jobs', 'second')");
        exec(sender, "NOTIFY other_channel, 'not for us'");
        List<String> got = new ArrayList<>();
        List<Integer> pids = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 5000;
        while (got.size() < 2 && System.currentTimeMillis() < deadline) {
          PGNotification[] ns = pg.getNotifications(500);
          if (ns != null) {
            for (PGNotification n : ns) {
              got.add(n.getName() + ":" + n.getParameter());
              pids.add(n.getPID());
            }
          }
        }
        check(got, List.of("jobs:first", "jobs:second"), "notifications");
        int senderPid = sender.unwrap(PGConnection.class).getBackendPID();
        check(pids, List.of(senderPid, senderPid), "notifying backend pid");
        // A NOTIFY in a transaction arrives only at commit.
        sender.setAutoCommit(false);
        exec(sender, "NOTIFY jobs, 'third'");
        PGNotification[] early = pg.getNotifications(300);
        checkTrue(early == null || early.length == 0, "notification before commit");
        sender.commit();
        got.clear();
        deadline = System.currentTimeMillis() + 5000;
        while (got.isEmpty() && System.currentTimeMillis() < deadline) {
          PGNotification[] ns = pg.getNotifications(500);
          if (ns != null) {
            for (PGNotification n : ns) {
              got.add(n.getName() + ":" + n.getParameter());
            }
          }
        }
        check(got, List.of("jobs:third"), "notification after commit");
        exec(listener, "UNLISTEN jobs");
        exec(sender, "NOTIFY jobs, 'after unlisten'");
        sender.commit();
        PGNotification[] after = pg.getNotifications(300);
        checkTrue(after == null || after.length == 0, "notification after UNLISTEN");
      }
    });

    kase("server_prepare_after_prepare_threshold", () -> {
      try (Connection c = connect("prepareThreshold", "3")) {
        exec(c, "CREATE TABLE prep (id int PRIMARY KEY, v int)");
        try (PreparedStatement ins = c.prepareStatement("INSERT INTO prep VALUES (?, ?)")) {
          for (int i = 0; i < 20; i++) {
            ins.setInt(1, i);
            ins.setInt(2, i * i);
            ins.executeUpdate();
          }
        }
        try (PreparedStatement ps = c.prepareStatement(
            "SELECT v FROM prep WHERE id = ? /* threshold_marker */")) {
          PGStatement pgs = ps.unwrap(PGStatement.class);
          check(pgs.getPrepareThreshold(), 3, "prepareThreshold from the URL");
          List<Integer> got = new ArrayList<>();
          List<Boolean> serverPrepared = new ArrayList<>();
          for (int i = 0; i < 8; i++) {
            ps.setInt(1, i);
            try (ResultSet rs = ps.executeQuery()) {
              checkTrue(rs.next(), "row " + i);
              got.add(rs.getInt(1));
              checkTrue(!rs.next(), "one row for " + i);
            }
            serverPrepared.add(pgs.isUseServerPrepare());
          }
          check(got, List.of(0, 1, 4, 9, 16, 25, 36, 49), "results across the threshold");
          // Unnamed statements for the first executions, a named server-side one (Parse once,
          // Bind/Execute after) from the third execution on; isUseServerPrepare tells whether
          // the next execution will use it.
          check(serverPrepared, List.of(false, true, true, true, true, true, true, true),
              "isUseServerPrepare");
        }
        // A statement closed is deallocated lazily; the names never clash on reuse.
        for (int round = 0; round < 3; round++) {
          try (PreparedStatement ps = c.prepareStatement("SELECT ?::int + 1")) {
            for (int i = 0; i < 5; i++) {
              ps.setInt(1, i);
              try (ResultSet rs = ps.executeQuery()) {
                checkTrue(rs.next(), "row");
                check(rs.getInt(1), i + 1, "reused statement");
              }
            }
          }
        }
      }
    });

    kase("server_prepared_statements_in_pg_prepared_statements", () -> {
      try (Connection c = connect("prepareThreshold", "3")) {
        try (PreparedStatement ps = c.prepareStatement("SELECT ?::int /* threshold_marker */")) {
          List<Long> named = new ArrayList<>();
          for (int i = 0; i < 5; i++) {
            ps.setInt(1, i);
            ps.executeQuery().close();
            // The pattern is split so that this query's own text does not match it.
            named.add(count(c, "SELECT count(*) FROM pg_prepared_statements "
                + "WHERE statement LIKE '%threshold' || '_marker%' AND NOT from_sql"));
          }
          check(named, List.of(0L, 0L, 1L, 1L, 1L), "named statement after the threshold");
        }
      }
      try (Connection c = connect("prepareThreshold", "-1")) {
        try (PreparedStatement ps = c.prepareStatement("SELECT 1 /* minus_one_marker */")) {
          ps.executeQuery().close();
        }
        check(rows(c, "SELECT statement, from_sql FROM pg_prepared_statements "
            + "WHERE statement LIKE '%minus_one' || '_marker%'"),
            List.of(row("SELECT 1 /* minus_one_marker */", false)),
            "server-prepared on the first execution with prepareThreshold=-1");
      }
    });

    kase("prepare_threshold_minus_one_binary_transfer", () -> {
      try (Connection c = connect("prepareThreshold", "-1", "binaryTransfer", "true")) {
        exec(c, "CREATE TABLE pbin (id int PRIMARY KEY, ts timestamptz, n numeric, b bytea, "
            + "f float8, u uuid, d date)");
        OffsetDateTime ts = OffsetDateTime.of(2024, 2, 29, 12, 0, 0, 123_456_000, ZoneOffset.UTC);
        UUID u = UUID.fromString("12345678-1234-5678-1234-567812345678");
        try (PreparedStatement ps = c.prepareStatement(
            "INSERT INTO pbin VALUES (?, ?, ?, ?, ?, ?, ?)")) {
          ps.setInt(1, 1);
          ps.setObject(2, ts);
          ps.setBigDecimal(3, new BigDecimal("-0.000123"));
          ps.setBytes(4, new byte[] {1, 2, 3});
          ps.setDouble(5, -1.25e300);
          ps.setObject(6, u);
          ps.setObject(7, LocalDate.of(2000, 1, 1));
          check(ps.executeUpdate(), 1, "insert");
        }
        try (PreparedStatement ps = c.prepareStatement("SELECT id, ts, n, b, f, u, d FROM pbin "
            + "WHERE id = ?")) {
          ps.setInt(1, 1);
          try (ResultSet rs = ps.executeQuery()) {
            checkTrue(rs.next(), "row");
            PGResultSetMetaData md = rs.getMetaData().unwrap(PGResultSetMetaData.class);
            check(md.getFormat(1), 1, "int4 sent in binary");
            check(md.getFormat(2), 1, "timestamptz sent in binary");
            check(md.getFormat(6), 1, "uuid sent in binary");
            check(md.getFormat(7), 1, "date sent in binary");
            check(rs.getInt(1), 1, "int4");
            check(rs.getObject(2, OffsetDateTime.class), ts, "timestamptz");
            check(rs.getBigDecimal(3), new BigDecimal("-0.000123"), "numeric");
            check(rs.getBytes(4), new byte[] {1, 2, 3}, "bytea");
            check(rs.getDouble(5), -1.25e300, "float8");
            check(rs.getObject(6), u, "uuid");
            check(rs.getObject(7, LocalDate.class), LocalDate.of(2000, 1, 1), "date");
          }
        }
      }
    });

    kase("sql_level_prepare_execute", () -> {
      try (Connection c = connect()) {
        exec(c, "PREPARE q (int) AS SELECT $1 * 2");
        check(one(c, "EXECUTE q (21)"), 42, "EXECUTE");
        check(rows(c, "SELECT name, from_sql FROM pg_prepared_statements WHERE name = 'q'"),
            List.of(row("q", true)), "pg_prepared_statements");
        exec(c, "DEALLOCATE q");
        expectState("26000", "EXECUTE after DEALLOCATE", () -> one(c, "EXECUTE q (1)"));
      }
    });

    kase("advisory_locks", () -> {
      try (Connection a = connect(); Connection b = connect()) {
        check(one(a, "SELECT pg_try_advisory_lock(42)"), true, "a locks");
        check(one(b, "SELECT pg_try_advisory_lock(42)"), false, "b cannot");
        check(one(a, "SELECT pg_advisory_unlock(42)"), true, "a unlocks");
        check(one(b, "SELECT pg_try_advisory_lock(42)"), true, "b locks");
        check(one(b, "SELECT pg_try_advisory_lock(43)"), true, "b locks another");
        exec(b, "SELECT pg_advisory_unlock_all()");
        check(one(a, "SELECT pg_try_advisory_lock(43)"), true, "free after unlock_all");
        check(one(a, "SELECT pg_advisory_unlock(43)"), true, "a unlocks 43");
        check(one(b, "SELECT pg_advisory_unlock(42)"), false, "b no longer holds 42");
        b.setAutoCommit(false);
        check(one(b, "SELECT pg_try_advisory_xact_lock(7)"), true, "xact lock");
        check(one(a, "SELECT pg_try_advisory_lock(7)"), false, "held until commit");
        b.commit();
        check(one(a, "SELECT pg_try_advisory_lock(7)"), true, "released at commit");
      }
    });

    kase("schema_migration_in_a_transaction", () -> {
      try (Connection c = connectTx()) {
        exec(c, "CREATE TABLE mig (id int PRIMARY KEY, n int)");
        exec(c, "INSERT INTO mig VALUES (1, 10)");
        c.commit();
        exec(c, "ALTER TABLE mig ADD COLUMN note text DEFAULT 'x' NOT NULL");
        exec(c, "ALTER TABLE mig ALTER COLUMN n TYPE bigint");
        exec(c, "ALTER TABLE mig RENAME COLUMN note TO remark");
        exec(c, "CREATE INDEX mig_n ON mig (n)");
        exec(c, "CREATE TABLE mig_version (v int)");
        exec(c, "INSERT INTO mig_version VALUES (2)");
        c.commit();
        check(rows(c, "SELECT n, remark FROM mig"), List.of(row(10L, "x")), "migrated row");
        check(one(c, "SELECT data_type FROM information_schema.columns "
            + "WHERE table_name = 'mig' AND column_name = 'n'"), "bigint", "new column type");
        try (ResultSet rs = c.getMetaData().getColumns(null, "public", "mig", "n")) {
          checkTrue(rs.next(), "getColumns row");
          check(rs.getString("TYPE_NAME"), "int8", "getColumns TYPE_NAME after ALTER");
          check(rs.getInt("DATA_TYPE"), Types.BIGINT, "getColumns DATA_TYPE after ALTER");
        }
        c.commit();
        // A failed migration leaves nothing behind.
        exec(c, "ALTER TABLE mig ADD COLUMN doomed int");
        exec(c, "CREATE TABLE mig_doomed (id int)");
        expectState("42701", "duplicate column", () -> exec(c, "ALTER TABLE mig ADD COLUMN n int"));
        c.rollback();
        check(one(c, "SELECT to_regclass('mig_doomed') IS NULL"), true, "table rolled back");
        check(count(c, "SELECT count(*) FROM information_schema.columns "
            + "WHERE table_name = 'mig' AND column_name = 'doomed'"), 0L, "column rolled back");
        c.commit();
      }
    });

    kase("database_metadata_tables_and_columns", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE md_parent (id serial PRIMARY KEY, code varchar(50) NOT NULL, "
            + "price numeric(10,2), body text, at timestamptz DEFAULT now(), flag boolean)");
        exec(c, "COMMENT ON TABLE md_parent IS 'parents'");
        exec(c, "COMMENT ON COLUMN md_parent.code IS 'the code'");
        exec(c, "CREATE VIEW md_view AS SELECT id, code FROM md_parent");
        exec(c, "CREATE SEQUENCE md_seq");
        DatabaseMetaData md = c.getMetaData();
        Map<String, String> tables = new HashMap<>();
        try (ResultSet rs = md.getTables(null, "public", "md\\_%", null)) {
          while (rs.next()) {
            tables.put(rs.getString("TABLE_NAME"), rs.getString("TABLE_TYPE"));
            if (rs.getString("TABLE_NAME").equals("md_parent")) {
              check(rs.getString("REMARKS"), "parents", "table REMARKS");
              check(rs.getString("TABLE_SCHEM"), "public", "TABLE_SCHEM");
            }
          }
        }
        check(tables.get("md_parent"), "TABLE", "table type");
        check(tables.get("md_view"), "VIEW", "view type");
        check(tables.get("md_seq"), "SEQUENCE", "sequence type");
        check(tables.get("md_parent_id_seq"), "SEQUENCE", "serial sequence");
        // As Hibernate's schema validator asks: tables and views only.
        Set<String> onlyTables = new TreeSet<>();
        try (ResultSet rs = md.getTables(null, null, "md_%", new String[] {"TABLE", "VIEW"})) {
          while (rs.next()) {
            onlyTables.add(rs.getString("TABLE_NAME"));
          }
        }
        check(onlyTables, new TreeSet<>(Set.of("md_parent", "md_view")), "TABLE and VIEW types");

        Map<String, Map<String, Object>> cols = new LinkedHashMap<>();
        try (ResultSet rs = md.getColumns(null, "public", "md_parent", "%")) {
          while (rs.next()) {
            Map<String, Object> col = new HashMap<>();
            for (String k : List.of("TYPE_NAME", "COLUMN_DEF", "IS_NULLABLE", "IS_AUTOINCREMENT",
                "REMARKS")) {
              col.put(k, rs.getString(k));
            }
            for (String k : List.of("DATA_TYPE", "COLUMN_SIZE", "DECIMAL_DIGITS", "NULLABLE",
                "ORDINAL_POSITION")) {
              col.put(k, rs.getInt(k));
            }
            cols.put(rs.getString("COLUMN_NAME"), col);
          }
        }
        check(new ArrayList<>(cols.keySet()), List.of("id", "code", "price", "body", "at", "flag"),
            "columns in order");
        Map<String, Object> id = cols.get("id");
        check(id.get("TYPE_NAME"), "serial", "serial TYPE_NAME");
        check(id.get("DATA_TYPE"), Types.INTEGER, "serial DATA_TYPE");
        check(id.get("COLUMN_DEF"), "nextval('md_parent_id_seq'::regclass)", "serial default");
        check(id.get("IS_AUTOINCREMENT"), "YES", "IS_AUTOINCREMENT");
        check(id.get("NULLABLE"), DatabaseMetaData.columnNoNulls, "pk NULLABLE");
        Map<String, Object> code = cols.get("code");
        check(code.get("TYPE_NAME"), "varchar", "varchar TYPE_NAME");
        check(code.get("DATA_TYPE"), Types.VARCHAR, "varchar DATA_TYPE");
        check(code.get("COLUMN_SIZE"), 50, "varchar COLUMN_SIZE");
        check(code.get("IS_NULLABLE"), "NO", "NOT NULL");
        check(code.get("REMARKS"), "the code", "column REMARKS");
        check(code.get("ORDINAL_POSITION"), 2, "ORDINAL_POSITION");
        Map<String, Object> price = cols.get("price");
        check(price.get("TYPE_NAME"), "numeric", "numeric TYPE_NAME");
        check(price.get("DATA_TYPE"), Types.NUMERIC, "numeric DATA_TYPE");
        check(price.get("COLUMN_SIZE"), 10, "numeric precision");
        check(price.get("DECIMAL_DIGITS"), 2, "numeric scale");
        check(price.get("IS_NULLABLE"), "YES", "nullable");
        check(price.get("IS_AUTOINCREMENT"), "NO", "not autoincrement");
        check(cols.get("body").get("TYPE_NAME"), "text", "text TYPE_NAME");
        check(cols.get("body").get("DATA_TYPE"), Types.VARCHAR, "text DATA_TYPE");
        check(cols.get("at").get("TYPE_NAME"), "timestamptz", "timestamptz TYPE_NAME");
        check(cols.get("at").get("DATA_TYPE"), Types.TIMESTAMP, "timestamptz DATA_TYPE");
        check(cols.get("at").get("COLUMN_DEF"), "now()", "now() default");
        check(cols.get("flag").get("TYPE_NAME"), "bool", "bool TYPE_NAME");
        check(cols.get("flag").get("DATA_TYPE"), Types.BIT, "bool DATA_TYPE");

        Set<String> schemas = new TreeSet<>();
        try (ResultSet rs = md.getSchemas()) {
          while (rs.next()) {
            schemas.add(rs.getString("TABLE_SCHEM"));
          }
        }
        checkTrue(schemas.containsAll(Set.of("public", "pg_catalog", "information_schema")),
            "getSchemas: " + schemas);
        List<String> catalogs = new ArrayList<>();
        try (ResultSet rs = md.getCatalogs()) {
          while (rs.next()) {
            catalogs.add(rs.getString(1));
          }
        }
        checkTrue(catalogs.contains(env("PGDATABASE", "postgres")), "getCatalogs: " + catalogs);
        List<String> types = new ArrayList<>();
        try (ResultSet rs = md.getTableTypes()) {
          while (rs.next()) {
            types.add(rs.getString(1));
          }
        }
        checkTrue(types.containsAll(List.of("TABLE", "VIEW", "SEQUENCE", "INDEX")),
            "getTableTypes: " + types);
      }
    });

    kase("database_metadata_keys_and_indexes", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE mk_parent (a int, b text, PRIMARY KEY (a, b), "
            + "code text CONSTRAINT mk_parent_code_key UNIQUE)");
        exec(c, "CREATE TABLE mk_child (id bigserial PRIMARY KEY, pa int, pb text, "
            + "CONSTRAINT mk_child_parent_fk FOREIGN KEY (pa, pb) REFERENCES mk_parent (a, b) "
            + "ON DELETE CASCADE)");
        exec(c, "CREATE INDEX mk_child_pb_idx ON mk_child (pb DESC)");
        DatabaseMetaData md = c.getMetaData();
        List<List<Object>> pk = new ArrayList<>();
        try (ResultSet rs = md.getPrimaryKeys(null, "public", "mk_parent")) {
          while (rs.next()) {
            pk.add(row(rs.getString("COLUMN_NAME"), rs.getInt("KEY_SEQ"),
                rs.getString("PK_NAME"), rs.getString("TABLE_NAME")));
          }
        }
        pk.sort((x, y) -> Integer.compare((Integer) x.get(1), (Integer) y.get(1)));
        check(pk, List.of(row("a", 1, "mk_parent_pkey", "mk_parent"),
            row("b", 2, "mk_parent_pkey", "mk_parent")), "getPrimaryKeys");

        List<List<Object>> fks = new ArrayList<>();
        try (ResultSet rs = md.getImportedKeys(null, "public", "mk_child")) {
          while (rs.next()) {
            fks.add(row(rs.getString("PKTABLE_NAME"), rs.getString("PKCOLUMN_NAME"),
                rs.getString("FKTABLE_NAME"), rs.getString("FKCOLUMN_NAME"),
                rs.getInt("KEY_SEQ"), rs.getString("FK_NAME"), rs.getString("PK_NAME"),
                rs.getInt("DELETE_RULE"), rs.getInt("UPDATE_RULE")));
          }
        }
        check(fks, List.of(
            row("mk_parent", "a", "mk_child", "pa", 1, "mk_child_parent_fk", "mk_parent_pkey",
                DatabaseMetaData.importedKeyCascade, DatabaseMetaData.importedKeyNoAction),
            row("mk_parent", "b", "mk_child", "pb", 2, "mk_child_parent_fk", "mk_parent_pkey",
                DatabaseMetaData.importedKeyCascade, DatabaseMetaData.importedKeyNoAction)),
            "getImportedKeys");
        int exported = 0;
        try (ResultSet rs = md.getExportedKeys(null, "public", "mk_parent")) {
          while (rs.next()) {
            check(rs.getString("FKTABLE_NAME"), "mk_child", "getExportedKeys FKTABLE_NAME");
            exported++;
          }
        }
        check(exported, 2, "getExportedKeys rows");

        List<List<Object>> idx = new ArrayList<>();
        try (ResultSet rs = md.getIndexInfo(null, "public", "mk_parent", false, false)) {
          while (rs.next()) {
            if (rs.getShort("TYPE") == DatabaseMetaData.tableIndexStatistic) {
              continue;
            }
            idx.add(row(rs.getString("INDEX_NAME"), rs.getBoolean("NON_UNIQUE"),
                rs.getInt("ORDINAL_POSITION"), rs.getString("COLUMN_NAME")));
          }
        }
        idx.sort((x, y) -> (x.get(0) + "/" + x.get(2)).compareTo(y.get(0) + "/" + y.get(2)));
        check(idx, List.of(row("mk_parent_code_key", false, 1, "code"),
            row("mk_parent_pkey", false, 1, "a"), row("mk_parent_pkey", false, 2, "b")),
            "getIndexInfo on the parent");
        List<List<Object>> childIdx = new ArrayList<>();
        try (ResultSet rs = md.getIndexInfo(null, "public", "mk_child", false, true)) {
          while (rs.next()) {
            childIdx.add(row(rs.getString("INDEX_NAME"), rs.getBoolean("NON_UNIQUE"),
                rs.getString("COLUMN_NAME"), rs.getString("ASC_OR_DESC")));
          }
        }
        childIdx.sort((x, y) -> ((String) x.get(0)).compareTo((String) y.get(0)));
        check(childIdx, List.of(row("mk_child_pb_idx", true, "pb", "D"),
            row("mk_child_pkey", false, "id", "A")), "getIndexInfo on the child");
        int uniqueOnly = 0;
        try (ResultSet rs = md.getIndexInfo(null, "public", "mk_child", true, true)) {
          while (rs.next()) {
            uniqueOnly++;
          }
        }
        check(uniqueOnly, 1, "getIndexInfo unique=true");
      }
    });

    kase("database_metadata_type_info_and_keywords", () -> {
      try (Connection c = connect()) {
        DatabaseMetaData md = c.getMetaData();
        Map<String, Integer> types = new HashMap<>();
        try (ResultSet rs = md.getTypeInfo()) {
          while (rs.next()) {
            types.put(rs.getString("TYPE_NAME"), rs.getInt("DATA_TYPE"));
          }
        }
        Map<String, Integer> want = new LinkedHashMap<>();
        want.put("int2", Types.SMALLINT);
        want.put("int4", Types.INTEGER);
        want.put("int8", Types.BIGINT);
        want.put("numeric", Types.NUMERIC);
        want.put("float8", Types.DOUBLE);
        want.put("text", Types.VARCHAR);
        want.put("varchar", Types.VARCHAR);
        want.put("bool", Types.BIT);
        want.put("bytea", Types.BINARY);
        want.put("date", Types.DATE);
        want.put("timestamp", Types.TIMESTAMP);
        want.put("uuid", Types.OTHER);
        want.put("jsonb", Types.OTHER);
        want.put("_int4", Types.ARRAY);
        for (Map.Entry<String, Integer> e : want.entrySet()) {
          check(types.get(e.getKey()), e.getValue(), "getTypeInfo " + e.getKey());
        }
        String keywords = md.getSQLKeywords();
        checkTrue(keywords != null && Arrays.asList(keywords.split(",")).contains("ilike"),
            "getSQLKeywords contains ilike: " + keywords);
        checkTrue(!Arrays.asList(keywords.split(",")).contains("select"),
            "getSQLKeywords leaves out SQL:2003 words");
        check(md.getIdentifierQuoteString(), "\"", "identifier quote");
        checkTrue(md.storesLowerCaseIdentifiers(), "stores lower-case identifiers");
        // Functions and procedures, as tools list them.
        exec(c, "CREATE FUNCTION md_add(a int, b int) RETURNS int LANGUAGE sql AS "
            + "'SELECT a + b'");
        List<String> fns = new ArrayList<>();
        try (ResultSet rs = md.getFunctions(null, "public", "md\\_add")) {
          while (rs.next()) {
            fns.add(rs.getString("FUNCTION_NAME"));
          }
        }
        check(fns, List.of("md_add"), "getFunctions");
        List<String> params = new ArrayList<>();
        try (ResultSet rs = md.getFunctionColumns(null, "public", "md\\_add", "%")) {
          while (rs.next()) {
            params.add(rs.getString("COLUMN_NAME") + ":" + rs.getString("TYPE_NAME"));
          }
        }
        check(params, List.of("returnValue:int4", "a:int4", "b:int4"), "getFunctionColumns");
      }
    });

    kase("result_set_metadata", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE rsm (id serial PRIMARY KEY, price numeric(10,2) NOT NULL, "
            + "name varchar(20), at timestamptz, big bigint)");
        exec(c, "INSERT INTO rsm (price, name) VALUES (1.5, 'a')");
        try (PreparedStatement ps = c.prepareStatement(
            "SELECT id, price, name AS label, at, big, 1 + 1 AS two FROM rsm")) {
          // Metadata before execution comes from a Describe.
          ResultSetMetaData pre = ps.getMetaData();
          check(pre.getColumnCount(), 6, "columns before execution");
          check(pre.getColumnTypeName(2), "numeric", "described numeric");
          try (ResultSet rs = ps.executeQuery()) {
            ResultSetMetaData md = rs.getMetaData();
            check(md.getColumnCount(), 6, "getColumnCount");
            check(md.getTableName(1), "rsm", "getTableName");
            check(md.getTableName(2), "rsm", "getTableName numeric");
            check(md.getTableName(6), "", "getTableName of an expression");
            check(md.getColumnName(1), "id", "getColumnName");
            check(md.getColumnLabel(3), "label", "getColumnLabel");
            check(md.unwrap(PGResultSetMetaData.class).getBaseColumnName(3), "name",
                "getBaseColumnName");
            check(md.unwrap(PGResultSetMetaData.class).getBaseSchemaName(1), "public",
                "getBaseSchemaName");
            check(md.getColumnTypeName(1), "serial", "serial type name");
            check(md.isAutoIncrement(1), true, "isAutoIncrement");
            check(md.getColumnTypeName(2), "numeric", "numeric type name");
            check(md.getColumnType(2), Types.NUMERIC, "numeric sql type");
            check(md.getPrecision(2), 10, "numeric(10,2) precision");
            check(md.getScale(2), 2, "numeric(10,2) scale");
            check(md.isNullable(2), ResultSetMetaData.columnNoNulls, "NOT NULL");
            check(md.isNullable(3), ResultSetMetaData.columnNullable, "nullable");
            check(md.getColumnTypeName(3), "varchar", "varchar type name");
            check(md.getPrecision(3), 20, "varchar(20) precision");
            check(md.getColumnDisplaySize(3), 20, "varchar(20) display size");
            check(md.getColumnTypeName(4), "timestamptz", "timestamptz type name");
            check(md.getColumnType(4), Types.TIMESTAMP, "timestamptz sql type");
            check(md.getColumnTypeName(5), "int8", "int8 type name");
            check(md.getColumnType(5), Types.BIGINT, "int8 sql type");
            check(md.getColumnTypeName(6), "int4", "expression type");
            check(md.isAutoIncrement(2), false, "numeric not autoincrement");
            checkTrue(rs.next(), "row");
            check(rs.getBigDecimal("price"), new BigDecimal("1.50"), "value by column label");
            check(rs.getString("label"), "a", "value by alias");
            check(rs.findColumn("TWO"), 6, "findColumn is case-insensitive");
          }
        }
      }
    });

    kase("callable_statement_user_functions", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE FUNCTION add_one(x int) RETURNS int LANGUAGE sql AS 'SELECT x + 1'");
        exec(c, "CREATE FUNCTION split_pair(x int, OUT lo int, OUT hi int) LANGUAGE sql AS "
            + "'SELECT x - 1, x + 1'");
        try (CallableStatement cs = c.prepareCall("{? = call add_one(?)}")) {
          cs.registerOutParameter(1, Types.INTEGER);
          cs.setInt(2, 41);
          cs.execute();
          check(cs.getInt(1), 42, "{? = call add_one(?)}");
        }
        try (CallableStatement cs = c.prepareCall("{call split_pair(?, ?, ?)}")) {
          cs.setInt(1, 10);
          cs.registerOutParameter(2, Types.INTEGER);
          cs.registerOutParameter(3, Types.INTEGER);
          cs.execute();
          check(List.of(cs.getInt(2), cs.getInt(3)), List.of(9, 11), "OUT parameters");
        }
      }
    });

    kase("callable_statement_builtin_function_and_jdbc_escapes", () -> {
      try (Connection c = connect()) {
        try (CallableStatement cs = c.prepareCall("{? = call upper(?)}")) {
          cs.registerOutParameter(1, Types.VARCHAR);
          cs.setString(2, "abc");
          cs.execute();
          check(cs.getString(1), "ABC", "built-in function");
        }
        check(rows(c, "SELECT {fn ucase('x')}, {fn concat('a', 'b')}, {d '2024-01-02'}, "
            + "{fn abs(-3)}, {fn length('four')}"),
            List.of(row("X", "ab", java.sql.Date.valueOf("2024-01-02"), 3, 4)), "escapes");
        check(one(c, "SELECT {ts '2024-01-02 03:04:05'}::text"), "2024-01-02 03:04:05",
            "{ts} escape");
        check(one(c, "SELECT 'a_b' LIKE 'a\\_b' {escape '\\'}"), true, "{escape}");
      }
    });

    kase("multiple_statements_in_one_execute", () -> {
      try (Connection c = connect(); Statement st = c.createStatement()) {
        exec(c, "CREATE TABLE ms (id int)");
        boolean isRs = st.execute("INSERT INTO ms VALUES (1), (2); SELECT count(*) FROM ms; "
            + "UPDATE ms SET id = id + 10; SELECT id FROM ms ORDER BY id");
        check(isRs, false, "the first result is the INSERT's update count");
        List<Object> results = new ArrayList<>();
        while (true) {
          if (isRs) {
            results.add(rows(st.getResultSet()));
          } else {
            int n = st.getUpdateCount();
            if (n == -1) {
              break;
            }
            results.add(n);
          }
          isRs = st.getMoreResults();
        }
        check(results, List.of(2, List.of(row(2L)), 2, List.of(row(11), row(12))),
            "results in order");
      }
    });

    kase("query_timeout_cancels_the_statement", () -> {
      try (Connection c = connect(); Statement st = c.createStatement()) {
        st.setQueryTimeout(1);
        long t0 = System.nanoTime();
        expectState("57014", "statement canceled by setQueryTimeout",
            () -> st.executeQuery("SELECT pg_sleep(5)").close());
        long ms = (System.nanoTime() - t0) / 1_000_000;
        checkTrue(ms < 4000, "cancel took " + ms + " ms");
        st.setQueryTimeout(0);
        check(count(c, "SELECT 1"), 1L, "connection usable after the cancel");
        // statement_timeout set by the session behaves the same way.
        exec(c, "SET statement_timeout = '200ms'");
        expectState("57014", "statement_timeout", () -> one(c, "SELECT pg_sleep(3)"));
        exec(c, "RESET statement_timeout");
      }
    });

    kase("pool_reset_queries", () -> {
      try (Connection c = connect("prepareThreshold", "1", "ApplicationName", "pool-app")) {
        try (PreparedStatement ps = c.prepareStatement("SELECT ?::int * 3")) {
          ps.setInt(1, 2);
          try (ResultSet rs = ps.executeQuery()) {
            checkTrue(rs.next(), "row");
            check(rs.getInt(1), 6, "before DISCARD ALL");
          }
          exec(c, "SET application_name = 'pooled'");
          exec(c, "DISCARD ALL");
          check(one(c, "SHOW application_name"), "", "application_name after DISCARD ALL");
          // The driver saw DISCARD ALL and prepares its statement again.
          ps.setInt(1, 3);
          try (ResultSet rs = ps.executeQuery()) {
            checkTrue(rs.next(), "row");
            check(rs.getInt(1), 9, "after DISCARD ALL");
          }
        }
        exec(c, "RESET ALL");
        exec(c, "DEALLOCATE ALL");
        check(one(c, "SELECT pg_try_advisory_lock(5)"), true, "lock before unlock_all");
        exec(c, "SELECT pg_advisory_unlock_all()");
        check(one(c, "SELECT pg_advisory_unlock(5)"), false, "lock gone after unlock_all");
        checkTrue(c.isValid(2), "isValid after reset");
      }
    });

    kase("catalog_introspection", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE cat_parent (id int PRIMARY KEY)");
        exec(c, "CREATE TABLE cat_child (id int PRIMARY KEY, p int REFERENCES cat_parent (id))");
        check(rows(c, "SELECT to_regclass('cat_child') IS NOT NULL, to_regtype('int4')::text"),
            List.of(row(true, "integer")), "to_regclass / to_regtype");
        check(rows(c, "SELECT con.conname, cl.relname FROM pg_constraint con "
            + "JOIN pg_class cl ON cl.oid = con.confrelid "
            + "WHERE con.contype = 'f' AND con.conrelid = 'cat_child'::regclass"),
            List.of(row("cat_child_p_fkey", "cat_parent")), "foreign keys from pg_constraint");
        check(rows(c, "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            + "WHERE a.attrelid = 'cat_child'::regclass AND a.attnum > 0 AND NOT a.attisdropped "
            + "ORDER BY a.attnum"), List.of(row("id", "integer"), row("p", "integer")),
            "pg_attribute");
        check(one(c, "SELECT count(*) FROM information_schema.tables "
            + "WHERE table_schema = 'public' AND table_name LIKE 'cat\\_%'"), 2L,
            "information_schema.tables");
      }
    });

    kase("set_returning_functions_in_select_list", () -> {
      try (Connection c = connect()) {
        check(rows(c, "SELECT generate_series(1, 3)"), List.of(row(1), row(2), row(3)),
            "generate_series");
      }
    });

    kase("concurrent_connections", () -> {
      try (Connection c = connect()) {
        exec(c, "CREATE TABLE conc (id int PRIMARY KEY)");
        ExecutorService pool = Executors.newFixedThreadPool(8);
        try {
          List<Future<?>> futures = new ArrayList<>();
          for (int n = 0; n < 8; n++) {
            final int worker = n;
            futures.add(pool.submit(() -> {
              try (Connection w = connect();
                   PreparedStatement ps = w.prepareStatement("INSERT INTO conc VALUES (?)")) {
                for (int i = 0; i < 50; i++) {
                  ps.setInt(1, worker * 1000 + i);
                  ps.executeUpdate();
                }
              }
              return null;
            }));
          }
          for (Future<?> f : futures) {
            f.get(30, TimeUnit.SECONDS);
          }
        } finally {
          pool.shutdownNow();
        }
        check(count(c, "SELECT count(*) FROM conc"), 400L, "rows from 8 connections");
      }
    });
  }

  // ---------------------------------------------------------------- type round trips

  interface Getter {
    Object get(ResultSet rs) throws SQLException;
  }

  static final class RoundTrip {
    final String type;
    final Object value;
    final Getter getter;

    RoundTrip(String type, Object value, Getter getter) {
      this.type = type;
      this.value = value;
      this.getter = getter;
    }
  }

  static List<RoundTrip> roundTrips() throws SQLException {
    return List.of(
        new RoundTrip("smallint", (short) 32767, rs -> rs.getShort(1)),
        new RoundTrip("integer", Integer.MIN_VALUE, rs -> rs.getInt(1)),
        new RoundTrip("bigint", Long.MAX_VALUE, rs -> rs.getLong(1)),
        new RoundTrip("real", 1.5f, rs -> rs.getFloat(1)),
        new RoundTrip("double precision", 2.718281828459045, rs -> rs.getDouble(1)),
        new RoundTrip("numeric", new BigDecimal("12345678901234567890.123456789"),
            rs -> rs.getBigDecimal(1)),
        new RoundTrip("numeric(10,2)", new BigDecimal("-99.95"), rs -> rs.getBigDecimal(1)),
        new RoundTrip("text", "h\u00e9llo \u2603 'quoted' \\ back", rs -> rs.getString(1)),
        new RoundTrip("varchar(20)", "short", rs -> rs.getString(1)),
        new RoundTrip("boolean", true, rs -> rs.getBoolean(1)),
        new RoundTrip("bytea", new byte[] {0, 3, (byte) 0xff, '\\', 'x'}, rs -> rs.getBytes(1)),
        new RoundTrip("date", LocalDate.of(2024, 2, 29), rs -> rs.getObject(1, LocalDate.class)),
        new RoundTrip("time", LocalTime.of(13, 14, 15, 123_456_000),
            rs -> rs.getObject(1, LocalTime.class)),
        new RoundTrip("timestamp", LocalDateTime.of(2024, 1, 2, 3, 4, 5, 678_901_000),
            rs -> rs.getObject(1, LocalDateTime.class)),
        new RoundTrip("timestamptz", OffsetDateTime.of(2024, 1, 2, 3, 4, 5, 0, ZoneOffset.UTC),
            rs -> rs.getObject(1, OffsetDateTime.class)),
        new RoundTrip("interval", new PGInterval(0, 0, 3, 1, 2, 3.0), rs -> rs.getObject(1)),
        new RoundTrip("uuid", UUID.fromString("12345678-1234-5678-1234-567812345678"),
            rs -> rs.getObject(1, UUID.class)));
  }

  /** Each common type through a parameter and back; prepareThreshold 0 = text, -1 = binary. */
  static void roundTrip(String tag, String prepareThreshold) throws Exception {
    List<String> failures = new ArrayList<>();
    try (Connection c = connect("prepareThreshold", prepareThreshold)) {
      List<RoundTrip> cases = roundTrips();
      for (int i = 0; i < cases.size(); i++) {
        RoundTrip rt = cases.get(i);
        String table = "rt_" + tag + "_" + i;
        try {
          // A serial key and a default beside the value: the insert path with defaults.
          exec(c, "CREATE TABLE " + table + " (id serial PRIMARY KEY, v " + rt.type
              + ", note text DEFAULT 'd')");
          try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + table
              + " (v) VALUES (?)")) {
            ps.setObject(1, rt.value);
            ps.executeUpdate();
          }
          try (PreparedStatement ps = c.prepareStatement("SELECT v, id, note FROM " + table);
               ResultSet rs = ps.executeQuery()) {
            if (!rs.next()) {
              failures.add(rt.type + ": no row");
              continue;
            }
            Object got = rt.getter.get(rs);
            if (!Objects.deepEquals(got, rt.value)) {
              failures.add(rt.type + ": stored " + show(rt.value) + ", read " + show(got));
            }
            if (rs.getInt(2) != 1 || !"d".equals(rs.getString(3))) {
              failures.add(rt.type + ": serial/default gave " + rs.getInt(2) + ", "
                  + rs.getString(3));
            }
          }
          long found = count(c, "SELECT count(*) FROM " + table + " WHERE v = ?", rt.value);
          if (found != 1) {
            failures.add(rt.type + ": WHERE v = parameter found " + found + " rows");
          }
        } catch (SQLException e) {
          failures.add(rt.type + ": " + e.getSQLState() + " " + e.getMessage());
        }
      }
    }
    if (!failures.isEmpty()) {
      throw new AssertionError(String.join("; ", failures));
    }
  }

  // ---------------------------------------------------------------- TLS

  /**
   * pgJDBC's own socket factory for the libpq sslmodes, keeping the last socket it made, so a
   * case can ask the socket what the TLS session is (pgJDBC has no call for it). The driver
   * instantiates it by name, through the (Properties) constructor.
   */
  public static final class RecordingSslFactory extends LibPQFactory {
    static volatile SSLSocket last;

    public RecordingSslFactory(Properties info) throws PSQLException {
      super(info);
    }

    @Override
    public Socket createSocket(Socket socket, String host, int port, boolean autoClose)
        throws IOException {
      Socket tls = super.createSocket(socket, host, port, autoClose);
      last = (SSLSocket) tls;
      return tls;
    }
  }

  /**
   * A connection that pgJDBC makes only over TLS, to a server whose certificate the run's CA
   * signed for the name localhost; extra driver properties as name, value pairs.
   */
  static Connection connectTls(String... props) throws SQLException {
    RecordingSslFactory.last = null;
    List<String> all = new ArrayList<>(List.of("sslmode", "verify-full",
        "sslrootcert", System.getenv("SHOAL_TEST_SSLROOTCERT"),
        "sslfactory", RecordingSslFactory.class.getName()));
    all.addAll(Arrays.asList(props));
    return connectTo(url("localhost"), all.toArray(new String[0]));
  }

  /**
   * The client's socket and the server both say the connection is TLS, and data larger than a
   * TLS record (16 KiB) goes both ways intact.
   */
  static void checkEncrypted(Connection c) throws Exception {
    SSLSocket socket = RecordingSslFactory.last;
    checkTrue(socket != null, "pgJDBC made no TLS socket");
    SSLSession session = socket.getSession();
    checkTrue(Set.of("TLSv1.2", "TLSv1.3").contains(session.getProtocol()),
        "TLS protocol " + session.getProtocol());
    check(((X509Certificate) session.getPeerCertificates()[0]).getSubjectX500Principal().getName(),
        "CN=localhost", "server certificate subject");
    check(one(c, "SHOW ssl"), "on", "SHOW ssl");
    byte[] blob = new byte[200_000];
    new SecureRandom().nextBytes(blob);
    try (PreparedStatement ps = prepare(c, "SELECT ?::bytea, length(?::bytea)", blob, blob);
         ResultSet rs = ps.executeQuery()) {
      checkTrue(rs.next(), "no row");
      checkTrue(Arrays.equals(rs.getBytes(1), blob), "a 200 kB bytea through TLS came back changed");
      check(rs.getInt(2), blob.length, "length of the bytea");
    }
  }

  static {
    kase("tls_verify_full", () -> {
      try (Connection c = connectTls()) {
        checkEncrypted(c);
        check(one(c, "SELECT current_user"), "postgres", "current_user");
      }
    });

    kase("tls_scram_channel_binding", () -> {
      // run.py's pg_hba.conf lets tls_scram in over TLS only, by SCRAM-SHA-256;
      // channelBinding=require makes pgJDBC insist on SCRAM-SHA-256-PLUS.
      try (Connection admin = connect()) {
        exec(admin, "CREATE ROLE tls_scram LOGIN PASSWORD 'scram over tls'");
        try {
          try (Connection c = connectTls("user", "tls_scram", "password", "scram over tls",
              "channelBinding", "require")) {
            checkEncrypted(c);
            check(one(c, "SELECT current_user"), "tls_scram", "current_user");
          }
          SQLException e = expectState("28000", "tls_scram without TLS", () ->
              connect("user", "tls_scram", "password", "scram over tls", "sslmode", "disable")
                  .close());
          checkTrue(e.getMessage().contains("pg_hba.conf rejects connection"),
              "without TLS: " + e.getMessage());
        } finally {
          exec(admin, "DROP ROLE IF EXISTS tls_scram");
        }
      }
    });

    kase("tls_client_certificate", () -> {
      // The cert method: the client certificate (CN=tls_cert, signed by the run's CA) is the login.
      try (Connection admin = connect()) {
        exec(admin, "CREATE ROLE tls_cert LOGIN");
        try {
          try (Connection c = connectTls("user", "tls_cert",
              "sslcert", System.getenv("SHOAL_TEST_SSLCERT"),
              // The key as PKCS#8 DER, the format pgJDBC documents: given the PEM file, it says
              // "Could not load the private key".
              "sslkey", System.getenv("SHOAL_TEST_SSLKEY_PK8"))) {
            checkEncrypted(c);
            check(one(c, "SELECT current_user"), "tls_cert", "current_user");
          }
          SQLException e = expectState("28000", "tls_cert without a certificate", () ->
              connectTls("user", "tls_cert").close());
          checkTrue(e.getMessage().contains("requires a valid client certificate"),
              "without a certificate: " + e.getMessage());
        } finally {
          exec(admin, "DROP ROLE IF EXISTS tls_cert");
        }
      }
    });

    kase("tls_wrong_ca_rejected", () -> {
      SQLException e = expectState("08006", "verify-full with a CA that did not sign the server",
          () -> connectTls("sslrootcert", System.getenv("SHOAL_TEST_WRONG_SSLROOTCERT")).close());
      checkTrue(e.getCause() instanceof SSLHandshakeException,
          "cause: " + e.getCause() + " (" + e.getMessage() + ")");
    });
  }

  // ---------------------------------------------------------------- main

  public static void main(String[] args) throws Exception {
    Set<String> only = new TreeSet<>();
    boolean verbose = false;
    for (String a : args) {
      if (a.equals("-v")) {
        verbose = true;
      } else {
        only.add(a);
      }
    }
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
        String msg = cause.getMessage() == null ? "" : cause.getMessage();
        if (cause instanceof SQLException && ((SQLException) cause).getSQLState() != null) {
          msg = ((SQLException) cause).getSQLState() + " " + msg;
        }
        failure = cause.getClass().getSimpleName() + ": " + msg;
      }
      if (failure == null) {
        System.out.println("ok " + name);
      } else {
        String flat = String.join(" ", failure.trim().split("\\s+"));
        if (flat.length() > 400) {
          flat = flat.substring(0, 400);
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

  private PgjdbcSuite() {}
}
