//! Host-based authentication rules in PostgreSQL's `pg_hba.conf` format. Each line is
//! `TYPE DATABASE USER [ADDRESS [MASK]] METHOD [OPTIONS]`; the first line that matches a
//! connection decides how it authenticates, and a connection no line matches is refused.
//!
//! What Shoal reads: the types `local`, `host`, `hostssl` and `hostnossl`; database lists of
//! `all`, `sameuser`, `samerole`, `replication` and names; user lists of `all`, names and
//! `+role` (members of the role); addresses as `all`, CIDR (`10.0.0.0/8`, `::1/128`) or an
//! address and a mask; the methods `trust`, `reject`, `scram-sha-256`, `md5` (which, as
//! PostgreSQL does for a SCRAM password, runs SCRAM), `password` and `cert`. A line Shoal
//! cannot read (a host name, `@file`, another method) is an error of that line, and left out,
//! as PostgreSQL's `pg_hba_file_rules` reports it.

use std::net::IpAddr;

/// How a client reached the server, as the TYPE column names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionType {
    /// A Unix-domain socket.
    Local,
    /// TCP, with or without TLS.
    Host,
    /// TCP with TLS.
    HostSsl,
    /// TCP without TLS.
    HostNoSsl,
}

impl ConnectionType {
    pub fn name(self) -> &'static str {
        match self {
            ConnectionType::Local => "local",
            ConnectionType::Host => "host",
            ConnectionType::HostSsl => "hostssl",
            ConnectionType::HostNoSsl => "hostnossl",
        }
    }
}

/// How a matching connection must authenticate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Trust,
    Reject,
    ScramSha256,
    /// As PostgreSQL 15 with SCRAM passwords: the client is asked for SCRAM.
    Md5,
    /// The password in clear text (over TLS, or a network one trusts).
    Password,
    /// A client certificate whose common name is the user's name.
    Cert,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Trust => "trust",
            Method::Reject => "reject",
            Method::ScramSha256 => "scram-sha-256",
            Method::Md5 => "md5",
            Method::Password => "password",
            Method::Cert => "cert",
        }
    }

    /// Whether a client must prove who it is (a password or a certificate).
    pub fn authenticates(self) -> bool {
        !matches!(self, Method::Trust)
    }
}

/// Which client addresses a host line covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Addresses {
    All,
    /// A network: its address and prefix length.
    Network(IpAddr, u8),
}

impl Addresses {
    fn contains(&self, addr: IpAddr) -> bool {
        match self {
            Addresses::All => true,
            Addresses::Network(net, prefix) => in_network(addr, *net, *prefix),
        }
    }

    /// Whether the range holds an address other than a loopback one.
    fn reaches_beyond_loopback(&self) -> bool {
        match self {
            Addresses::All => true,
            Addresses::Network(IpAddr::V4(net), prefix) => {
                !(*prefix >= 8 && net.octets()[0] == 127)
            }
            Addresses::Network(IpAddr::V6(net), prefix) => !(*prefix == 128 && net.is_loopback()),
        }
    }

    /// As pg_hba_file_rules shows it: the address (None for `all`) and the netmask.
    pub fn address_and_mask(&self) -> (Option<String>, Option<String>) {
        match self {
            Addresses::All => (Some("all".into()), None),
            Addresses::Network(net, prefix) => {
                let mask = match net {
                    IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::from(
                        u32::MAX.checked_shl(32 - u32::from(*prefix)).unwrap_or(0),
                    )),
                    IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::from(
                        u128::MAX.checked_shl(128 - u32::from(*prefix)).unwrap_or(0),
                    )),
                };
                (Some(net.to_string()), Some(mask.to_string()))
            }
        }
    }
}

/// Whether `addr` is in the network `net`/`prefix` (an IPv4 client over IPv6 as `::ffff:a.b.c.d`
/// counts as its IPv4 address).
fn in_network(addr: IpAddr, net: IpAddr, prefix: u8) -> bool {
    let addr = match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    };
    match (addr, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// One rule: a line of the file that Shoal could read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HbaRule {
    /// Its line number in the file, from 1.
    pub line: usize,
    pub connection: ConnectionType,
    pub databases: Vec<Name>,
    pub users: Vec<Name>,
    /// None for `local` lines.
    pub addresses: Option<Addresses>,
    pub method: Method,
    /// `name=value` options after the method, as written.
    pub options: Vec<(String, String)>,
}

