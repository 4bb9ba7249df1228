//! PostgreSQL's semantic checks on a parsed query that DataFusion does not make, or makes with
//! another error: a table name used twice in one FROM, a table referred to by its name after
//! it was given an alias, window functions in WHERE/GROUP BY/HAVING/JOIN ON, OVER after a plain
//! function, duplicate WITH names and recursive CTEs that refer to themselves too early. They
//! run before planning so the client sees PostgreSQL's message and SQLSTATE.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self, visit_relations, Expr, GroupByExpr, JoinConstraint, JoinOperator, ObjectName,
    ObjectNamePart, Query, Select, SelectItem, SetExpr, SetOperator, TableFactor, TableWithJoins,
    Visit, Visitor, With,
};

use crate::error::{code, SqlError, SqlResult};

/// Runs the checks on every query in `stmt`. `is_window_or_aggregate` says whether a function
/// name may take an OVER clause.
pub fn check_statement(
    stmt: &ast::Statement,
    is_window_or_aggregate: &dyn Fn(&str) -> bool,
) -> SqlResult<()> {
    let mut checker = Checker {
        is_window_or_aggregate,
        scopes: Vec::new(),
    };
    match stmt {
        ast::Statement::Query(q) => checker.check_query(q),
        _ => Ok(()),
    }
}

/// One FROM item as a column qualifier: its reference name, and the table's own name when an
/// alias hides it.
struct FromName {
    refname: String,
    hidden_table: Option<String>,
    qualified: String,
}

struct Checker<'a> {
    is_window_or_aggregate: &'a dyn Fn(&str) -> bool,
    /// The FROM names of the enclosing SELECTs, innermost last.
    scopes: Vec<Vec<FromName>>,
}

#[derive(Clone, Copy, PartialEq)]
enum Clause {
    Where,
    GroupBy,
    Having,
    JoinOn,
    Other,
}

impl Clause {
    fn window_forbidden(self) -> Option<&'static str> {
        match self {
            Clause::Where => Some("WHERE"),
            Clause::GroupBy => Some("GROUP BY"),
            Clause::Having => Some("HAVING"),
            Clause::JoinOn => Some("JOIN conditions"),
            Clause::Other => None,
        }
    }
}

fn normalize(ident: &ast::Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    }
}

