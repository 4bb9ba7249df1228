//! Which columns of a relation a statement uses, for column privileges (`GRANT SELECT (a) ON
//! t`), read off the syntax tree. A column reference counts for a relation when it is
//! qualified with the relation's alias (or its name when it has none), or unqualified and
//! the relation has a column of that name; `*` and `alias.*` count every column. References
//! are gathered over the whole part of the statement given, so a name an inner query uses for
//! its own table also counts for an outer table with a column of that name: a role that holds
//! only column privileges may be refused a statement PostgreSQL would run, never allowed one
//! PostgreSQL refuses.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{self, Expr, Query, SelectItem, SetExpr, Visit, Visitor};

use crate::ddl::ident;

/// One column reference: `qualifier.name`, or `*` as the name for a wildcard.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnRef {
    pub qualifier: Option<String>,
    pub name: String,
}

const WILDCARD: &str = "*";

/// The column references in `node`, at any depth.
pub fn column_refs<V: Visit>(node: &V) -> Vec<ColumnRef> {
    let mut visitor = Refs(Vec::new());
    let _ = node.visit(&mut visitor);
    visitor.0
}

/// The column references of a select list or RETURNING list, wildcards included.
pub fn select_list_refs(items: &[SelectItem]) -> Vec<ColumnRef> {
    let mut refs = column_refs(&items.to_vec());
    refs.extend(wildcards(items));
    refs
}

/// Which of a relation's `columns` the references name, for the relation known in the
/// statement as `label` (its alias, or its name). `renamed`: the alias renames the columns
/// (`t AS x(c1, c2)`), so every column counts.
pub fn columns_named(
    refs: &[ColumnRef],
    label: &str,
    columns: &[String],
    renamed: bool,
) -> Vec<String> {
    let ours = |r: &&ColumnRef| r.qualifier.as_deref().is_none_or(|q| q == label);
    if renamed || refs.iter().filter(ours).any(|r| r.name == WILDCARD) {
        return columns.to_vec();
    }
    columns
        .iter()
        .filter(|c| refs.iter().filter(ours).any(|r| r.name == **c))
        .cloned()
        .collect()
}

struct Refs(Vec<ColumnRef>);

impl Visitor for Refs {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        match expr {
            Expr::Identifier(i) => self.0.push(ColumnRef {
                qualifier: None,
                name: ident(i),
            }),
            Expr::CompoundIdentifier(parts) if parts.len() >= 2 => self.0.push(ColumnRef {
                qualifier: Some(ident(&parts[parts.len() - 2])),
                name: ident(&parts[parts.len() - 1]),
            }),
            _ => {}
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        let mut bodies = vec![query.body.as_ref()];
        while let Some(body) = bodies.pop() {
            match body {
                SetExpr::Select(select) => self.0.extend(wildcards(&select.projection)),
                SetExpr::SetOperation { left, right, .. } => {
                    bodies.push(left);
                    bodies.push(right);
                }
                // Nested queries are visited on their own.
                _ => {}
            }
        }
        ControlFlow::Continue(())
    }
}

fn wildcards(items: &[SelectItem]) -> Vec<ColumnRef> {
    items
        .iter()
        .filter_map(|item| match item {
            SelectItem::Wildcard(_) => Some(ColumnRef {
                qualifier: None,
                name: WILDCARD.to_string(),
            }),
            SelectItem::QualifiedWildcard(
                ast::SelectItemQualifiedWildcardKind::ObjectName(name),
                _,
            ) => Some(ColumnRef {
                qualifier: name.0.last().and_then(|p| p.as_ident()).map(ident),
                name: WILDCARD.to_string(),
            }),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs_of(sql: &str) -> Vec<ColumnRef> {
        let stmt = crate::parse::parse_statements(sql).unwrap().remove(0);
        column_refs(&stmt)
    }

    #[test]
    fn references_count_for_the_relation_they_name() {
        let columns: Vec<String> = ["id", "a", "b"].iter().map(|s| s.to_string()).collect();
        let refs = refs_of("SELECT x.a, count(*) FROM t AS x JOIN u ON u.b = x.id");
        assert_eq!(columns_named(&refs, "x", &columns, false), ["id", "a"]);
        let refs = refs_of("SELECT count(*) FROM t");
        assert!(columns_named(&refs, "t", &columns, false).is_empty());
        let refs = refs_of("SELECT u.* FROM t, u WHERE B > 1");
        assert_eq!(columns_named(&refs, "t", &columns, false), ["b"]);
        assert_eq!(columns_named(&refs, "u", &columns, false), columns);
        let refs = refs_of("SELECT 1 FROM t UNION SELECT * FROM t");
        assert_eq!(columns_named(&refs, "t", &columns, false), columns);
        assert_eq!(columns_named(&[], "t", &columns, true), columns);
    }
}
