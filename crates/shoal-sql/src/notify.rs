//! LISTEN, UNLISTEN, NOTIFY and `pg_notify()`, as PostgreSQL has them. A session's LISTEN and
//! UNLISTEN take effect when its transaction commits, and its notifications are sent then, in
//! the order given, one of each identical (channel, payload) pair; a rollback drops both. Each
//! session has an inbox; the protocol layer delivers what arrives there as NotificationResponse
//! messages when the session is idle between transactions (see `shoal-server`'s connection
//! loop), as PostgreSQL delivers them.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{code, SqlError, SqlResult};

/// PostgreSQL's limit on a payload: 8000 bytes less room for the channel name.
pub const PAYLOAD_BYTES_MAX: usize = 7999;
/// Channel names are identifiers, cut at 63 bytes (NAMEDATALEN - 1).
const CHANNEL_BYTES_MAX: usize = 63;
/// Notifications waiting in one session's inbox. PostgreSQL's queue holds 8 GB for all
/// sessions; a listener that never reads must not grow without bound either: past this,
/// NOTIFY on its channels fails (54000), as PostgreSQL's does with a full queue.
pub const INBOX_NOTIFICATIONS_MAX: usize = 100_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notification {
    /// The backend PID of the session that sent it.
    pub sender_pid: i32,
    pub channel: String,
    pub payload: String,
}

/// Where one session's notifications arrive.
#[derive(Default)]
pub struct Inbox {
    channels: Mutex<HashSet<String>>,
    queue: Mutex<VecDeque<Notification>>,
    /// Woken when a notification arrives (a permit is stored if nobody waits).
    arrived: tokio::sync::Notify,
}

impl Inbox {
    /// Everything that arrived, oldest first.
    pub fn take_all(&self) -> Vec<Notification> {
        self.queue.lock().drain(..).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.lock().is_empty()
    }

    /// Resolves when a notification has arrived since the last call returned.
    pub async fn arrival(&self) {
        self.arrived.notified().await
    }
}

/// The sessions listening on at least one channel, by backend PID. One per engine.
#[derive(Default)]
pub struct Hub {
    listeners: Mutex<HashMap<i32, Arc<Inbox>>>,
}

impl Hub {
    /// Queues each notification in the inboxes of the sessions listening on its channel.
    fn publish(&self, notifications: &[Notification]) {
        let listeners = self.listeners.lock();
        for inbox in listeners.values() {
            let channels = inbox.channels.lock();
            let mut queue = inbox.queue.lock();
            let before = queue.len();
            queue.extend(
                notifications
                    .iter()
                    .filter(|n| channels.contains(&n.channel))
                    .cloned(),
            );
            if queue.len() > before {
                inbox.arrived.notify_one();
            }
        }
    }

    /// Whether some listener of `channel` has no room left.
    fn full_for(&self, channel: &str) -> bool {
        self.listeners.lock().values().any(|inbox| {
            inbox.channels.lock().contains(channel)
                && inbox.queue.lock().len() >= INBOX_NOTIFICATIONS_MAX
        })
    }
}

enum ListenChange {
    Listen(String),
    Unlisten(String),
    UnlistenAll,
}

#[derive(Default)]
struct Pending {
    changes: Vec<ListenChange>,
    notifications: Vec<Notification>,
}

/// One session's side: its inbox and what its open transaction will do at commit.
pub struct SessionNotifications {
    hub: Arc<Hub>,
    pid: i32,
    inbox: Arc<Inbox>,
    pending: Mutex<Pending>,
}

impl SessionNotifications {
    pub fn new(hub: Arc<Hub>, pid: i32) -> Self {
        SessionNotifications {
            hub,
            pid,
            inbox: Arc::new(Inbox::default()),
            pending: Mutex::new(Pending::default()),
        }
    }

    pub fn inbox(&self) -> Arc<Inbox> {
        self.inbox.clone()
    }

    pub fn listen(&self, channel: &str) -> SqlResult<()> {
        let channel = check_channel(channel)?;
        self.pending
            .lock()
            .changes
            .push(ListenChange::Listen(channel));
        Ok(())
    }

    /// UNLISTEN channel, or UNLISTEN * with None.
    pub fn unlisten(&self, channel: Option<&str>) {
        let change = match channel {
            Some(c) => ListenChange::Unlisten(c.to_string()),
            None => ListenChange::UnlistenAll,
        };
        self.pending.lock().changes.push(change);
    }