fn last_name_part(name: &ObjectName) -> String {
    match name.0.last() {
        Some(ObjectNamePart::Identifier(i)) => normalize(i),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

impl Checker<'_> {
    fn check_query(&mut self, q: &Query) -> SqlResult<()> {
        if let Some(with) = &q.with {
            check_with(with)?;
            for cte in &with.cte_tables {
                self.check_query(&cte.query)?;
            }
        }
        self.check_set_expr(&q.body)
    }

    fn check_set_expr(&mut self, body: &SetExpr) -> SqlResult<()> {
        match body {
            SetExpr::Select(s) => self.check_select(s),
            SetExpr::Query(q) => self.check_query(q),
            SetExpr::SetOperation { left, right, .. } => {
                self.check_set_expr(left)?;
                self.check_set_expr(right)
            }
            _ => Ok(()),
        }
    }

    fn check_select(&mut self, s: &Select) -> SqlResult<()> {
        let mut names = Vec::new();
        for twj in &s.from {
            self.collect_from(twj, &mut names)?;
        }
        self.scopes.push(names);
        let result = self.check_select_exprs(s);
        self.scopes.pop();
        result
    }

    fn check_select_exprs(&mut self, s: &Select) -> SqlResult<()> {
        for item in &s.projection {
            if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
                self.check_expr(e, Clause::Other)?;
            }
        }
        if let Some(e) = &s.selection {
            self.check_expr(e, Clause::Where)?;
        }
        if let GroupByExpr::Expressions(exprs, _) = &s.group_by {
            for e in exprs {
                self.check_expr(e, Clause::GroupBy)?;
            }
        }
        if let Some(e) = &s.having {
            self.check_expr(e, Clause::Having)?;
        }
        for twj in &s.from {
            for join in &twj.joins {
                if let Some(JoinConstraint::On(e)) = join_constraint(&join.join_operator) {
                    self.check_expr(e, Clause::JoinOn)?;
                }
            }
        }
        Ok(())
    }

    /// Collects the reference names of a FROM item and its joins, rejecting duplicates, and
    /// checks the subqueries it contains.
    fn collect_from(&mut self, twj: &TableWithJoins, names: &mut Vec<FromName>) -> SqlResult<()> {
        self.collect_factor(&twj.relation, names)?;
        for join in &twj.joins {
            self.collect_factor(&join.relation, names)?;
        }
        Ok(())
    }

    fn collect_factor(&mut self, factor: &TableFactor, names: &mut Vec<FromName>) -> SqlResult<()> {
        let name = match factor {
            TableFactor::Table { name, alias, .. } => {
                check_not_reserved(name)?;
                FromName {
                    refname: alias
                        .as_ref()
                        .map(|a| normalize(&a.name))
                        .unwrap_or_else(|| last_name_part(name)),
                    hidden_table: alias.as_ref().map(|_| last_name_part(name)),
                    qualified: if alias.is_some() {
                        String::new()
                    } else {
                        name.to_string().to_lowercase()
                    },
                }
            }
            TableFactor::Derived {
                subquery, alias, ..
            } => {
                self.check_query(subquery)?;
                let Some(alias) = alias else { return Ok(()) };
                FromName {
                    refname: normalize(&alias.name),
                    hidden_table: None,
                    qualified: String::new(),
                }
            }
            TableFactor::NestedJoin {
                table_with_joins,
                alias: None,
            } => return self.collect_from(table_with_joins, names),
            _ => return Ok(()),
        };
        let duplicate = names.iter().any(|n| {
            n.refname == name.refname
                && (n.qualified.is_empty()
                    || name.qualified.is_empty()
                    || n.qualified == name.qualified)
        });
        if duplicate {
            return Err(SqlError::new(
                code::DUPLICATE_ALIAS,
                format!("table name \"{}\" specified more than once", name.refname),
            ));
        }
        names.push(name);
        Ok(())
    }

    fn check_expr(&mut self, e: &Expr, clause: Clause) -> SqlResult<()> {
        let mut walker = ExprWalker {
            checker: self,
            clause,
            depth: 0,
            error: None,
        };
        let _ = e.visit(&mut walker);
        walker.error.map_or(Ok(()), Err)
    }

    fn visible(&self, qualifier: &str) -> bool {
        self.scopes.iter().flatten().any(|n| n.refname == qualifier)
    }

    /// `qualifier.column` where the qualifier is a table's own name that an alias replaced.
    fn check_qualifier(&self, qualifier: &str) -> SqlResult<()> {
        if self.visible(qualifier) {
            return Ok(());
        }
        let aliased = self
            .scopes
            .iter()
            .rev()
            .flatten()
            .find(|n| n.hidden_table.as_deref() == Some(qualifier));
        match aliased {
            Some(n) => Err(SqlError::new(
                code::UNDEFINED_TABLE,
                format!("invalid reference to FROM-clause entry for table \"{qualifier}\""),
            )
            .with_hint(format!(
                "Perhaps you meant to reference the table alias \"{}\".",
                n.refname
            ))),
            None => Ok(()),
        }
    }
}

fn join_constraint(op: &JoinOperator) -> Option<&JoinConstraint> {
    match op {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c) => Some(c),
        _ => None,
    }
}

