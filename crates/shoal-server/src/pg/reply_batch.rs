//! A reply waits until the other connections ready on its thread have run, unless another
//! transaction is queued behind the one it answers.
//!
//! A connection thread (`connection_threads.rs`) serves every connection that has a message
//! ready, one after the other. Each reply's `sendto` wakes the client waiting for it, and on a
//! busy machine the woken client usually takes the CPU from the connection thread at once
//! (wake-up preemption) while other connections' statements are still waiting to run: one
//! more switch away and back per round trip. So a reply first yields to the thread's other
//! ready tasks (tokio runs a yielded task again after them and after one non-blocking look at
//! the sockets), and the replies of one turn go out back to back: pgbench select-only at 8
//! clients on 2 cores made ~0.5 instead of ~1 involuntary switch of the connection threads
//! per transaction, and ran ~10% more transactions a second (bench/pgbench/README.md,
//! "Replies of one turn go out together").
//!
//! The reply of a transaction that another one waits for (a row it wrote or locked) goes out
//! at once: the sooner its client sends the next statement, the sooner the lock is free.
//! Holding every reply back cost pgbench's tpcb-like ~8% (the branch rows' lock holders
//! waited too); holding back only those nobody queues behind gained it ~7%. With nothing else
//! ready the wait costs one extra non-blocking look at the sockets (`epoll_wait` with no
//! timeout).

/// Lets the thread's other ready tasks run before a reply is sent (see the module doc), unless
/// another transaction is `waited_for` this session's.
pub(crate) async fn before_reply(waited_for: bool) {
    if !waited_for {
        tokio::task::yield_now().await;
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;

    /// Runs two tasks, spawned in order, that each record their name once they may send their
    /// reply, the first with `first_waited_for`: returns the order in which they replied.
    fn reply_order(first_waited_for: bool) -> Vec<&'static str> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let local = tokio::task::LocalSet::new();
        let order = Rc::new(RefCell::new(Vec::new()));
        for (name, waited_for) in [("first", first_waited_for), ("second", false)] {
            let order = order.clone();
            local.spawn_local(async move {
                before_reply(waited_for).await;
                order.borrow_mut().push(name);
            });
        }
        runtime.block_on(local);
        let order = order.borrow().clone();
        order
    }

    #[test]
    fn a_reply_lets_the_other_ready_connections_run_first() {
        assert_eq!(reply_order(false), ["second", "first"]);
    }

    #[test]
    fn the_reply_of_a_transaction_others_wait_for_goes_at_once() {
        assert_eq!(reply_order(true), ["first", "second"]);
    }
}
