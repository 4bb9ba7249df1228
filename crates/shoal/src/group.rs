//! `shoal serve --node-id N --peers ...`: the server as a member of a replication group
//! (docs/replication.md). This module turns the flags into the group's description and
//! restarts a primary that lost its place.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;

use shoal_replication::ReplicaConfig;

/// One `--peers` item: `ID=HOST:PORT`.
pub fn peer(arg: &str) -> Result<(u64, SocketAddr), String> {
    let (id, addr) = arg
        .split_once('=')
        .ok_or_else(|| format!("\"{arg}\" is not ID=HOST:PORT"))?;
    let id: u64 = id
        .trim()
        .parse()
        .ok()
        .filter(|&id| id > 0)
        .ok_or_else(|| format!("\"{id}\" is not a node id (1, 2, 3, ...)"))?;
    let addr: SocketAddr = addr
        .trim()
        .parse()
        .map_err(|e| format!("\"{addr}\" is not HOST:PORT ({e})"))?;
    Ok((id, addr))
}

/// The group this node belongs to, from its flags.
pub fn config(
    node_id: u64,
    peers: &[(u64, SocketAddr)],
    join: bool,
    log_keep: u64,
    data_dir: &Path,
) -> Result<ReplicaConfig, String> {
    let mut members = BTreeMap::new();
    for &(id, addr) in peers {
        // Nodes do not authenticate each other yet: the group stays on one machine.
        if !addr.ip().is_loopback() {
            return Err(format!(
                "--peers: node {id} at {addr}: replication between machines needs node \
                 authentication, which Shoal does not have yet; give loopback addresses"
            ));
        }
        if members.insert(id, addr.to_string()).is_some() {
            return Err(format!("--peers names node {id} twice"));
        }
    }
    let listen = peers
        .iter()
        .find(|(id, _)| *id == node_id)
        .map(|(_, addr)| *addr)
        .ok_or_else(|| format!("--peers does not name this node ({node_id})"))?;
    if join && members.len() < 2 {
        return Err("--join: --peers names no member of the group to join".into());
    }
    if !join && members.len() < 3 {
        return Err(format!(
            "a replication group needs at least 3 members to survive the loss of one; --peers \
             names {}",
            members.len()
        ));
    }
    let mut config = ReplicaConfig::new(node_id, listen, members, data_dir.join("raft"));
    config.join = join;
    config.entries_kept_after_checkpoint = log_keep;
    Ok(config)
}

/// Replaces this process with a new run of the same command: a deposed primary's memory may
/// hold commits the group never acknowledged, and a fresh start applies only the group's log.
pub fn restart_process() -> ! {
    let exe = std::env::current_exe().expect("the server's own executable");
    let err = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .exec();
    eprintln!("shoal: could not restart: {err}");
    std::process::exit(1);
}
