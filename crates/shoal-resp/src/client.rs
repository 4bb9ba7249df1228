//! One client connection's state, as CLIENT and HELLO show and change it.

use crate::protocol::Protocol;

pub struct Client {
    /// CLIENT ID: unique in the server's life, counting from 1.
    pub id: u64,
    pub name: Option<Vec<u8>>,
    /// CLIENT SETINFO LIB-NAME / LIB-VER.
    pub lib_name: Option<Vec<u8>>,
    pub lib_version: Option<Vec<u8>>,
    pub protocol: Protocol,
    /// SELECT: the database number, 0 to 15.
    pub db: u16,
    /// The peer's address, `ip:port`.
    pub addr: String,
    pub connected_at: std::time::Instant,
    /// QUIT was read: the connection ends once its reply is written.
    pub closing: bool,
    /// Between MULTI and EXEC: the commands queued, each as its arguments' bytes and the
    /// request that spans them.
    pub multi: Option<Vec<(Vec<u8>, crate::protocol::Request)>>,
    /// A command queued after MULTI was refused (unknown, wrong arity): EXEC aborts.
    pub multi_failed: bool,
    /// WATCHed keys: database, key, and the version each had (None: it did not exist).
    pub watched: Vec<(u16, Vec<u8>, Option<(u64, u64)>)>,
    /// The role the client is logged in as; None until it logs in (AUTH, HELLO AUTH) when
    /// pg_hba.conf does not trust it.
    pub user: Option<String>,
    /// The peer's IP address, which pg_hba.conf's rules look at.
    pub peer_ip: Option<std::net::IpAddr>,
    /// What `user` may do, as of a catalog version.
    pub access: Option<(u64, crate::host::Access)>,
}

impl Client {
    pub fn new(id: u64, addr: String) -> Client {
        let addr_ip = addr.parse::<std::net::SocketAddr>().ok().map(|a| a.ip());
        Client {
            id,
            name: None,
            lib_name: None,
            lib_version: None,
            protocol: Protocol::Resp2,
            db: 0,
            addr,
            connected_at: std::time::Instant::now(),
            closing: false,
            multi: None,
            multi_failed: false,
            watched: Vec::new(),
            user: None,
            peer_ip: addr_ip,
            access: None,
        }
    }

    /// CLIENT INFO's line (a subset of Redis's fields, in its order).
    pub fn info_line(&self, last_command: &str) -> String {
        let text = |v: &Option<Vec<u8>>| {
            v.as_deref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default()
        };
        format!(
            "id={} addr={} laddr= fd=0 name={} age={} idle=0 flags=N db={} sub=0 psub=0 ssub=0 multi={} qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={} user={} redir=-1 resp={} lib-name={} lib-ver={}",
            self.id,
            self.addr,
            text(&self.name),
            self.connected_at.elapsed().as_secs(),
            self.db,
            self.multi.as_ref().map_or(-1, |q| q.len() as i64),
            last_command,
            self.user.as_deref().unwrap_or("default"),
            match self.protocol {
                Protocol::Resp2 => 2,
                Protocol::Resp3 => 3,
            },
            text(&self.lib_name),
            text(&self.lib_version),
        )
    }
}
