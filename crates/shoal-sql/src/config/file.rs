//! postgresql.conf's format, as PostgreSQL reads it: one `name = value` per line (the `=` may
//! be left out), `#` starts a comment, a value is a bare word or number (`5s`, `on`) or a
//! single-quoted string in which `''` and `\'` stand for a quote. Names are case-insensitive.

/// One setting a file gives, with the line it is on (from 1).
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub name: String,
    pub value: String,
    pub line: u32,
}

/// The settings of a file's text, and an error for each line that does not read.
pub fn parse(text: &str) -> (Vec<Entry>, Vec<(u32, String)>) {
    let mut entries = Vec::new();
    let mut errors = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = n as u32 + 1;
        match parse_line(raw) {
            Ok(Some((name, value))) => entries.push(Entry { name, value, line }),
            Ok(None) => {}
            Err(e) => errors.push((line, e)),
        }
    }
    (entries, errors)
}

/// A line's (name, value), None for a blank or comment line.
fn parse_line(raw: &str) -> Result<Option<(String, String)>, String> {
    let line = raw.trim_start();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(line.len());
    if name_end == 0 {
        return Err(format!("syntax error near \"{}\"", line.trim_end()));
    }
    let name = line[..name_end].to_ascii_lowercase();
    let mut rest = line[name_end..].trim_start();
    if let Some(after) = rest.strip_prefix('=') {
        rest = after.trim_start();
    }
    let (value, after) = if let Some(quoted) = rest.strip_prefix('\'') {
        let mut value = String::new();
        let mut chars = quoted.char_indices().peekable();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\'' if chars.peek().map(|(_, c)| *c) == Some('\'') => {
                    chars.next();
                    value.push('\'');
                }
                '\'' => {
                    end = Some(i + 1);
                    break;
                }
                '\\' => match chars.next() {
                    Some((_, c)) => value.push(c),
                    None => break,
                },
                c => value.push(c),
            }
        }
        let Some(end) = end else {
            return Err(format!(
                "unterminated quoted string in \"{}\"",
                line.trim_end()
            ));
        };
        (value, &quoted[end..])
    } else {
        let end = rest
            .find(|c: char| c.is_whitespace() || c == '#')
            .unwrap_or(rest.len());
        if end == 0 {
            return Err(format!("missing value for \"{name}\""));
        }
        (rest[..end].to_string(), &rest[end..])
    };
    let after = after.trim_start();
    if !after.is_empty() && !after.starts_with('#') {
        return Err(format!("syntax error near \"{}\"", after.trim_end()));
    }
    Ok(Some((name, value)))
}

/// A value as a line of postgresql.auto.conf writes it: always quoted, as ALTER SYSTEM does.
pub fn quoted(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_as_postgresql_reads_them() {
        let text = "# a comment\n\
                    \n\
                    statement_timeout = 5s   # trailing comment\n\
                    search_path='app, public'\n\
                    Application_Name 'it''s'\n\
                    lock_timeout = \n\
                    timezone = 'Europe/Paris\n\
                    work_mem = 4MB extra\n";
        let (entries, errors) = parse(text);
        let got: Vec<(&str, &str, u32)> = entries
            .iter()
            .map(|e| (e.name.as_str(), e.value.as_str(), e.line))
            .collect();
        assert_eq!(
            got,
            [
                ("statement_timeout", "5s", 3),
                ("search_path", "app, public", 4),
                ("application_name", "it's", 5),
            ]
        );
        let lines: Vec<u32> = errors.iter().map(|(l, _)| *l).collect();
        assert_eq!(lines, [6, 7, 8]);
        let (again, _) = parse(&format!("a.b = {}\n", quoted("x'y")));
        assert_eq!(again[0].value, "x'y");
    }
}
