//! The futures of the statement entry points stay small. The server awaits each one inside an
//! `async_trait` box, which copies the whole future state on every call; if the general path's
//! future (DataFusion planning, many kilobytes) is inlined rather than boxed, every fast-path
//! execution pays for copying it (it once cost 11% of server CPU on `pgbench -S -M prepared`).

use shoal_sql::{Engine, Session};

/// Generous for a debug build, which lays futures out loosely (about 9 KiB today, the commit
/// path included); the general path inlined is 90 KiB.
const MAX_ENTRY_FUTURE_BYTES: usize = 16 * 1024;

#[test]
fn statement_entry_futures_are_small() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut session = Session::new(Engine::new());
        let created = session
            .execute_sql("CREATE TABLE t (k int PRIMARY KEY)")
            .await;
        assert!(created.iter().all(|r| r.is_ok()));
        let prepared = session
            .prepare("SELECT k FROM t WHERE k = $1", &[])
            .await
            .unwrap();

        let simple = std::mem::size_of_val(&session.execute_sql("SELECT 1"));
        assert!(
            simple <= MAX_ENTRY_FUTURE_BYTES,
            "execute_sql future: {simple} bytes"
        );
        let extended = std::mem::size_of_val(&session.execute_prepared(&prepared, vec![]));
        assert!(
            extended <= MAX_ENTRY_FUTURE_BYTES,
            "execute_prepared future: {extended} bytes"
        );
    });
}
