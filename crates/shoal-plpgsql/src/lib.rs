//! PL/pgSQL, the block language of PostgreSQL functions, procedures and DO blocks: its parser.
//!
//! A hand-written recursive-descent parser over sqlparser's tokens (the tokenizer that Shoal's
//! SQL parser uses, so strings, dollar quotes, comments and identifiers read the same). It
//! parses what is PL/pgSQL's own (blocks, declarations, control flow, RAISE, GET
//! DIAGNOSTICS, ...) and leaves expressions and embedded SQL statements as the text written,
//! cut at the same places PostgreSQL cuts them: a statement at the semicolon outside
//! parentheses, an expression at the keyword that ends it. Shoal's SQL layer parses those
//! texts, as PostgreSQL hands them to its SQL parser. PL/pgSQL's own `INTO` is taken out of
//! embedded statements here, since SQL's `SELECT ... INTO` means something else.
//!
//! Why not a crate: the one Rust crate that parses PL/pgSQL, `pg_query` (libpg_query), builds
//! about 200k lines of C with bindgen (libclang at build time), returns an experimental JSON
//! tree that still holds every expression as text, and produces invalid JSON for trigger
//! functions; the block grammar it would save is the small part of the work.

mod ast;
mod parser;
mod tokens;

pub use ast::*;
pub use parser::{parse_body, ParseError};
