//! Writing a string as a json string literal, as PostgreSQL's `escape_json` does: the quote,
//! backslash and the five named control characters get their short escapes, the other control
//! characters `\u00XX` in lower-case hex, and everything else (all non-ASCII included) is
//! written as is.

/// Appends `text` to `out` as a quoted json string.
pub(crate) fn write_quoted(out: &mut String, text: &str) {
    out.reserve(text.len() + 2);
    out.push('"');
    for ch in text.chars() {
        match ch {
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            ch if (ch as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", ch as u32)),
            ch => out.push(ch),
        }
    }
    out.push('"');
}

/// `text` as a quoted json string (PostgreSQL's `escape_json`, what `to_json(text)` gives).
pub fn quote_json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    write_quoted(&mut out, text);
    out
}