/// A database or user entry: a keyword (`all`, `sameuser`, `+role`'s role...) or a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Name {
    All,
    SameUser,
    SameRole,
    Replication,
    /// `+role`: the role's members.
    MembersOf(String),
    Named(String),
}

impl Name {
    /// As pg_hba_file_rules lists it.
    pub fn text(&self) -> String {
        match self {
            Name::All => "all".into(),
            Name::SameUser => "sameuser".into(),
            Name::SameRole => "samerole".into(),
            Name::Replication => "replication".into(),
            Name::MembersOf(role) => format!("+{role}"),
            Name::Named(name) => name.clone(),
        }
    }
}

/// A line Shoal could not read, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HbaError {
    pub line: usize,
    pub message: String,
}

/// A whole pg_hba.conf: its rules in order, and the lines it could not read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HbaFile {
    pub rules: Vec<HbaRule>,
    pub errors: Vec<HbaError>,
}

/// What matching knows of a connection.
pub struct Client<'a> {
    /// Over a Unix-domain socket (else TCP from `address`).
    pub local: bool,
    pub ssl: bool,
    pub address: Option<IpAddr>,
    pub database: &'a str,
    pub user: &'a str,
}

impl HbaFile {
    pub fn parse(text: &str) -> HbaFile {
        let mut file = HbaFile::default();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let tokens = match tokens_of(raw) {
                Ok(t) if t.is_empty() => continue,
                Ok(t) => t,
                Err(message) => {
                    file.errors.push(HbaError { line, message });
                    continue;
                }
            };
            match rule_of(line, tokens) {
                Ok(rule) => file.rules.push(rule),
                Err(message) => file.errors.push(HbaError { line, message }),
            }
        }
        file
    }

    /// The first rule that matches `client`; `is_member(user, role)` tells role membership
    /// (a role is a member of itself). None: no line matches, and the connection is refused.
    pub fn find(
        &self,
        client: &Client,
        is_member: &dyn Fn(&str, &str) -> bool,
    ) -> Option<&HbaRule> {
        self.rules.iter().find(|rule| {
            let connection = match rule.connection {
                ConnectionType::Local => client.local,
                ConnectionType::Host => !client.local,
                ConnectionType::HostSsl => !client.local && client.ssl,
                ConnectionType::HostNoSsl => !client.local && !client.ssl,
            };
            let address = match (&rule.addresses, client.address) {
                (None, _) => true,
                (Some(range), Some(addr)) => range.contains(addr),
                (Some(_), None) => false,
            };
            let database = rule.databases.iter().any(|d| match d {
                Name::All => true,
                Name::SameUser => client.database == client.user,
                Name::SameRole => is_member(client.user, client.database),
                // Shoal has no replication connections.
                Name::Replication => false,
                Name::MembersOf(role) => client.database == format!("+{role}"),
                Name::Named(name) => name == client.database,
            });
            let user = rule.users.iter().any(|u| match u {
                Name::All => true,
                Name::MembersOf(role) => is_member(client.user, role),
                Name::Named(name) => name == client.user,
                Name::SameUser | Name::SameRole | Name::Replication => false,
            });
            connection && address && database && user
        })
    }

    /// Rules that let a client from beyond loopback in without a password or certificate:
    /// a server listening on such an address must have none.
    pub fn open_to_the_network(&self) -> Vec<&HbaRule> {
        self.rules
            .iter()
            .filter(|rule| {
                rule.method == Method::Trust
                    && rule
                        .addresses
                        .as_ref()
                        .is_some_and(Addresses::reaches_beyond_loopback)
            })
            .collect()
    }
}

