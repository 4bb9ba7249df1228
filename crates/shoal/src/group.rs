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
/// The shortest group key accepted: 128 bits.
const KEY_BYTES_MIN: usize = 16;

/// The group's shared secret from `--replication-key-file`: the file's bytes, a final line
/// break dropped.
pub fn read_key(path: &Path) -> Result<Vec<u8>, String> {
    let mut key = std::fs::read(path)
        .map_err(|e| format!("cannot read --replication-key-file {}: {e}", path.display()))?;
    while key.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        key.pop();
    }
    if key.len() < KEY_BYTES_MIN {
        return Err(format!(
            "--replication-key-file {}: the key has {} bytes, fewer than {KEY_BYTES_MIN} \
             (make one with: head -c 32 /dev/urandom | base64 > FILE)",
            path.display(),
            key.len()
        ));
    }
    Ok(key)
}

pub fn config(
    node_id: u64,
    peers: &[(u64, SocketAddr)],
    join: bool,
    log_keep: u64,
    key: Option<Vec<u8>>,
    data_dir: &Path,
) -> Result<ReplicaConfig, String> {
    let mut members = BTreeMap::new();
    for &(id, addr) in peers {
        // Without a key anything that reaches the port could join the group: one machine only.
        if !addr.ip().is_loopback() && key.is_none() {
            return Err(format!(
                "--peers: node {id} at {addr}: members on other machines must authenticate \
                 each other; give every member the same --replication-key-file"
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
    config.key = key.unwrap_or_default();
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
