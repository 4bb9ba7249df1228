//! Kept plans give the answers planning afresh gives: new parameter values (other index
//! ranges), rows written since, DDL and settings that change what the statement means, and
//! two executions whose rows are read at the same time.

use datafusion::common::ScalarValue;

use crate::session::{Prepared, Session, StatementResult};

/// Runs `test` on a thread with the stack the server's workers have (DataFusion's planning
/// recurses deeply in debug builds).
pub(crate) fn on_big_stack(test: fn()) {
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(test)
        .unwrap()
        .join()
        .unwrap();
}

pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

async fn run(s: &mut Session, sql: &str) {
    for r in s.execute_sql(sql).await {
        r.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }
}

/// The result's rows, each column as text.
async fn rows_of(result: StatementResult) -> Vec<Vec<String>> {
    let batches = match result {
        StatementResult::Rows { batches, .. } => batches,
        StatementResult::RowStream { rows, .. } => rows.collect().await.unwrap(),
        other => panic!("not rows: {other:?}"),
    };
    let mut out = Vec::new();
    for b in &batches {
        for r in 0..b.num_rows() {
            out.push(
                b.columns()
                    .iter()
                    .map(|c| ScalarValue::try_from_array(c, r).unwrap().to_string())
                    .collect(),
            );
        }
    }
    out
}

/// Runs `p` with `values` as the client would send them: bound as the parameter types Parse
/// described.
async fn execute(s: &mut Session, p: &Prepared, values: &[i64]) -> Vec<Vec<String>> {
    rows_of(s.execute_prepared(p, bound(p, values)).await.unwrap()).await
}

/// Runs `p` twice with `values`: the first execution is planned the ordinary way, the second
/// builds the kept plan. Both answers must be the same.
async fn execute_twice(s: &mut Session, p: &Prepared, values: &[i64]) -> Vec<Vec<String>> {
    let planned = execute(s, p, values).await;
    assert_eq!(execute(s, p, values).await, planned);
    planned
}

fn bound(p: &Prepared, values: &[i64]) -> Vec<ScalarValue> {
    values
        .iter()
        .zip(&p.param_types)
        .map(|(v, t)| ScalarValue::Int64(Some(*v)).cast_to(t).unwrap())
        .collect()
}

fn texts(rows: &[&[&str]]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|r| r.iter().map(|v| v.to_string()).collect())
        .collect()
}

#[test]
fn a_kept_plan_reads_new_ranges_and_new_rows() {
    on_big_stack(|| {
        block_on(async {
            let mut s = Session::new(crate::Engine::new());
            run(
                &mut s,
                "CREATE TABLE kp (id int PRIMARY KEY, k int, c text)",
            )
            .await;
            run(
                &mut s,
                "INSERT INTO kp SELECT g, g % 3, 'c' || g FROM generate_series(1, 50) g",
            )
            .await;
            // Parameters declared int8, as sysbench declares them for an int4 column.
            let p = s
                .prepare(
                    "SELECT c FROM kp WHERE id BETWEEN $1 AND $2 ORDER BY c",
                    &[20, 20],
                )
                .await
                .unwrap();
            assert_eq!(
                execute_twice(&mut s, &p, &[1, 3]).await,
                texts(&[&["c1"], &["c2"], &["c3"]])
            );
            assert!(p.has_kept_plan());
            assert_eq!(
                execute(&mut s, &p, &[9, 11]).await,
                texts(&[&["c10"], &["c11"], &["c9"]])
            );
            run(&mut s, "INSERT INTO kp VALUES (51, 0, 'new')").await;
            assert_eq!(
                execute(&mut s, &p, &[50, 60]).await,
                texts(&[&["c50"], &["new"]])
            );
            // A value no int4 holds runs planned with its value, and matches nothing.
            assert_eq!(
                execute(&mut s, &p, &[5_000_000_000, 6_000_000_000]).await,
                texts(&[])
            );
            assert_eq!(execute(&mut s, &p, &[2, 2]).await, texts(&[&["c2"]]));
            assert!(p.has_kept_plan());
        })
    });
}