/// The rules a new data directory gets: local and loopback connections as `method`
/// (`trust` without a superuser password, `scram-sha-256` with one), nothing else.
pub fn default_file(local_method: Method, loopback_method: Method) -> String {
    let local = local_method.name();
    let host = loopback_method.name();
    format!(
        "# Shoal client authentication, in PostgreSQL's pg_hba.conf format:\n\
         # TYPE  DATABASE  USER  ADDRESS  METHOD [OPTIONS]. The first matching line decides;\n\
         # a connection no line matches is refused. Reload with SELECT pg_reload_conf().\n\
         #\n\
         # To serve clients on the network, listen on their interface (--listen) and add a line\n\
         # for their addresses that requires a password, e.g.:\n\
         # host    all       all   10.0.0.0/8     scram-sha-256\n\
         \n\
         # TYPE  DATABASE  USER  ADDRESS        METHOD\n\
         local   all       all                  {local}\n\
         host    all       all   127.0.0.1/32   {host}\n\
         host    all       all   ::1/128        {host}\n"
    )
}

/// A line's fields: split at blanks, each a comma-separated list of (text, quoted) items; a
/// `#` starts a comment, double quotes keep blanks, commas and `#` (and make a keyword a name).
fn tokens_of(line: &str) -> Result<Vec<Vec<(String, bool)>>, String> {
    let mut fields: Vec<Vec<(String, bool)>> = Vec::new();
    let mut items: Vec<(String, bool)> = Vec::new();
    let mut item = String::new();
    let mut quoted = false;
    let mut in_quotes = false;
    // After a comma, blanks do not end the field: the list goes on.
    let mut after_comma = false;
    fn end_item(item: &mut String, quoted: &mut bool, items: &mut Vec<(String, bool)>) {
        if !item.is_empty() || *quoted {
            items.push((std::mem::take(item), *quoted));
        }
        *quoted = false;
    }
    for c in line.chars() {
        if in_quotes {
            match c {
                '"' => in_quotes = false,
                c => item.push(c),
            }
            continue;
        }
        match c {
            '"' => {
                in_quotes = true;
                quoted = true;
                after_comma = false;
            }
            '#' => break,
            ',' => {
                end_item(&mut item, &mut quoted, &mut items);
                after_comma = true;
            }
            c if c.is_whitespace() => {
                end_item(&mut item, &mut quoted, &mut items);
                if !after_comma && !items.is_empty() {
                    fields.push(std::mem::take(&mut items));
                }
            }
            c => {
                item.push(c);
                after_comma = false;
            }
        }
    }
    if in_quotes {
        return Err("unterminated quoted string".into());
    }
    end_item(&mut item, &mut quoted, &mut items);
    if !items.is_empty() {
        fields.push(items);
    }
    Ok(fields)
}

fn single(token: &[(String, bool)], what: &str) -> Result<String, String> {
    match token {
        [(text, _)] => Ok(text.clone()),
        _ => Err(format!("multiple values specified for {what}")),
    }
}

fn names(token: Vec<(String, bool)>, users: bool) -> Result<Vec<Name>, String> {
    token
        .into_iter()
        .map(|(text, quoted)| {
            if text.starts_with('@') && !quoted {
                return Err(format!(
                    "reading names from a file (\"{text}\") is not supported"
                ));
            }
            Ok(match text.as_str() {
                _ if quoted => Name::Named(text),
                "all" => Name::All,
                "sameuser" if !users => Name::SameUser,
                "samerole" | "samegroup" if !users => Name::SameRole,
                "replication" if !users => Name::Replication,
                _ => match text.strip_prefix('+') {
                    Some(role) => Name::MembersOf(role.to_string()),
                    None => Name::Named(text),
                },
            })
        })
        .collect()
}

