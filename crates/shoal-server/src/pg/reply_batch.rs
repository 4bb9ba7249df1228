//! An idle session's reply waits until the other connections ready on its thread have run.
//!
//! A connection thread (`connection_threads.rs`) serves every connection that has a message
//! ready, one after the other. Each reply's `sendto` wakes the client waiting for it, and on a
//! busy machine the woken client usually takes the CPU from the connection thread at once
//! (wake-up preemption) while other connections' statements are still waiting to run: one
//! more switch away and back per round trip. So a reply that leaves the session idle first
//! yields to the thread's other ready tasks (tokio runs a yielded task again after them and
//! after one look at the sockets), and the replies of one turn go out back to back: pgbench
//! select-only at 8 clients on 2 cores made ~0.5 instead of ~1 involuntary switch of the
//! connection threads per transaction, and ran ~7-15% more transactions a second
//! (bench/pgbench/README.md, session 29).
//!
//! A reply inside a transaction block goes out at once: its transaction may hold row locks
//! that other transactions queue on, and holding them longer cost pgbench's tpcb-like ~8% when
//! every reply waited. With nothing else ready the wait costs one extra non-blocking look at
//! the sockets (`epoll_wait` with no timeout).

use pgwire::messages::response::TransactionStatus;

/// Lets the thread's other ready tasks run before a reply with `status` is sent (see the
/// module doc); returns at once inside a transaction block.
pub(crate) async fn before_reply(status: TransactionStatus) {
    if matches!(status, TransactionStatus::Idle) {
        tokio::task::yield_now().await;
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;

    /// Runs two tasks, spawned in order, that each record their name once they may reply
    /// with `first_status`/`second_status`: returns the order in which they replied.
    fn reply_order(first_status: TransactionStatus) -> Vec<&'static str> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let local = tokio::task::LocalSet::new();
        let order = Rc::new(RefCell::new(Vec::new()));
        for (name, status) in [("first", first_status), ("second", TransactionStatus::Idle)] {
            let order = order.clone();
            local.spawn_local(async move {
                before_reply(status).await;
                order.borrow_mut().push(name);
            });
        }
        runtime.block_on(local);
        let order = order.borrow().clone();
        order
    }

    #[test]
    fn an_idle_reply_lets_the_other_ready_connections_run_first() {
        assert_eq!(reply_order(TransactionStatus::Idle), ["second", "first"]);
    }

    #[test]
    fn a_reply_inside_a_transaction_block_goes_at_once() {
        assert_eq!(
            reply_order(TransactionStatus::Transaction),
            ["first", "second"]
        );
    }
}