#[test]
fn a_kept_join_resets_its_state_between_runs() {
    on_big_stack(|| {
        block_on(async {
            let mut s = Session::new(crate::Engine::new());
            run(&mut s, "CREATE TABLE kj (id int PRIMARY KEY, k int)").await;
            run(
                &mut s,
                "INSERT INTO kj SELECT g, g % 10 FROM generate_series(1, 100) g",
            )
            .await;
            let p = s
                .prepare(
                    "SELECT a.id, b.id FROM kj a JOIN kj b ON a.k = b.k \
                     WHERE a.id = $1 AND b.id < $2 ORDER BY 2",
                    &[],
                )
                .await
                .unwrap();
            assert_eq!(
                execute_twice(&mut s, &p, &[3, 30]).await,
                texts(&[&["3", "3"], &["3", "13"], &["3", "23"]])
            );
            assert!(p.has_kept_plan());
            assert_eq!(
                execute(&mut s, &p, &[4, 30]).await,
                texts(&[&["4", "4"], &["4", "14"], &["4", "24"]])
            );
            let sum = s
                .prepare(
                    "SELECT count(*), sum(b.id) FROM kj a JOIN kj b ON a.k = b.k WHERE a.id = $1",
                    &[],
                )
                .await
                .unwrap();
            assert_eq!(execute(&mut s, &sum, &[1]).await, texts(&[&["10", "460"]]));
            assert_eq!(execute(&mut s, &sum, &[2]).await, texts(&[&["10", "470"]]));
            assert_eq!(execute(&mut s, &sum, &[3]).await, texts(&[&["10", "480"]]));
            assert!(sum.has_kept_plan());
        })
    });
}

#[test]
fn ddl_and_settings_plan_again() {
    on_big_stack(|| {
        block_on(async {
            let mut s = Session::new(crate::Engine::new());
            run(&mut s, "CREATE TABLE kd (id int PRIMARY KEY, k int)").await;
            run(
                &mut s,
                "INSERT INTO kd SELECT g, g % 5 FROM generate_series(1, 20) g",
            )
            .await;
            let p = s
                .prepare("SELECT id FROM kd WHERE k = $1 ORDER BY id", &[])
                .await
                .unwrap();
            let k2 = texts(&[&["2"], &["7"], &["12"], &["17"]]);
            assert_eq!(execute_twice(&mut s, &p, &[2]).await, k2);
            assert!(p.has_kept_plan());
            run(&mut s, "CREATE INDEX kd_k ON kd (k)").await;
            assert_eq!(execute(&mut s, &p, &[2]).await, k2);
            run(&mut s, "DROP INDEX kd_k").await;
            assert_eq!(execute(&mut s, &p, &[2]).await, k2);
            // Another table of the same name earlier on the search_path.
            run(&mut s, "CREATE SCHEMA other").await;
            run(&mut s, "CREATE TABLE other.kd (id int PRIMARY KEY, k int)").await;
            run(&mut s, "INSERT INTO other.kd VALUES (100, 2)").await;
            run(&mut s, "SET search_path = other, public").await;
            assert_eq!(execute(&mut s, &p, &[2]).await, texts(&[&["100"]]));
            run(&mut s, "RESET search_path").await;
            assert_eq!(execute_twice(&mut s, &p, &[2]).await, k2);
            assert!(p.has_kept_plan());
        })
    });
}

#[test]
fn stable_functions_are_not_kept() {
    on_big_stack(|| {
        block_on(async {
            let mut s = Session::new(crate::Engine::new());
            let p = s
                .prepare("SELECT $1::int8 + 1, now() = now()", &[])
                .await
                .unwrap();
            assert_eq!(execute(&mut s, &p, &[1]).await, texts(&[&["2", "true"]]));
            assert_eq!(execute(&mut s, &p, &[2]).await, texts(&[&["3", "true"]]));
            assert!(!p.has_kept_plan());
        })
    });
}

#[test]
fn two_executions_read_at_once_keep_their_own_values() {
    on_big_stack(|| {
        block_on(async {
            let mut s = Session::new(crate::Engine::new());
            run(&mut s, "CREATE TABLE kc (id int PRIMARY KEY, v int)").await;
            // More rows than a small plan reads: its rows are streamed from the query runtime.
            let rows = super::SMALL_PLAN_ROWS + 10;
            run(
                &mut s,
                &format!("INSERT INTO kc SELECT g, g * 10 FROM generate_series(1, {rows}) g"),
            )
            .await;
            let p = s
                .prepare("SELECT max(v) + $1::int FROM kc WHERE v > $2", &[])
                .await
                .unwrap();
            let max = rows as i64 * 10;
            assert_eq!(
                execute_twice(&mut s, &p, &[0, 0]).await,
                texts(&[&[&max.to_string()]])
            );
            assert!(p.has_kept_plan());
            // The first result is still unread (a suspended portal) when the second runs.
            let first = s.execute_prepared(&p, bound(&p, &[1, 0])).await.unwrap();
            let second = s.execute_prepared(&p, bound(&p, &[2, 5])).await.unwrap();
            assert_eq!(rows_of(second).await, texts(&[&[&(max + 2).to_string()]]));
            assert_eq!(rows_of(first).await, texts(&[&[&(max + 1).to_string()]]));
            assert!(p.has_kept_plan());
        })
    });
}

