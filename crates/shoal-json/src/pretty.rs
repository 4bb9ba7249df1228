//! `jsonb_pretty`: PostgreSQL's indented jsonb text (`JsonbToCStringIndent`). Every element and
//! key starts a new line indented four spaces per level; a container's closing bracket gets a
//! line of its own, even when the container is empty (`[` newline `]`); a container that is a
//! key's value opens on the key's line.

use crate::deep_stack;
use crate::error::JsonError;
use crate::escape::write_quoted;
use crate::jsonb_text::{parse_jsonb, write_scalar};
use crate::parse::{Node, Value};

const INDENT_SPACES: usize = 4;

/// `jsonb_pretty(jsonb)`.
pub fn jsonb_pretty(doc: &str) -> Result<String, JsonError> {
    deep_stack::run(&[doc], || {
        let root = parse_jsonb(doc)?;
        let mut out = String::with_capacity(doc.len() * 2);
        write_pretty(&root, 0, &mut out);
        Ok(out)
    })
}

fn write_pretty(node: &Node<'_>, level: usize, out: &mut String) {
    match &node.value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                new_line(level + 1, out);
                write_pretty(item, level + 1, out);
            }
            new_line(level, out);
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            for (i, (key, value)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                new_line(level + 1, out);
                write_quoted(out, key);
                out.push_str(": ");
                write_pretty(value, level + 1, out);
            }
            new_line(level, out);
            out.push('}');
        }
        scalar => write_scalar(scalar, out),
    }
}

fn new_line(level: usize, out: &mut String) {
    out.push('\n');
    out.extend(std::iter::repeat(' ').take(level * INDENT_SPACES));
}
