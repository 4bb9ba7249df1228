//! The runtime DataFusion executes queries on, apart from the one that serves connections.
//! A scan or aggregation over millions of rows keeps its threads busy for as long as it runs;
//! on the server's own runtime it would hold workers that other connections' short
//! transactions (and the wire protocol's reads and writes) need. Here the operating system
//! shares the cores between the two thread pools instead, so a point UPDATE on one connection
//! does not wait for a GROUP BY on another to give back a worker. Fast-path statements never
//! come here.
//!
//! A statement is cancelled (CancelRequest, statement_timeout) by dropping its future: the
//! query's task is then aborted too, at its next await, like work on the caller's runtime.

use std::future::Future;
use std::sync::LazyLock;

use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

static QUERY_RUNTIME: LazyLock<Runtime> = LazyLock::new(|| {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("shoal-query")
        .enable_all()
        .build()
        .expect("start the query runtime")
});

/// Starts the query runtime's threads now. The server calls it at start-up: made lazily by
/// the first query, it could fail there (out of file descriptors for its epoll, say) and take
/// the connection's thread down with it.
pub fn start() {
    LazyLock::force(&QUERY_RUNTIME);
}

/// Runs `work` on the query runtime and waits for it; dropping the returned future aborts it.
pub async fn run<T: Send + 'static>(
    work: impl Future<Output = T> + Send + 'static,
) -> Result<T, tokio::task::JoinError> {
    let mut task = AbortOnDrop(QUERY_RUNTIME.spawn(work));
    (&mut task.0).await
}

/// Starts `work` on the query runtime; dropping the handle aborts it.
pub(crate) fn spawn(work: impl Future<Output = ()> + Send + 'static) -> AbortOnDrop<()> {
    AbortOnDrop(QUERY_RUNTIME.spawn(work))
}

/// A spawned task that is aborted when the waiting future (or the handle) is dropped.
pub(crate) struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> AbortOnDrop<T> {
    pub(crate) fn abort(&self) {
        self.0.abort();
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test(flavor = "current_thread")]
    async fn work_runs_on_query_threads_and_is_aborted_with_its_waiter() {
        let name = run(async { std::thread::current().name().map(str::to_string) })
            .await
            .unwrap();
        assert_eq!(name.as_deref(), Some("shoal-query"));

        let finished = Arc::new(AtomicBool::new(false));
        let flag = finished.clone();
        let waiter = run(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            flag.store(true, Ordering::SeqCst);
        });
        // Dropped before the work ends, as a cancelled statement's future is.
        assert!(tokio::time::timeout(Duration::from_millis(20), waiter)
            .await
            .is_err());
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!finished.load(Ordering::SeqCst), "the aborted work went on");
    }
}
