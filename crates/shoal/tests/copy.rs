//! COPY over the wire: FROM STDIN in text and CSV, into row and column tables, with the data
//! cut into odd-sized CopyData messages and large enough to be parsed as several chunks in
//! parallel; bad lines (named by line number, nothing loaded), COPY FROM and TO a server file,
//! defaults and constraints, and a client that aborts the COPY.

mod support;

use std::io::Cursor;
use std::pin::pin;

use futures::SinkExt;
use support::{connect, ShoalServer};
use tokio_postgres::Client;

/// Sends `data` in CopyData messages of `piece_bytes` each; returns the row count or the
/// server's error.
async fn copy_in(
    client: &Client,
    sql: &str,
    data: &[u8],
    piece_bytes: usize,
) -> Result<u64, tokio_postgres::Error> {
    let mut sink = pin!(client.copy_in::<_, Cursor<Vec<u8>>>(sql).await?);
    for piece in data.chunks(piece_bytes) {
        sink.send(Cursor::new(piece.to_vec())).await?;
    }
    sink.as_mut().finish().await
}

async fn one_i64(client: &Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).await.expect(sql).get(0)
}

fn sqlstate(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_default()
}

fn context(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .and_then(|d| d.where_().map(str::to_string))
        .unwrap_or_default()
}