/// Duplicate CTE names, and recursive CTEs whose first UNION branch refers to the CTE itself.
fn check_with(with: &With) -> SqlResult<()> {
    let mut seen: Vec<String> = Vec::new();
    for cte in &with.cte_tables {
        let name = normalize(&cte.alias.name);
        if seen.contains(&name) {
            return Err(SqlError::new(
                code::DUPLICATE_ALIAS,
                format!("WITH query name \"{name}\" specified more than once"),
            ));
        }
        if with.recursive {
            if let SetExpr::SetOperation {
                op: SetOperator::Union,
                left,
                ..
            } = cte.query.body.as_ref()
            {
                let refers = visit_relations(left.as_ref(), |rel| {
                    if rel.0.len() == 1 && last_name_part(rel) == name {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                });
                if refers.is_break() {
                    return Err(SqlError::new(
                        code::INVALID_RECURSION,
                        format!(
                            "recursive reference to query \"{name}\" must not appear within its non-recursive term"
                        ),
                    ));
                }
            }
        }
        seen.push(name);
    }
    Ok(())
}

/// Walks one expression of a SELECT: subqueries are checked with this SELECT's names in scope,
/// everything else is checked at this level.
struct ExprWalker<'c, 'a> {
    checker: &'c mut Checker<'a>,
    clause: Clause,
    depth: usize,
    error: Option<SqlError>,
}

impl Visitor for ExprWalker<'_, '_> {
    type Break = ();

    fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
        if self.depth == 0 {
            if let Err(e) = self.checker.check_query(q) {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
        }
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _q: &Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
        if self.depth > 0 {
            return ControlFlow::Continue(());
        }
        let result = match e {
            Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
                self.checker.check_qualifier(&normalize(&parts[0]))
            }
            Expr::Function(f) if f.over.is_some() => self.check_window_call(f),
            Expr::Subquery(q) => check_scalar_subquery_width(q),
            _ => Ok(()),
        };
        match result {
            Ok(()) => ControlFlow::Continue(()),
            Err(err) => {
                self.error = Some(err);
                ControlFlow::Break(())
            }
        }
    }
}

impl ExprWalker<'_, '_> {
    fn check_window_call(&self, f: &ast::Function) -> SqlResult<()> {
        if let Some(clause) = self.clause.window_forbidden() {
            return Err(SqlError::new(
                code::WINDOWING_ERROR,
                format!("window functions are not allowed in {clause}"),
            ));
        }
        let name = last_name_part(&f.name);
        if !(self.checker.is_window_or_aggregate)(&name) {
            return Err(SqlError::new(
                code::WRONG_OBJECT_TYPE,
                format!(
                    "OVER specified, but {name} is not a window function nor an aggregate function"
                ),
            ));
        }
        Ok(())
    }
}

/// A scalar subquery yields one column. (DataFusion says so too, but with the message
/// PostgreSQL uses for IN subqueries.) Widths hidden behind `*` are left to DataFusion.
fn check_scalar_subquery_width(q: &Query) -> SqlResult<()> {
    let SetExpr::Select(select) = q.body.as_ref() else {
        return Ok(());
    };
    let wildcard = select.projection.iter().any(|item| {
        matches!(
            item,
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
        )
    });
    if select.projection.len() > 1 && !wildcard {
        return Err(SqlError::syntax("subquery must return only one column"));
    }
    Ok(())
}

/// PostgreSQL's reserved key words, which cannot name a table unless quoted. sqlparser
/// accepts most of them as names, so `SELECT FROM FROM t` would otherwise read a table called
/// "from".
pub const RESERVED_KEYWORDS: &[&str] = &[
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "both",
    "case",
    "cast",
    "check",
    "collate",
    "column",
    "constraint",
    "create",
    "current_catalog",
    "current_date",
    "current_role",
    "current_time",
    "current_timestamp",
    "current_user",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "false",
    "fetch",
    "for",
    "foreign",
    "from",
    "grant",
    "group",
    "having",
    "in",
    "initially",
    "intersect",
    "into",
    "lateral",
    "leading",
    "limit",
    "localtime",
    "localtimestamp",
    "not",
    "null",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "placing",
    "primary",
    "references",
    "returning",
    "select",
    "session_user",
    "some",
    "symmetric",
    "table",
    "then",
    "to",
    "trailing",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "variadic",
    "when",
    "where",
    "window",
    "with",
];