fn rule_of(line: usize, tokens: Vec<Vec<(String, bool)>>) -> Result<HbaRule, String> {
    let mut tokens = tokens.into_iter();
    let kind = single(&tokens.next().unwrap_or_default(), "connection type")?;
    let connection = match kind.as_str() {
        "local" => ConnectionType::Local,
        "host" => ConnectionType::Host,
        "hostssl" => ConnectionType::HostSsl,
        "hostnossl" => ConnectionType::HostNoSsl,
        "hostgssenc" | "hostnogssenc" => {
            return Err(format!(
                "connection type \"{kind}\" (GSSAPI) is not supported"
            ))
        }
        _ => return Err(format!("invalid connection type \"{kind}\"")),
    };
    let databases = names(
        tokens
            .next()
            .ok_or("end-of-line before database specification")?,
        false,
    )?;
    let users = names(
        tokens
            .next()
            .ok_or("end-of-line before role specification")?,
        true,
    )?;
    let addresses = if connection == ConnectionType::Local {
        None
    } else {
        let address = single(
            &tokens
                .next()
                .ok_or("end-of-line before IP address specification")?,
            "IP address",
        )?;
        Some(match address.as_str() {
            "all" => Addresses::All,
            "samehost" | "samenet" => {
                return Err(format!("\"{address}\" is not supported: write the network"))
            }
            _ => match address.split_once('/') {
                Some((ip, prefix)) => {
                    let ip: IpAddr = ip
                        .parse()
                        .map_err(|_| format!("invalid IP address \"{ip}\""))?;
                    let max = if ip.is_ipv4() { 32 } else { 128 };
                    let prefix: u8 = prefix
                        .parse()
                        .ok()
                        .filter(|p| *p <= max)
                        .ok_or_else(|| format!("invalid CIDR mask in address \"{address}\""))?;
                    Addresses::Network(ip, prefix)
                }
                None => {
                    let ip: IpAddr = address.parse().map_err(|_| {
                        format!("host names are not supported (\"{address}\"): write an IP address")
                    })?;
                    let mask = single(
                        &tokens
                            .next()
                            .ok_or("end-of-line before netmask specification")?,
                        "netmask",
                    )?;
                    let mask: IpAddr = mask
                        .parse()
                        .map_err(|_| format!("invalid IP mask \"{mask}\""))?;
                    let bits = match mask {
                        IpAddr::V4(m) => u128::from(u32::from(m)) << 96,
                        IpAddr::V6(m) => u128::from(m),
                    };
                    let prefix = bits.leading_ones() as u8;
                    if bits.count_ones() != bits.leading_ones() || ip.is_ipv4() != mask.is_ipv4() {
                        return Err(format!("invalid IP mask \"{mask}\""));
                    }
                    Addresses::Network(ip, prefix)
                }
            },
        })
    };
    let method = single(
        &tokens
            .next()
            .ok_or("end-of-line before authentication method")?,
        "authentication type",
    )?;
    let method = match method.as_str() {
        "trust" => Method::Trust,
        "reject" => Method::Reject,
        "scram-sha-256" => Method::ScramSha256,
        "md5" => Method::Md5,
        "password" => Method::Password,
        "cert" => Method::Cert,
        other => {
            return Err(format!(
                "authentication method \"{other}\" is not supported by Shoal"
            ))
        }
    };
    if method == Method::Cert && connection != ConnectionType::HostSsl {
        return Err("cert authentication is only supported on hostssl connections".into());
    }
    let mut options = Vec::new();
    for token in tokens {
        for (text, _) in token {
            let (name, value) = text
                .split_once('=')
                .ok_or_else(|| format!("authentication option not in name=value format: {text}"))?;
            match name {
                "clientcert" if matches!(value, "verify-ca" | "verify-full") => {}
                "clientcert" => return Err(format!("invalid value for clientcert: \"{value}\"")),
                _ => {
                    return Err(format!(
                        "authentication option \"{name}\" is not supported by Shoal"
                    ))
                }
            }
            options.push((name.to_string(), value.to_string()));
        }
    }
    Ok(HbaRule {
        line,
        connection,
        databases,
        users,
        addresses,
        method,
        options,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client<'a>(addr: &str, database: &'a str, user: &'a str) -> Client<'a> {
        Client {
            local: addr == "local",
            ssl: false,
            address: addr.parse().ok(),
            database,
            user,
        }
    }

    fn no_groups(_: &str, _: &str) -> bool {
        false
    }

    #[test]
    fn the_first_matching_line_decides() {
        let file = HbaFile::parse(
            "# comment\n\
             local all all trust\n\
             host  app alice,bob 10.1.0.0/16 scram-sha-256  # inline comment\n\
             host  all all 10.0.0.0 255.0.0.0 reject\n\
             host  all all ::1/128 password\n",
        );
        assert!(file.errors.is_empty(), "{:?}", file.errors);
        let line = |c: Client| file.find(&c, &no_groups).map(|r| r.line);
        assert_eq!(line(client("local", "x", "y")), Some(2));
        assert_eq!(line(client("10.1.2.3", "app", "bob")), Some(3));
        assert_eq!(line(client("10.1.2.3", "app", "carol")), Some(4));
        assert_eq!(line(client("10.9.9.9", "other", "bob")), Some(4));
        assert_eq!(line(client("::1", "x", "y")), Some(5));
        assert_eq!(line(client("192.168.0.1", "x", "y")), None);
        // An IPv4 client seen over an IPv6 socket.
        assert_eq!(line(client("::ffff:10.1.0.7", "app", "alice")), Some(3));
    }

    #[test]
    fn keywords_quoted_are_names_and_groups_need_membership() {
        let file = HbaFile::parse(
            "host \"all\" +admins 0.0.0.0/0 trust\nhost sameuser all 0.0.0.0/0 md5\n",
        );
        assert!(file.errors.is_empty(), "{:?}", file.errors);
        let admins = |user: &str, role: &str| user == "ann" && role == "admins";
        let line = |c: Client| file.find(&c, &admins).map(|r| r.line);
        assert_eq!(line(client("1.2.3.4", "all", "ann")), Some(1));
        assert_eq!(line(client("1.2.3.4", "other", "ann")), None);
        assert_eq!(line(client("1.2.3.4", "joe", "joe")), Some(2));
    }

    #[test]
    fn unreadable_lines_are_errors_of_their_own() {
        let file = HbaFile::parse(
            "host all all example.com trust\n\
             local all all peer\n\
             host all all 10.0.0.0/33 trust\n\
             hostssl all all 0.0.0.0/0 cert clientcert=verify-full\n\
             bogus all all trust\n\
             host all\n",
        );
        assert_eq!(file.rules.len(), 1);
        let lines: Vec<usize> = file.errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![1, 2, 3, 5, 6]);
    }

    #[test]
    fn trust_beyond_loopback_is_found() {
        let safe = HbaFile::parse(&default_file(Method::Trust, Method::Trust));
        assert!(safe.errors.is_empty(), "{:?}", safe.errors);
        assert!(safe.open_to_the_network().is_empty());
        let open = HbaFile::parse("host all all 0.0.0.0/0 trust\nhost all all 127.0.0.1/8 trust\n");
        let lines: Vec<usize> = open.open_to_the_network().iter().map(|r| r.line).collect();
        assert_eq!(lines, vec![1]);
    }
}

/// The rules a server goes by: read from a file, reloaded on request (SIGHUP,
/// `pg_reload_conf()`), or, without a file, the defaults for local and loopback clients.
pub struct HbaRules {
    path: std::sync::RwLock<Option<std::path::PathBuf>>,
    current: std::sync::RwLock<std::sync::Arc<HbaFile>>,
}

impl Default for HbaRules {
    /// Local and loopback clients trusted, until `load` reads a file.
    fn default() -> Self {
        HbaRules {
            path: std::sync::RwLock::new(None),
            current: std::sync::RwLock::new(std::sync::Arc::new(HbaFile::parse(&default_file(
                Method::Trust,
                Method::Trust,
            )))),
        }
    }
}

impl HbaRules {
    /// Reads the rules from `path` from now on.
    pub fn load(&self, path: std::path::PathBuf) -> std::io::Result<std::sync::Arc<HbaFile>> {
        let file = std::sync::Arc::new(HbaFile::parse(&std::fs::read_to_string(&path)?));
        *self.path.write().expect("not poisoned") = Some(path);
        *self.current.write().expect("not poisoned") = file.clone();
        Ok(file)
    }

    /// Reads the file again; if it cannot be read, the rules in force stay.
    pub fn reload(&self) -> std::io::Result<std::sync::Arc<HbaFile>> {
        let path = self.path.read().expect("not poisoned").clone();
        match path {
            Some(path) => self.load(path),
            None => Ok(self.current()),
        }
    }

    pub fn current(&self) -> std::sync::Arc<HbaFile> {
        self.current.read().expect("not poisoned").clone()
    }

    pub fn path(&self) -> Option<std::path::PathBuf> {
        self.path.read().expect("not poisoned").clone()
    }
}
