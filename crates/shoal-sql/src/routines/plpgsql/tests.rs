//! Embedded statements run again on what was kept from their first run (see `kept`): the
//! forms each statement takes, and that their answers are those of planning afresh.

use datafusion::common::ScalarValue;

use crate::kept_plan::tests::{block_on, on_big_stack};
use crate::session::{Session, StatementResult};

/// The rows of the last statement of `sql`, each column as text.
async fn query(s: &mut Session, sql: &str) -> Vec<Vec<String>> {
    let mut last = None;
    for r in s.execute_sql(sql).await {
        last = Some(r.unwrap_or_else(|e| panic!("{sql}: {e:?}")));
    }
    let batches = match last.expect("a statement").into_batches().unwrap() {
        StatementResult::Rows { batches, .. } => batches,
        StatementResult::RowStream { rows, .. } => rows.collect().await.unwrap(),
        _ => return Vec::new(),
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

const SETUP: &str = "
CREATE TABLE kt (id int PRIMARY KEY, k int, v numeric(10,2), name varchar(8), alt varchar(8));
INSERT INTO kt SELECT g, g % 3, g, 'n' || g, 'a' || g FROM generate_series(1, 30) g;
CREATE FUNCTION kt_run(n int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE c bigint; nm text; chosen text; total numeric := 0; out text := '';
BEGIN
  FOR i IN 1 .. n LOOP
    SELECT count(*) INTO c FROM kt WHERE k = i % 3 AND id > i;
    SELECT name INTO nm FROM kt WHERE k = i % 3 ORDER BY id DESC OFFSET i % 2 LIMIT 1;
    UPDATE kt SET v = v + 0.5 WHERE k = i % 3 AND id <= i;
    SELECT v INTO total FROM kt WHERE k = (i + 1) % 3 AND id > i ORDER BY id LIMIT 1 FOR UPDATE;
    UPDATE kt SET v = v - 1 WHERE id = i;
    SELECT CASE i % 2 WHEN 0 THEN name WHEN 1 THEN alt END INTO chosen FROM kt WHERE id = i
      FOR UPDATE;
    out := out || c || nm || total || chosen || ' ';
  END LOOP;
  RETURN out;
END $$;
";

/// What `kt_run(n)` returns, computed by plain SQL statements on a copy of the table.
async fn expected(s: &mut Session, n: i64) -> String {
    let mut out = String::new();
    for i in 1..=n {
        let (k, next) = (i % 3, (i + 1) % 3);
        let c = &query(
            s,
            &format!("SELECT count(*) FROM kt2 WHERE k = {k} AND id > {i}"),
        )
        .await[0][0];
        let nm = &query(
            s,
            &format!(
                "SELECT name FROM kt2 WHERE k = {k} ORDER BY id DESC OFFSET {} LIMIT 1",
                i % 2
            ),
        )
        .await[0][0];
        query(
            s,
            &format!("UPDATE kt2 SET v = v + 0.5 WHERE k = {k} AND id <= {i}"),
        )
        .await;
        let total = &query(
            s,
            &format!("SELECT v::text FROM kt2 WHERE k = {next} AND id > {i} ORDER BY id LIMIT 1"),
        )
        .await[0][0];
        query(s, &format!("UPDATE kt2 SET v = v - 1 WHERE id = {i}")).await;
        let chosen = &query(
            s,
            &format!(
                "SELECT CASE {} WHEN 0 THEN name WHEN 1 THEN alt END FROM kt2 WHERE id = {i}",
                i % 2
            ),
        )
        .await[0][0];
        out.push_str(&format!("{c}{nm}{total}{chosen} "));
    }
    out
}

#[test]
fn statements_run_again_on_kept_plans_with_the_same_answers() {
    on_big_stack(|| {
        block_on(async {
            let mut s = Session::new(crate::Engine::new());
            query(&mut s, SETUP).await;
            query(&mut s, "CREATE TABLE kt2 AS SELECT * FROM kt").await;
            for n in [4, 7] {
                let got = query(&mut s, &format!("SELECT kt_run({n})")).await;
                let want = expected(&mut s, n).await;
                assert_eq!(got[0][0], want, "kt_run({n})");
            }
            let cache = &s.routine_cache;
            let form = |text: &str| cache.kept_form(text).unwrap_or_default();
            assert_eq!(
                form("SELECT count(*) FROM kt WHERE k = i % 3 AND id > i"),
                "query+plan"
            );
            assert_eq!(
                form("SELECT name FROM kt WHERE k = i % 3 ORDER BY id DESC OFFSET i % 2 LIMIT 1"),
                "query+plan"
            );
            assert_eq!(
                form("UPDATE kt SET v = v + 0.5 WHERE k = i % 3 AND id <= i"),
                "targets+plan"
            );
            assert_eq!(
                form("SELECT v FROM kt WHERE k = (i + 1) % 3 AND id > i ORDER BY id LIMIT 1 FOR UPDATE"),
                "targets+plan"
            );
            assert_eq!(form("UPDATE kt SET v = v - 1 WHERE id = i"), "fast");
            assert_eq!(
                form("SELECT CASE i % 2 WHEN 0 THEN name WHEN 1 THEN alt END FROM kt WHERE id = i\n      FOR UPDATE"),
                "fast"
            );
            // DDL plans them again, with the same answers.
            query(
                &mut s,
                "CREATE INDEX kt_k ON kt (k); CREATE INDEX kt2_k ON kt2 (k)",
            )
            .await;
            let got = query(&mut s, "SELECT kt_run(5)").await;
            assert_eq!(got[0][0], expected(&mut s, 5).await);
            let rows = query(&mut s, "SELECT id, v FROM kt EXCEPT SELECT id, v FROM kt2").await;
            assert!(rows.is_empty(), "tables differ: {rows:?}");
        })
    });
}