/// 200,000 rows of CSV (about 6 MB, several parse chunks) with quoted fields holding the
/// delimiter, doubled quotes and newlines, and NULLs.
fn csv_rows(rows: i64) -> Vec<u8> {
    let mut out = String::new();
    for i in 0..rows {
        let name = match i % 4 {
            0 => format!("\"name, {i}\""),
            1 => format!("\"say \"\"{i}\"\"\nnext line\""),
            2 => String::new(),
            _ => format!("plain{i}"),
        };
        out.push_str(&format!("{i},{name},{}.5,2024-01-02 03:04:05\n", i % 1000));
    }
    out.into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_in_many_pieces_loads_row_and_column_tables_alike() {
    let server = ShoalServer::start();
    let client = connect(&server).await;
    const ROWS: i64 = 200_000;
    let data = csv_rows(ROWS);
    for (table, method) in [("heap_t", "heap"), ("col_t", "columnar")] {
        client
            .batch_execute(&format!(
                "CREATE TABLE {table} (id bigint, name text, price double precision, \
                 at timestamp) USING {method}"
            ))
            .await
            .unwrap();
        // A prime piece size puts message boundaries everywhere: inside quotes, at "\r".
        let loaded = copy_in(
            &client,
            &format!("COPY {table} FROM STDIN WITH (FORMAT csv)"),
            &data,
            65_521,
        )
        .await
        .unwrap();
        assert_eq!(loaded, ROWS as u64, "{table}");
        assert_eq!(
            one_i64(&client, &format!("SELECT count(*) FROM {table}")).await,
            ROWS
        );
        assert_eq!(
            one_i64(&client, &format!("SELECT sum(id)::bigint FROM {table}")).await,
            ROWS * (ROWS - 1) / 2
        );
        assert_eq!(
            one_i64(
                &client,
                &format!("SELECT count(*) FROM {table} WHERE name IS NULL")
            )
            .await,
            ROWS / 4
        );
        let row = client
            .query_one(
                &format!("SELECT name, price, at::text FROM {table} WHERE id = 199997"),
                &[],
            )
            .await
            .unwrap();
        assert_eq!(row.get::<_, String>(0), "say \"199997\"\nnext line");
        assert_eq!(row.get::<_, f64>(1), 997.5);
        assert_eq!(row.get::<_, String>(2), "2024-01-02 03:04:05");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_line_names_its_line_and_loads_nothing() {
    let server = ShoalServer::start();
    let client = connect(&server).await;
    for method in ["heap", "columnar"] {
        client
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS t; CREATE TABLE t (id integer, v smallint) USING {method}"
            ))
            .await
            .unwrap();
        // The bad value sits far past the first chunk, so earlier chunks are already written
        // when it is found: the rollback must take them back.
        let mut data = String::new();
        for i in 1..=150_000 {
            let v = if i == 120_000 {
                "99999".to_string()
            } else {
                (i % 100).to_string()
            };
            data.push_str(&format!("{i}\t{v}\n"));
        }
        let e = copy_in(&client, "COPY t FROM STDIN", data.as_bytes(), 8192)
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "22003", "{e:?}");
        assert!(
            context(&e).contains("COPY t, line 120000, column v: \"99999\""),
            "{}",
            context(&e)
        );
        assert_eq!(one_i64(&client, "SELECT count(*) FROM t").await, 0);

        let e = copy_in(&client, "COPY t FROM STDIN", b"1\t2\n3\n", 4)
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "22P04");
        assert!(context(&e).contains("line 2"), "{}", context(&e));

        let e = copy_in(&client, "COPY t FROM STDIN (FORMAT csv)", b"1,\"2\n", 4)
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "22P04");
        assert_eq!(
            e.as_db_error().unwrap().message(),
            "unterminated CSV quoted field"
        );

        // Inside a transaction block, the failed COPY aborts the block.
        client.batch_execute("BEGIN").await.unwrap();
        copy_in(&client, "COPY t FROM STDIN", b"1\tx\n", 100)
            .await
            .unwrap_err();
        let e = client.batch_execute("SELECT 1").await.unwrap_err();
        assert_eq!(sqlstate(&e), "25P02");
        client.batch_execute("ROLLBACK").await.unwrap();
        assert_eq!(one_i64(&client, "SELECT count(*) FROM t").await, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_defaults_and_constraints() {
    let server = ShoalServer::start();
    let client = connect(&server).await;
    for method in ["heap", "columnar"] {
        client
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS o; DROP SEQUENCE IF EXISTS o_seq; \
                 CREATE SEQUENCE o_seq; \
                 CREATE TABLE o (id bigint DEFAULT nextval('o_seq'), name text NOT NULL, \
                 qty integer DEFAULT 7 CHECK (qty > 0), note varchar(3)) USING {method}"
            ))
            .await
            .unwrap();
        let csv = b"name;qty;note\nann;1;a\n\"b;b\";NULL;\nc;3;\"\"\n\\.\nignored;1;x\n";
        let loaded = copy_in(
            &client,
            "COPY o (name, qty, note) FROM STDIN \
             WITH (FORMAT csv, HEADER true, DELIMITER ';', NULL 'NULL')",
            csv,
            3,
        )
        .await
        .unwrap();
        assert_eq!(loaded, 3);
        let rows = client
            .query("SELECT id, name, qty, note FROM o ORDER BY id", &[])
            .await
            .unwrap();
        let got: Vec<(i64, String, Option<i32>, Option<String>)> = rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, "ann".into(), Some(1), Some("a".into())),
                // With NULL 'NULL', an empty field is an empty string.
                (2, "b;b".into(), None, Some(String::new())),
                (3, "c".into(), Some(3), Some(String::new())),
            ]
        );
        // Columns left out of the list take their defaults, one nextval per row.
        copy_in(&client, "COPY o (name) FROM STDIN", b"d\ne\n", 1)
            .await
            .unwrap();
        assert_eq!(
            one_i64(
                &client,
                "SELECT sum(qty)::bigint FROM o WHERE name IN ('d', 'e')"
            )
            .await,
            14
        );
        assert_eq!(one_i64(&client, "SELECT max(id) FROM o").await, 5);

        let e = copy_in(
            &client,
            "COPY o (name, qty) FROM STDIN",
            b"x\t1\n\\N\t2\n",
            64,
        )
        .await
        .unwrap_err();
        assert_eq!(sqlstate(&e), "23502");
        assert!(context(&e).contains("line 2"), "{}", context(&e));
        let e = copy_in(
            &client,
            "COPY o (name, qty) FROM STDIN",
            b"x\t1\ny\t0\n",
            64,
        )
        .await
        .unwrap_err();
        assert_eq!(sqlstate(&e), "23514");
        let e = copy_in(&client, "COPY o (name, note) FROM STDIN", b"x\tlong\n", 64)
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "22001");
        assert_eq!(one_i64(&client, "SELECT count(*) FROM o").await, 5);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_violation_in_a_row_table_names_the_line() {
    let server = ShoalServer::start();
    let client = connect(&server).await;
    client
        .batch_execute("CREATE TABLE k (id integer PRIMARY KEY, v text)")
        .await
        .unwrap();
    let e = copy_in(&client, "COPY k FROM STDIN", b"1\ta\n2\tb\n1\tc\n", 5)
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "23505");
    assert!(context(&e).contains("COPY k, line 3"), "{}", context(&e));
    assert_eq!(one_i64(&client, "SELECT count(*) FROM k").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_from_and_to_a_server_file() {
    let server = ShoalServer::start();
    let client = connect(&server).await;
    let dir = server.data_dir().join("copy-files");
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.csv");
    std::fs::write(&input, csv_rows(50_000)).unwrap();
    client
        .batch_execute(
            "CREATE TABLE f (id bigint, name text, price float8, at timestamp) USING columnar",
        )
        .await
        .unwrap();
    let copied = client
        .execute(
            &format!("COPY f FROM '{}' WITH (FORMAT csv)", input.display()),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(copied, 50_000);
    let output = dir.join("out.csv");
    let written = client
        .execute(
            &format!(
                "COPY (SELECT * FROM f ORDER BY id) TO '{}' WITH (FORMAT csv)",
                output.display()
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(written, 50_000);
    // What was written loads back to the same rows.
    client
        .batch_execute("CREATE TABLE g (id bigint, name text, price float8, at timestamp)")
        .await
        .unwrap();
    client
        .execute(
            &format!("COPY g FROM '{}' (FORMAT csv)", output.display()),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        one_i64(
            &client,
            "SELECT count(*) FROM f JOIN g USING (id) \
             WHERE (f.name IS NOT DISTINCT FROM g.name) AND f.price = g.price AND f.at = g.at"
        )
        .await,
        50_000
    );
    let e = client
        .execute("COPY f FROM '/nonexistent/x.csv'", &[])
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "58P01");
    let e = client
        .execute("COPY f TO 'relative.csv'", &[])
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "42602");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_fail_from_the_client_loads_nothing() {
    let server = ShoalServer::start();
    let client = connect(&server).await;
    client
        .batch_execute("CREATE TABLE a (id integer) USING columnar")
        .await
        .unwrap();
    {
        let mut sink = pin!(client
            .copy_in::<_, Cursor<Vec<u8>>>("COPY a FROM STDIN")
            .await
            .unwrap());
        sink.send(Cursor::new(b"1\n2\n".to_vec())).await.unwrap();
        // Dropping an unfinished sink sends CopyFail.
    }
    assert_eq!(one_i64(&client, "SELECT count(*) FROM a").await, 0);
    copy_in(&client, "COPY a FROM STDIN", b"1\n2\n", 2)
        .await
        .unwrap();
    assert_eq!(one_i64(&client, "SELECT count(*) FROM a").await, 2);
}

/// COPY checks foreign keys as INSERT does (it loaded rows that referenced nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_checks_foreign_keys() {
    let server = ShoalServer::start();
    let client = connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE parent (id int PRIMARY KEY);
             CREATE TABLE child (id int, parent_id int REFERENCES parent);
             INSERT INTO parent VALUES (1);",
        )
        .await
        .unwrap();
    let e = copy_in(&client, "COPY child FROM STDIN", b"10\t1\n11\t999\n", 8192)
        .await
        .expect_err("line 2 references a missing parent");
    assert_eq!(sqlstate(&e), "23503", "{e:?}");
    assert!(format!("{e:?}").contains("line 2"), "{e:?}");
    assert_eq!(one_i64(&client, "SELECT count(*) FROM child").await, 0);
    copy_in(&client, "COPY child FROM STDIN", b"10\t1\n11\t\\N\n", 8192)
        .await
        .expect("a present and a NULL reference");
    assert_eq!(one_i64(&client, "SELECT count(*) FROM child").await, 2);
    // A row may reference itself, or a row before or after it in the same COPY: as in
    // PostgreSQL, the keys hold at the end of the statement.
    client
        .batch_execute("CREATE TABLE emp (id int PRIMARY KEY, boss int REFERENCES emp)")
        .await
        .unwrap();
    copy_in(
        &client,
        "COPY emp FROM STDIN",
        b"1\t\\N\n2\t1\n3\t2\n4\t4\n5\t6\n6\t6\n",
        8192,
    )
    .await
    .expect("each row's boss is loaded by the same COPY");
    assert_eq!(one_i64(&client, "SELECT count(*) FROM emp").await, 6);
}

/// What `COPY ... TO STDOUT` writes, byte for byte.
async fn copy_out(client: &Client, sql: &str) -> Vec<u8> {
    use futures::StreamExt;
    let stream = client.copy_out(sql).await.expect("copy out");
    let mut stream = pin!(stream);
    let mut data = Vec::new();
    while let Some(chunk) = stream.next().await {
        data.extend_from_slice(&chunk.expect("copy data"));
    }
    data
}

/// COPY TO in CSV quotes what PostgreSQL quotes: the delimiter, the quote, line breaks, a value
/// that reads as the NULL string, and `\.` alone on a line, which psql would take for the end
/// of the data and stop restoring there. Both servers' bytes must be the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_to_csv_quotes_as_postgresql_does() {
    async fn dump(client: &Client) -> Vec<Vec<u8>> {
        client
            .batch_execute(
                "CREATE TABLE csv_out (id int, v text);
                 INSERT INTO csv_out VALUES (1, '\\.'), (2, 'a\"b'), (3, ''), (4, NULL),
                   (5, 'x,y'), (6, 'two
lines'), (7, 'NULL'), (8, 'plain')",
            )
            .await
            .expect("set up");
        let mut out = Vec::new();
        for sql in [
            "COPY (SELECT v FROM csv_out ORDER BY id) TO STDOUT (FORMAT csv)",
            "COPY (SELECT id, v FROM csv_out ORDER BY id) TO STDOUT (FORMAT csv)",
            "COPY (SELECT v FROM csv_out ORDER BY id) TO STDOUT (FORMAT csv, NULL 'NULL')",
            "COPY (SELECT v FROM csv_out ORDER BY id) TO STDOUT (FORMAT csv, HEADER)",
        ] {
            out.push(copy_out(client, sql).await);
        }
        out
    }
    let server = ShoalServer::start();
    let shoal = dump(&connect(&server).await).await;
    assert!(
        shoal[0].starts_with(b"\"\\.\"\n"),
        "a lone \\. is quoted: {:?}",
        String::from_utf8_lossy(&shoal[0])
    );
    if let Some(postgres) = support::postgres::Postgres::start() {
        let (client, connection) = tokio_postgres::connect(
            &format!(
                "host=127.0.0.1 port={} user=postgres dbname=postgres",
                postgres.port()
            ),
            tokio_postgres::NoTls,
        )
        .await
        .expect("connect to PostgreSQL");
        tokio::spawn(connection);
        let expected = dump(&client).await;
        for (shoal, postgres) in shoal.iter().zip(&expected) {
            assert_eq!(
                String::from_utf8_lossy(shoal),
                String::from_utf8_lossy(postgres)
            );
        }
    }
}

const BINARY_TYPES_TABLE: &str = "CREATE TABLE bin_types (
    id int PRIMARY KEY, small smallint, big bigint, real_v real, dbl double precision,
    num numeric(12, 3), big_num numeric, name text, code varchar(8), flag boolean, day date,
    at timestamp, at_tz timestamptz, span interval, raw bytea, uid uuid)";