/// The row count of a command's result.
async fn affected(s: &mut Session, p: &Prepared, values: &[i64]) -> usize {
    match s.execute_prepared(p, bound(p, values)).await.unwrap() {
        StatementResult::Command { rows: Some(n), .. } => n,
        other => panic!("not a command: {other:?}"),
    }
}

async fn query(s: &mut Session, sql: &str) -> Vec<Vec<String>> {
    let mut results = s.execute_sql(sql).await;
    rows_of(results.pop().unwrap().unwrap()).await
}

#[test]
fn dml_finds_its_rows_on_a_kept_plan() {
    on_big_stack(|| {
        block_on(async {
            let mut s = Session::new(crate::Engine::new());
            run(&mut s, "CREATE TABLE kt (id int PRIMARY KEY, k int, v int)").await;
            run(
                &mut s,
                "INSERT INTO kt SELECT g, g % 3, 0 FROM generate_series(1, 30) g",
            )
            .await;
            // Not a point statement: `k` is no key, so the rows are found by a query.
            let update = s
                .prepare("UPDATE kt SET v = v + $1 WHERE k = $2 AND id < $3", &[])
                .await
                .unwrap();
            for _ in 0..3 {
                assert_eq!(affected(&mut s, &update, &[1, 0, 10]).await, 3);
            }
            assert!(update.has_kept_target_plan());
            assert_eq!(affected(&mut s, &update, &[5, 1, 30]).await, 10);
            run(&mut s, "CREATE INDEX kt_k ON kt (k)").await;
            assert_eq!(affected(&mut s, &update, &[100, 2, 6]).await, 2);
            assert_eq!(
                query(&mut s, "SELECT k, sum(v) FROM kt GROUP BY k ORDER BY k").await,
                texts(&[&["0", "9"], &["1", "50"], &["2", "200"]])
            );

            let delete = s
                .prepare("DELETE FROM kt WHERE k = $1 AND id > $2", &[])
                .await
                .unwrap();
            assert_eq!(affected(&mut s, &delete, &[0, 24]).await, 2);
            assert_eq!(affected(&mut s, &delete, &[0, 24]).await, 0);
            assert_eq!(affected(&mut s, &delete, &[1, 20]).await, 3);
            assert!(delete.has_kept_target_plan());
            assert_eq!(affected(&mut s, &delete, &[2, 0]).await, 10);

            let lock = s
                .prepare(
                    "SELECT id, v FROM kt WHERE k = $1 AND id > $2 ORDER BY id LIMIT 1 FOR UPDATE",
                    &[],
                )
                .await
                .unwrap();
            assert_eq!(execute(&mut s, &lock, &[0, 0]).await, texts(&[&["3", "3"]]));
            assert_eq!(execute(&mut s, &lock, &[0, 3]).await, texts(&[&["6", "3"]]));
            assert_eq!(execute(&mut s, &lock, &[1, 3]).await, texts(&[&["4", "5"]]));
            assert!(lock.has_kept_target_plan());
            assert_eq!(
                execute(&mut s, &lock, &[0, 20]).await,
                texts(&[&["21", "0"]])
            );
            assert_eq!(execute(&mut s, &lock, &[2, 0]).await, texts(&[]));
            assert_eq!(
                query(&mut s, "SELECT count(*), sum(v) FROM kt").await,
                texts(&[&["15", "44"]])
            );
        })
    });
}