    /// NOTIFY channel [, payload] and pg_notify(channel, payload): sent at commit.
    pub fn notify(&self, channel: &str, payload: &str) -> SqlResult<()> {
        let channel = check_channel(channel)?;
        if payload.len() > PAYLOAD_BYTES_MAX {
            return Err(SqlError::new(
                code::INVALID_PARAMETER_VALUE,
                "payload string too long",
            ));
        }
        if self.hub.full_for(&channel) {
            return Err(SqlError::new(
                code::PROGRAM_LIMIT_EXCEEDED,
                "too many notifications in the NOTIFY queue",
            ));
        }
        let n = Notification {
            sender_pid: self.pid,
            channel,
            payload: payload.to_string(),
        };
        let mut pending = self.pending.lock();
        if !pending.notifications.contains(&n) {
            pending.notifications.push(n);
        }
        Ok(())
    }

    /// The transaction ended: on commit its LISTEN/UNLISTEN take effect, then its
    /// notifications go out (so a session hears its own if it listens); on rollback both are
    /// dropped.
    pub fn end_transaction(&self, committed: bool) {
        let Pending {
            changes,
            notifications,
        } = std::mem::take(&mut *self.pending.lock());
        if !committed {
            return;
        }
        if !changes.is_empty() {
            let listening = {
                let mut channels = self.inbox.channels.lock();
                for change in changes {
                    match change {
                        ListenChange::Listen(c) => {
                            channels.insert(c);
                        }
                        ListenChange::Unlisten(c) => {
                            channels.remove(&c);
                        }
                        ListenChange::UnlistenAll => channels.clear(),
                    }
                }
                !channels.is_empty()
            };
            let mut listeners = self.hub.listeners.lock();
            if listening {
                listeners.insert(self.pid, self.inbox.clone());
            } else {
                listeners.remove(&self.pid);
            }
        }
        if !notifications.is_empty() {
            self.hub.publish(&notifications);
        }
    }

    /// pg_listening_channels(): the channels this session listens on, sorted.
    pub fn listening_channels(&self) -> Vec<String> {
        let mut channels: Vec<String> = self.inbox.channels.lock().iter().cloned().collect();
        channels.sort();
        channels
    }
}

impl Drop for SessionNotifications {
    fn drop(&mut self) {
        self.hub.listeners.lock().remove(&self.pid);
    }
}

fn check_channel(channel: &str) -> SqlResult<String> {
    if channel.is_empty() {
        return Err(SqlError::new(
            code::INVALID_PARAMETER_VALUE,
            "channel name cannot be empty",
        ));
    }
    if channel.len() > CHANNEL_BYTES_MAX {
        return Err(SqlError::new(
            code::INVALID_PARAMETER_VALUE,
            "channel name too long",
        ));
    }
    Ok(channel.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_reach_listeners_at_commit_once_per_distinct_payload() {
        let hub = Arc::new(Hub::default());
        let listener = SessionNotifications::new(hub.clone(), 1);
        let sender = SessionNotifications::new(hub.clone(), 2);
        listener.listen("jobs").unwrap();
        sender.notify("jobs", "before listening").unwrap();
        sender.end_transaction(true);
        listener.end_transaction(true);
        assert!(listener.inbox().is_empty(), "LISTEN counts from its commit");
        sender.notify("jobs", "a").unwrap();
        sender.notify("jobs", "a").unwrap();
        sender.notify("other", "x").unwrap();
        sender.notify("jobs", "b").unwrap();
        assert!(
            listener.inbox().is_empty(),
            "nothing before the sender commits"
        );
        sender.end_transaction(true);
        let got: Vec<String> = listener
            .inbox()
            .take_all()
            .into_iter()
            .map(|n| n.payload)
            .collect();
        assert_eq!(got, ["a", "b"]);
        sender.notify("jobs", "rolled back").unwrap();
        sender.end_transaction(false);
        assert!(listener.inbox().is_empty());
        listener.unlisten(None);
        listener.end_transaction(true);
        sender.notify("jobs", "after unlisten").unwrap();
        sender.end_transaction(true);
        assert!(listener.inbox().is_empty());
        assert!(hub.listeners.lock().is_empty());
    }

    #[test]
    fn bad_channels_and_payloads_are_refused() {
        let s = SessionNotifications::new(Arc::new(Hub::default()), 1);
        assert!(s.notify("", "x").is_err());
        assert!(s.notify(&"c".repeat(64), "x").is_err());
        assert!(s.notify("c", &"p".repeat(PAYLOAD_BYTES_MAX + 1)).is_err());
        assert!(s.notify("c", &"p".repeat(PAYLOAD_BYTES_MAX)).is_ok());
    }
}