/// PostgreSQL's key words that may name a column or a function but not both (`numeric`,
/// `left`, `time`): quote_ident and the names PostgreSQL prints quote them, as they do the
/// reserved ones.
pub const NAME_KEYWORDS: &[&str] = &[
    "authorization",
    "between",
    "bigint",
    "binary",
    "bit",
    "boolean",
    "char",
    "character",
    "coalesce",
    "collation",
    "concurrently",
    "cross",
    "current_schema",
    "dec",
    "decimal",
    "exists",
    "extract",
    "float",
    "freeze",
    "full",
    "greatest",
    "grouping",
    "ilike",
    "inner",
    "inout",
    "int",
    "integer",
    "interval",
    "is",
    "isnull",
    "join",
    "least",
    "left",
    "like",
    "national",
    "natural",
    "nchar",
    "none",
    "normalize",
    "notnull",
    "nullif",
    "numeric",
    "out",
    "outer",
    "overlaps",
    "overlay",
    "position",
    "precision",
    "real",
    "right",
    "row",
    "setof",
    "similar",
    "smallint",
    "substring",
    "tablesample",
    "time",
    "timestamp",
    "treat",
    "trim",
    "values",
    "varchar",
    "verbose",
    "xmlattributes",
    "xmlconcat",
    "xmlelement",
    "xmlexists",
    "xmlforest",
    "xmlnamespaces",
    "xmlparse",
    "xmlpi",
    "xmlroot",
    "xmlserialize",
    "xmltable",
];

/// Whether quote_ident quotes `word` for being a key word.
pub fn is_quoted_keyword(word: &str) -> bool {
    RESERVED_KEYWORDS.contains(&word) || NAME_KEYWORDS.contains(&word)
}

/// An unquoted reserved word used as a table name is a syntax error at that word.
fn check_not_reserved(name: &ObjectName) -> SqlResult<()> {
    for part in &name.0 {
        if let ObjectNamePart::Identifier(ident) = part {
            let reserved = RESERVED_KEYWORDS.contains(&ident.value.to_lowercase().as_str());
            if ident.quote_style.is_none() && reserved {
                return Err(SqlError::syntax(format!(
                    "syntax error at or near \"{}\"",
                    ident.value
                )));
            }
        }
    }
    Ok(())
}

/// Calls in `stmt` to functions `exists` does not know, with their argument types when every
/// argument is a literal or a cast (PostgreSQL names them in "function f(integer) does not
/// exist"; a string literal is "unknown"). Calls with other arguments are left out.
pub fn unknown_function_signatures(
    stmt: &ast::Statement,
    exists: &dyn Fn(&str) -> bool,
) -> Vec<String> {
    let mut found = Vec::new();
    let _ = ast::visit_expressions(stmt, |e| {
        if let Expr::Function(f) = e {
            let name = last_name_part(&f.name);
            if f.name.0.len() == 1 && !exists(&name) {
                if let Some(types) = literal_argument_types(f) {
                    found.push(format!("{name}({})", types.join(", ")));
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

fn literal_argument_types(f: &ast::Function) -> Option<Vec<String>> {
    let ast::FunctionArguments::List(list) = &f.args else {
        return matches!(f.args, ast::FunctionArguments::None).then(Vec::new);
    };
    list.args
        .iter()
        .map(|arg| match arg {
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => literal_type(e),
            _ => None,
        })
        .collect()
}

fn literal_type(e: &Expr) -> Option<String> {
    match e {
        Expr::Value(v) => Some(match &v.value {
            ast::Value::Number(n, _) if n.parse::<i32>().is_ok() => "integer".into(),
            ast::Value::Number(n, _) if n.parse::<i64>().is_ok() => "bigint".into(),
            ast::Value::Number(..) => "numeric".into(),
            ast::Value::Boolean(_) => "boolean".into(),
            ast::Value::SingleQuotedString(_) | ast::Value::Null => "unknown".into(),
            _ => return None,
        }),
        Expr::Cast { data_type, .. } => {
            let t = crate::types::from_sql_type(data_type).ok()?;
            Some(crate::types::format_type(&t))
        }
        Expr::Nested(inner) => literal_type(inner),
        _ => None,
    }
}