#[test]
fn a_kept_join_reads_its_probe_side_by_the_keys_of_each_run() {
    on_big_stack(|| {
        block_on(async {
            let mut s = Session::new(crate::Engine::new());
            run(
                &mut s,
                "CREATE TABLE kl_item (id int PRIMARY KEY, price int)",
            )
            .await;
            run(
                &mut s,
                "INSERT INTO kl_item SELECT g, g * 2 FROM generate_series(1, 5000) g",
            )
            .await;
            run(
                &mut s,
                "CREATE TABLE kl_line (o int, n int, item int, PRIMARY KEY (o, n))",
            )
            .await;
            run(
                &mut s,
                "INSERT INTO kl_line SELECT o, n, o * 100 + n FROM generate_series(1, 40) o, \
                 generate_series(1, 3) n",
            )
            .await;
            let p = s
                .prepare(
                    "SELECT count(*), sum(i.price) FROM kl_line l JOIN kl_item i ON i.id = l.item \
                     WHERE l.o BETWEEN $1 AND $2",
                    &[],
                )
                .await
                .unwrap();
            // Orders 1 and 2: items 101..103 and 201..203.
            assert_eq!(
                execute_twice(&mut s, &p, &[1, 2]).await,
                texts(&[&["6", "1824"]])
            );
            assert!(p.has_kept_plan());
            assert_eq!(execute(&mut s, &p, &[3, 3]).await, texts(&[&["3", "1812"]]));
            // Items past the table's end match nothing.
            assert_eq!(
                execute(&mut s, &p, &[50, 60]).await,
                texts(&[&["0", "NULL"]])
            );
            run(&mut s, "UPDATE kl_item SET price = 0 WHERE id = 301").await;
            assert_eq!(execute(&mut s, &p, &[3, 3]).await, texts(&[&["3", "1210"]]));
        })
    });
}

/// `ORDER BY ... LIMIT` plans a TopK sort, which holds a filter of its own: the plan is kept,
/// and each run's sort starts with a fresh one (a stale one would drop the next run's rows).
#[test]
fn a_kept_top_k_sort_starts_afresh_each_run() {
    on_big_stack(|| {
        block_on(async {
            let mut s = Session::new(crate::Engine::new());
            run(
                &mut s,
                "CREATE TABLE ko (o_id int, o_d_id int, o_c_id int, o_carrier_id int, \
                 PRIMARY KEY (o_d_id, o_id))",
            )
            .await;
            run(&mut s, "CREATE INDEX ko_c ON ko (o_d_id, o_c_id, o_id)").await;
            run(
                &mut s,
                "INSERT INTO ko SELECT g, 1, g % 7, g % 3 FROM generate_series(1, 50) g",
            )
            .await;
            let p = s
                .prepare(
                    "SELECT o_id, o_carrier_id FROM ko WHERE o_d_id = $1 AND o_c_id = $2 \
                     ORDER BY o_id DESC LIMIT 2",
                    &[],
                )
                .await
                .unwrap();
            assert_eq!(
                execute_twice(&mut s, &p, &[1, 3]).await,
                texts(&[&["45", "0"], &["38", "2"]])
            );
            assert!(p.has_kept_plan());
            // Lower ids than the last run's: a filter left from it would drop them.
            assert_eq!(
                execute(&mut s, &p, &[1, 1]).await,
                texts(&[&["50", "2"], &["43", "1"]])
            );
            assert_eq!(
                execute(&mut s, &p, &[1, 0]).await,
                texts(&[&["49", "1"], &["42", "0"]])
            );
        })
    });
}

/// A statement parsed again with the same text (an unnamed statement, as drivers send before
/// they prepare one) finds the first one's analysis and its kept plan; DDL makes it analyze
/// afresh.
#[test]
fn the_same_text_parsed_again_shares_the_kept_plan() {
    on_big_stack(|| {
        block_on(async {
            let mut s = Session::new(crate::Engine::new());
            run(&mut s, "CREATE TABLE kr (id int PRIMARY KEY, k int)").await;
            run(
                &mut s,
                "INSERT INTO kr SELECT g, g % 4 FROM generate_series(1, 40) g",
            )
            .await;
            let sql = "SELECT count(*) FROM kr WHERE k = $1 AND id > $2";
            let first = s.prepare(sql, &[]).await.unwrap();
            assert_eq!(
                execute_twice(&mut s, &first, &[1, 0]).await,
                texts(&[&["10"]])
            );
            assert!(first.has_kept_plan());
            let again = s.prepare(sql, &[]).await.unwrap();
            assert!(again.has_kept_plan());
            assert_eq!(execute(&mut s, &again, &[2, 20]).await, texts(&[&["5"]]));
            // Other declared types are another statement.
            assert!(!s.prepare(sql, &[20, 20]).await.unwrap().has_kept_plan());
            run(&mut s, "ALTER TABLE kr ADD COLUMN v int").await;
            let after_ddl = s.prepare(sql, &[]).await.unwrap();
            assert!(!after_ddl.has_kept_plan());
            assert_eq!(
                execute(&mut s, &after_ddl, &[3, 0]).await,
                texts(&[&["10"]])
            );
        })
    });
}

