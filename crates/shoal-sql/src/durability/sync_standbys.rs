//! `synchronous_standby_names` as PostgreSQL writes it: `FIRST k (name, ...)`,
//! `ANY k (name, ...)`, `k (name, ...)` (FIRST), or a plain list (FIRST 1). Names are standbys'
//! application names (`nodeN` in a replication group; `*` is any), compared case-insensitively.
//!
//! In a replication group a commit already waits for a majority (Raft's rule); this setting
//! can only ask for more: a commit waits until `count` of the named standbys have it too (on
//! disk, or applied with `synchronous_commit = remote_apply`). FIRST is taken as ANY: any
//! `count` of the named standbys, not the first ones by priority.

/// A parsed `synchronous_standby_names`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncStandbys {
    /// How many of the named standbys must have a commit.
    pub count: usize,
    /// Lower-cased names; `*` matches every standby.
    pub names: Vec<String>,
}

impl SyncStandbys {
    /// Whether the standby with `application_name` counts.
    pub fn names_standby(&self, application_name: &str) -> bool {
        self.names
            .iter()
            .any(|n| n == "*" || n.eq_ignore_ascii_case(application_name))
    }
}

/// Parses the setting; `Ok(None)` for the empty value (no standby named). The error says what
/// is wrong, for the setting's error detail.
pub fn parse(value: &str) -> Result<Option<SyncStandbys>, String> {
    let text = value.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let (head, rest) = split_word(text);
    let (count_text, rest) =
        if head.eq_ignore_ascii_case("first") || head.eq_ignore_ascii_case("any") {
            split_word(rest.trim_start())
        } else {
            (head, rest)
        };
    let with_count = count_text.chars().all(|c| c.is_ascii_digit()) && !count_text.is_empty();
    if !with_count && count_text.len() != head.len() {
        return Err(format!("expected a number of standbys after \"{head}\""));
    }
    let (count, list) = if with_count {
        let count: usize = count_text
            .parse()
            .map_err(|_| format!("\"{count_text}\" is not a number of standbys"))?;
        if count == 0 {
            return Err("number of synchronous standbys (0) must be greater than zero".into());
        }
        let list = rest.trim();
        let inner = list
            .strip_prefix('(')
            .and_then(|l| l.strip_suffix(')'))
            .ok_or("expected a parenthesized list of standby names")?;
        (count, inner)
    } else {
        (1, text)
    };
    let names = parse_names(list)?;
    Ok(Some(SyncStandbys { count, names }))
}

/// The first word (up to a space or a parenthesis) and the rest.
fn split_word(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| c.is_whitespace() || c == '(')
        .unwrap_or(text.len());
    text.split_at(end)
}

fn parse_names(list: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    for item in list.split(',') {
        let item = item.trim();
        let name = if let Some(quoted) = item.strip_prefix('"') {
            quoted
                .strip_suffix('"')
                .ok_or_else(|| format!("unterminated quoted name {item}"))?
                .replace("\"\"", "\"")
        } else if item == "*"
            || (!item.is_empty()
                && item
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '$'))
        {
            item.to_lowercase()
        } else {
            return Err(format!("\"{item}\" is not a standby name"));
        };
        names.push(name);
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn postgres_forms_parse() {
        assert_eq!(parse("").unwrap(), None);
        assert_eq!(
            parse("ANY 2 (node2, node3, Node4)").unwrap(),
            Some(SyncStandbys {
                count: 2,
                names: names(&["node2", "node3", "node4"])
            })
        );
        assert_eq!(
            parse("FIRST 1 (*)").unwrap(),
            Some(SyncStandbys {
                count: 1,
                names: names(&["*"])
            })
        );
        assert_eq!(
            parse("2(a,b)").unwrap(),
            Some(SyncStandbys {
                count: 2,
                names: names(&["a", "b"])
            })
        );
        assert_eq!(
            parse("s1, \"S 2\"").unwrap(),
            Some(SyncStandbys {
                count: 1,
                names: names(&["s1", "S 2"])
            })
        );
        for bad in ["ANY (a)", "ANY 0 (a)", "FIRST 2 a, b", "a b", "ANY 1 ()"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let any = parse("ANY 1 (NODE2)").unwrap().unwrap();
        assert!(any.names_standby("node2"));
        assert!(!any.names_standby("node3"));
    }
}
