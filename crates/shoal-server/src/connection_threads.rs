//! The threads client connections run on: one single-threaded tokio runtime per core, each with
//! its own epoll, and a connection stays on the thread it was handed to.
//!
//! Why not tokio's work-stealing runtime: there, a message arriving on a socket is noticed by
//! whichever worker is polling the shared I/O driver, which then queues the connection's task
//! and often wakes another worker to run it: a futex wake-up and a hop to another CPU for
//! every round trip. PostgreSQL's backend process sleeps in its own `recv` and has neither; on
//! pgbench's select-only with few clients, that was the difference between the two servers
//! (see bench/pgbench/README.md, "Connection threads: one runtime per core"). The price: a
//! connection cannot move to an idle core, so a long statement running on a connection's
//! thread (a bulk INSERT ... SELECT into a row table) delays the other connections of that
//! thread. DataFusion queries run on their own pool (`shoal_sql::query::query_runtime`) and
//! bulk COPY parsing on blocking threads, so the connection threads mostly wait on sockets and
//! run short statements.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

pub(crate) struct ConnectionThreads {
    threads: Vec<ConnectionThread>,
    next: AtomicUsize,
}

/// Stack of a connection thread. Parsing, planning and DataFusion's analysis of a statement
/// recurse over its tree, and an EXECUTE nests a statement's futures in another's: the 2 MiB
/// default overflowed (which aborts the process) on a prepared UPDATE with a subquery. Only
/// the pages a statement touches are ever committed.
const CONNECTION_STACK_BYTES: usize = 64 << 20;

struct ConnectionThread {
    handle: Handle,
    /// Dropping it ends the thread's runtime, and with it the connections on it.
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ConnectionThreads {
    /// `count` threads (at least one), named `shoal-conn-N`.
    pub(crate) fn start(count: usize) -> std::io::Result<ConnectionThreads> {
        let mut threads = Vec::new();
        for n in 0..count.max(1) {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .thread_name(format!("shoal-conn-{n}"))
                .build()?;
            let handle = runtime.handle().clone();
            let (stop, stopped) = oneshot::channel::<()>();
            let thread = std::thread::Builder::new()
                .name(format!("shoal-conn-{n}"))
                .stack_size(CONNECTION_STACK_BYTES)
                .spawn(move || {
                    // A current-thread runtime runs its tasks only inside `block_on`.
                    let _ = runtime.block_on(stopped);
                })?;
            threads.push(ConnectionThread {
                handle,
                stop: Some(stop),
                thread: Some(thread),
            });
        }
        Ok(ConnectionThreads {
            threads,
            next: AtomicUsize::new(0),
        })
    }

    /// The runtime of the thread the next connection goes to (round robin).
    pub(crate) fn next(&self) -> &Handle {
        let n = self.next.fetch_add(1, Ordering::Relaxed) % self.threads.len();
        &self.threads[n].handle
    }
}

impl Drop for ConnectionThreads {
    fn drop(&mut self) {
        for t in &mut self.threads {
            t.stop.take();
        }
        for t in &mut self.threads {
            if let Some(thread) = t.thread.take() {
                // A thread joining itself would deadlock; `serve` never runs on one of them.
                if thread.thread().id() != std::thread::current().id() {
                    let _ = thread.join();
                }
            }
        }
    }
}