/// `count(*)` over a whole table is not answered from the statistics of the moment the plan
/// was kept.
#[test]
fn a_kept_count_counts_the_rows_of_each_run() {
    on_big_stack(|| {
        block_on(async {
            let mut s = Session::new(crate::Engine::new());
            run(&mut s, "CREATE TABLE kn (id int PRIMARY KEY)").await;
            run(&mut s, "INSERT INTO kn VALUES (1), (2)").await;
            let p = s.prepare("SELECT count(*) FROM kn", &[]).await.unwrap();
            assert_eq!(execute_twice(&mut s, &p, &[]).await, texts(&[&["2"]]));
            assert!(p.has_kept_plan());
            run(&mut s, "INSERT INTO kn VALUES (3)").await;
            assert_eq!(execute(&mut s, &p, &[]).await, texts(&[&["3"]]));
        })
    });
}

/// An ordered index read (ORDER BY ... LIMIT, min, max) kept with its statement reads each run's
/// range in order: other districts, rows written since, a range with no rows.
#[test]
fn a_kept_ordered_read_reads_each_runs_range() {
    on_big_stack(|| {
        block_on(async {
            let mut s = Session::new(crate::Engine::new());
            run(
                &mut s,
                "CREATE TABLE kn (w int, d int, o int, PRIMARY KEY (w, d, o))",
            )
            .await;
            run(
                &mut s,
                "INSERT INTO kn SELECT 1, d, o FROM generate_series(1, 3) d, \
                 generate_series(10, 50) o WHERE o BETWEEN d * 10 AND d * 10 + 20",
            )
            .await;
            let oldest = s
                .prepare(
                    "SELECT o FROM kn WHERE w = $1 AND d = $2 ORDER BY o LIMIT 1",
                    &[],
                )
                .await
                .unwrap();
            let newest = s
                .prepare("SELECT max(o) FROM kn WHERE w = $1 AND d = $2", &[])
                .await
                .unwrap();
            assert_eq!(
                execute_twice(&mut s, &oldest, &[1, 2]).await,
                texts(&[&["20"]])
            );
            assert_eq!(
                execute_twice(&mut s, &newest, &[1, 2]).await,
                texts(&[&["40"]])
            );
            assert!(oldest.has_kept_plan() && newest.has_kept_plan());
            assert_eq!(execute(&mut s, &oldest, &[1, 3]).await, texts(&[&["30"]]));
            assert_eq!(execute(&mut s, &newest, &[1, 1]).await, texts(&[&["30"]]));
            assert_eq!(execute(&mut s, &oldest, &[2, 1]).await, texts(&[]));
            assert_eq!(execute(&mut s, &newest, &[2, 1]).await, texts(&[&["NULL"]]));
            run(&mut s, "DELETE FROM kn WHERE d = 3 AND o < 35").await;
            run(&mut s, "INSERT INTO kn VALUES (1, 1, 99), (1, 1, 5)").await;
            assert_eq!(execute(&mut s, &oldest, &[1, 3]).await, texts(&[&["35"]]));
            assert_eq!(execute(&mut s, &oldest, &[1, 1]).await, texts(&[&["5"]]));
            assert_eq!(execute(&mut s, &newest, &[1, 1]).await, texts(&[&["99"]]));
        })
    });
}

/// DataFusion plans LIMIT and OFFSET only from constants: a statement with parameters there
/// is planned with each run's values, never kept (a kept one failed from its second run).
#[test]
fn limit_and_offset_parameters_are_bound_every_run() {
    on_big_stack(|| {
        block_on(async {
            let mut s = Session::new(crate::Engine::new());
            run(&mut s, "CREATE TABLE kl (id int PRIMARY KEY)").await;
            run(
                &mut s,
                "INSERT INTO kl SELECT g FROM generate_series(1, 9) g",
            )
            .await;
            let p = s
                .prepare(
                    "SELECT id FROM kl WHERE id > $1 ORDER BY id LIMIT $2 OFFSET $3",
                    &[],
                )
                .await
                .unwrap();
            assert_eq!(
                execute_twice(&mut s, &p, &[0, 2, 1]).await,
                texts(&[&["2"], &["3"]])
            );
            assert!(!p.has_kept_plan());
            assert_eq!(
                execute(&mut s, &p, &[5, 3, 0]).await,
                texts(&[&["6"], &["7"], &["8"]])
            );
        })
    });
}