const BINARY_TYPES_ROWS: &str = "INSERT INTO bin_types VALUES
    (1, -3, 9000000000, 1.5, -2.25, 12345.678, -0.000123, 'héllo', 'abc', true, '2024-02-29',
     '2001-02-03 04:05:06.789', '1999-12-31 23:59:59+00', '1 year 2 mons 3 days 04:05:06',
     '\\x00ff10', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'),
    (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
    (3, 32767, -1, -0.0, 1e300, 0, 123456789012345678.5, '', 'x', false, '1970-01-01',
     '1900-01-01 00:00:00', '2038-01-19 03:14:08+00', '-1 days', '\\x', NULL)";

const BINARY_TYPES_DUMP: &str = "SELECT id::text, small::text, big::text, real_v::text,
    dbl::text, num::text, big_num::text, name, code, flag::text, day::text, at::text,
    at_tz::text, span::text, raw::text, uid::text FROM bin_types ORDER BY id";

async fn text_rows(client: &Client, sql: &str) -> Vec<Vec<Option<String>>> {
    client
        .query(sql, &[])
        .await
        .expect(sql)
        .iter()
        .map(|r| {
            (0..r.len())
                .map(|i| r.get::<_, Option<String>>(i))
                .collect()
        })
        .collect()
}

/// Binary COPY (pgx's CopyFrom, asyncpg's copy_records_to_table): tokio-postgres's binary
/// writer loads rows, a binary image PostgreSQL made of every type loads into Shoal as the
/// same values, and Shoal's binary COPY TO gives back PostgreSQL's bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_copy_from_stdin_loads_every_type() {
    use tokio_postgres::binary_copy::BinaryCopyInWriter;
    use tokio_postgres::types::{ToSql, Type};
    let server = ShoalServer::start();
    let client = connect(&server).await;
    client
        .batch_execute("CREATE TABLE bin_simple (id int PRIMARY KEY, name text, ok boolean)")
        .await
        .unwrap();
    let sink = client
        .copy_in("COPY bin_simple FROM STDIN (FORMAT binary)")
        .await
        .unwrap();
    let writer = BinaryCopyInWriter::new(sink, &[Type::INT4, Type::TEXT, Type::BOOL]);
    let mut writer = pin!(writer);
    for id in 0..1000i32 {
        let name = format!("n{id}");
        let ok = id % 2 == 0;
        let row: [&(dyn ToSql + Sync); 3] = [&id, &name, &ok];
        writer.as_mut().write(&row).await.unwrap();
    }
    assert_eq!(writer.finish().await.unwrap(), 1000);
    assert_eq!(
        text_rows(&client, "SELECT count(*)::text, sum(id)::text, count(*) FILTER (WHERE ok)::text FROM bin_simple").await,
        vec![vec![Some("1000".into()), Some("499500".into()), Some("500".into())]]
    );
    // A duplicate key fails the COPY, and none of its rows stay.
    let sink = client
        .copy_in("COPY bin_simple FROM STDIN (FORMAT binary)")
        .await
        .unwrap();
    let mut writer = pin!(BinaryCopyInWriter::new(
        sink,
        &[Type::INT4, Type::TEXT, Type::BOOL]
    ));
    for id in [5000i32, 7] {
        let name = String::new();
        let row: [&(dyn ToSql + Sync); 3] = [&id, &name, &true];
        writer.as_mut().write(&row).await.unwrap();
    }
    let err = writer.finish().await.expect_err("duplicate key");
    assert_eq!(err.code().map(|c| c.code()), Some("23505"), "{err:?}");
    assert_eq!(
        one_i64(&client, "SELECT count(*) FROM bin_simple").await,
        1000
    );

    let Some(postgres) = support::postgres::Postgres::start() else {
        return;
    };
    let pg = support::connect_to(&postgres.addr).await;
    pg.batch_execute(&format!("{BINARY_TYPES_TABLE}; {BINARY_TYPES_ROWS}"))
        .await
        .unwrap();
    let mut image = Vec::new();
    let mut out = pin!(pg
        .copy_out("COPY bin_types TO STDOUT (FORMAT binary)")
        .await
        .unwrap());
    while let Some(piece) = futures::StreamExt::next(&mut out).await {
        image.extend_from_slice(&piece.unwrap());
    }
    client.batch_execute(BINARY_TYPES_TABLE).await.unwrap();
    let loaded = copy_in(
        &client,
        "COPY bin_types FROM STDIN (FORMAT binary)",
        &image,
        7,
    )
    .await
    .unwrap();
    assert_eq!(loaded, 3);
    assert_eq!(
        text_rows(&client, BINARY_TYPES_DUMP).await,
        text_rows(&pg, BINARY_TYPES_DUMP).await
    );
    // And back out: COPY TO STDOUT (FORMAT binary) gives PostgreSQL's bytes.
    let copy_out = "COPY (SELECT * FROM bin_types ORDER BY id) TO STDOUT (FORMAT binary)";
    assert_eq!(
        copy_out_bytes(&client, copy_out).await,
        copy_out_bytes(&pg, copy_out).await
    );
}

async fn copy_out_bytes(client: &Client, sql: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut out = pin!(client.copy_out(sql).await.expect(sql));
    while let Some(piece) = futures::StreamExt::next(&mut out).await {
        bytes.extend_from_slice(&piece.unwrap());
    }
    bytes
}

/// What a COPY into a table with triggers does: the rows (as BEFORE ROW triggers changed or
/// skipped them) and the triggers' log, in order. `using` is the table's access method clause.
async fn copy_with_triggers(addr: &str, using: &str) -> Vec<String> {
    let client = support::connect_to(addr).await;
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS ct_items, ct_log;
             CREATE TABLE ct_items (id integer NOT NULL, name text CHECK (name <> 'BAD')) {using};
             CREATE TABLE ct_log (n serial, msg text);
             CREATE OR REPLACE FUNCTION ct_note() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
               INSERT INTO ct_log (msg) VALUES (TG_WHEN || ' ' || TG_LEVEL || coalesce(' ' || NEW.id || ':' || NEW.name, ''));
               IF TG_LEVEL = 'ROW' AND TG_WHEN = 'BEFORE' THEN
                 IF NEW.id % 3 = 0 THEN RETURN NULL; END IF;
                 NEW.name := upper(NEW.name);
               END IF;
               RETURN NEW;
             END $$;
             CREATE TRIGGER b_row BEFORE INSERT ON ct_items FOR EACH ROW EXECUTE FUNCTION ct_note();
             CREATE TRIGGER a_row AFTER INSERT ON ct_items FOR EACH ROW EXECUTE FUNCTION ct_note();
             CREATE TRIGGER b_stmt BEFORE INSERT ON ct_items FOR EACH STATEMENT EXECUTE FUNCTION ct_note();
             CREATE TRIGGER a_stmt AFTER INSERT ON ct_items FOR EACH STATEMENT EXECUTE FUNCTION ct_note();"
        ))
        .await
        .unwrap();
    let mut out = Vec::new();
    let data: String = (1..=7).map(|i| format!("{i}\titem{i}\n")).collect();
    let loaded = copy_in(&client, "COPY ct_items FROM STDIN", data.as_bytes(), 5).await;
    out.push(format!("loaded {:?}", loaded.map_err(|e| sqlstate(&e))));
    for row in client
        .query("SELECT id, name FROM ct_items ORDER BY id", &[])
        .await
        .unwrap()
    {
        out.push(format!(
            "{} {}",
            row.get::<_, i32>(0),
            row.get::<_, String>(1)
        ));
    }
    for row in client
        .query("SELECT msg FROM ct_log ORDER BY n", &[])
        .await
        .unwrap()
    {
        out.push(row.get(0));
    }
    // The trigger's change is what the CHECK sees: 'bad' becomes 'BAD' and is refused, and
    // nothing of the COPY stays.
    let refused = copy_in(
        &client,
        "COPY ct_items FROM STDIN",
        b"10\tok\n11\tbad\n",
        64,
    )
    .await;
    out.push(format!("refused {:?}", refused.map_err(|e| sqlstate(&e))));
    out.push(format!(
        "rows {}",
        one_i64(&client, "SELECT count(*) FROM ct_items").await
    ));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_fires_insert_triggers_as_postgresql_does() {
    let expected = [
        "loaded Ok(5)",
        "1 ITEM1",
        "2 ITEM2",
        "4 ITEM4",
        "5 ITEM5",
        "7 ITEM7",
        "BEFORE STATEMENT",
        "BEFORE ROW 1:item1",
        "BEFORE ROW 2:item2",
        "BEFORE ROW 3:item3",
        "BEFORE ROW 4:item4",
        "BEFORE ROW 5:item5",
        "BEFORE ROW 6:item6",
        "BEFORE ROW 7:item7",
        "AFTER ROW 1:ITEM1",
        "AFTER ROW 2:ITEM2",
        "AFTER ROW 4:ITEM4",
        "AFTER ROW 5:ITEM5",
        "AFTER ROW 7:ITEM7",
        "AFTER STATEMENT",
        "refused Err(\"23514\")",
        "rows 5",
    ];
    if let Some(postgres) = support::postgres::Postgres::start() {
        assert_eq!(
            copy_with_triggers(&postgres.addr, "").await,
            expected,
            "PostgreSQL 15 no longer answers as this test says"
        );
    }
    let server = ShoalServer::start();
    let addr = format!("127.0.0.1:{}", server.port());
    // A column table fires them alike.
    for using in ["", "USING columnar"] {
        assert_eq!(
            copy_with_triggers(&addr, using).await,
            expected,
            "Shoal differs from PostgreSQL 15 ({using})"
        );
    }
}
