//! Rewrites a parsed statement into something DataFusion can plan with PostgreSQL's meaning:
//! views become subqueries, `::regclass`-style casts become catalog lookups, `pg_catalog.`
//! function prefixes and COLLATE clauses are dropped, `OPERATOR(pg_catalog.~)` becomes the
//! plain operator, and PostgreSQL-only type names map to ones DataFusion knows.
//!
//! The visitor here walks the statement; what it does to each kind of node lives beside it:
//! casts and type names (`types`), function calls (`calls`), functions in FROM
//! (`from_functions`), a query's shape (`query_shapes`) and VALUES lists with subqueries
//! (`values_subqueries`).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self, BinaryOperator, CastKind, DataType, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArgumentList, FunctionArguments, Ident, ObjectName, ObjectNamePart, TableAlias,
    TableFactor, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use shoal_storage::catalog::RelationKind;

use crate::error::{SqlError, SqlResult};
use crate::query::pg_literals;
use crate::query::scope::PlanScope;

mod calls;
mod from_functions;
mod query_shapes;
mod types;
mod values_subqueries;

pub(crate) use calls::like_pattern_with_backslash;
use calls::{array_subquery, negate_power_base, sibling_typed_literals, synonym_call};
use from_functions::{integer_series, name_scalar_function_column, unnest_with_ordinality};
pub(crate) use query_shapes::fetch_to_limit;
use query_shapes::{
    distinct_on_positions, name_quantified_subquery_column, quoted_limit_as_bigint,
};
use types::{explicit_length_limit, is_text_type, normalize_type_name, numeric_cast};
use values_subqueries::values_with_subqueries_as_selects;

/// Maximum depth of views referring to views, so a cycle cannot loop forever.
const VIEW_NESTING_MAX: usize = 32;

pub fn rewrite_statement(stmt: &mut ast::Statement, scope: &PlanScope) -> SqlResult<()> {
    let mut inlined_routine = false;
    for _ in 0..VIEW_NESTING_MAX {
        let mut v = Rewriter {
            scope,
            error: None,
            expanded_view: false,
            inlined_routine: false,
            query_depth: 0,
        };
        let _ = stmt.visit(&mut v);
        if let Some(e) = v.error {
            return Err(e);
        }
        if !v.expanded_view {
            return Ok(());
        }
        inlined_routine |= v.inlined_routine;
    }
    if inlined_routine {
        // A function whose body calls itself, directly or not, would be inlined without end;
        // PostgreSQL runs such a call until its stack depth limit.
        return Err(SqlError::new(
            crate::error::code::STATEMENT_TOO_COMPLEX,
            "stack depth limit exceeded",
        )
        .with_hint("A SQL function calls itself without end."));
    }
    Err(SqlError::new(
        crate::error::code::PROGRAM_LIMIT_EXCEEDED,
        "views nested too deeply",
    ))
}

struct Rewriter<'a> {
    scope: &'a PlanScope,
    error: Option<SqlError>,
    expanded_view: bool,
    /// A call of a user's SQL function was replaced by its body (see `routines::inline`).
    inlined_routine: bool,
    /// Queries entered and not yet left: 0 again after the statement's outermost query.
    query_depth: usize,
}

pub fn function_call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(Function {
        name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new(name))]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|e| FunctionArg::Unnamed(FunctionArgExpr::Expr(e)))
                .collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

pub fn object_name_parts(name: &ObjectName) -> Vec<String> {
    name.0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => {
                if i.quote_style.is_some() {
                    i.value.clone()
                } else {
                    i.value.to_lowercase()
                }
            }
            other => other.to_string(),
        })
        .collect()
}

/// `x op ANY|ALL (array)` as a call of `array_compare`'s function, with PostgreSQL's NULL
/// rules; an untyped string literal on the right is read as an array literal.
fn array_comparison(expr: &mut Expr) -> SqlResult<()> {
    let (left, op, right, all) = match expr {
        Expr::AnyOp {
            left,
            compare_op,
            right,
            ..
        } => (left, compare_op, right, false),
        Expr::AllOp {
            left,
            compare_op,
            right,
        } => (left, compare_op, right, true),
        _ => return Ok(()),
    };
    let Some(function) = crate::query::array_compare::function_name(&op.to_string(), all) else {
        return Ok(());
    };
    let array = match string_literal_mut(right) {
        Some(text) => crate::query::array_literal::untyped_constructor(text)?,
        None => (**right).clone(),
    };
    *expr = function_call(&function, vec![(**left).clone(), array]);
    Ok(())
}

fn custom_type_name(t: &DataType) -> Option<String> {
    match t {
        DataType::Custom(name, _) => object_name_parts(name).last().cloned(),
        DataType::Regclass => Some("regclass".into()),
        _ => None,
    }
}

/// A call that must run its routine's body (see `routines::call`) and is still in the
/// statement when it is planned: its arguments vary from row to row.
fn refuse_per_row_body(call: &crate::routines::ResolvedCall) -> SqlResult<()> {
    if !crate::routines::call::runs_body(&call.routine) {
        return Ok(());
    }
    Err(SqlError::unsupported(format!(
        "calling {} function {}() for each row other than as a whole item of a query's select \
         list (SELECT f(x) FROM t): here its arguments vary from row to row",
        match call.routine.language.as_str() {
            "sql" => "the multi-statement SQL",
            _ => "the PL/pgSQL",
        },
        call.routine.name,
    )))
}

impl Rewriter<'_> {
    /// A call of a user's function, resolved: None when `name` is no user function in reach.
    fn routine_call(
        &self,
        name: &ObjectName,
        args: &[FunctionArg],
    ) -> SqlResult<Option<crate::routines::ResolvedCall>> {
        let catalog = self.scope.engine.catalog.read();
        if catalog.routines.is_empty() {
            return Ok(None);
        }
        crate::routines::resolve_call(
            &catalog,
            &self.scope.lookup_schemas(),
            &object_name_parts(name),
            args,
        )
    }

    /// The body a call of a user's SQL function becomes (`routines::inline`).
    fn inline_routine_call(&mut self, f: &Function) -> SqlResult<Option<Expr>> {
        if f.over.is_some() || f.filter.is_some() {
            return Ok(None);
        }
        let args = match &f.args {
            FunctionArguments::List(list) => list.args.as_slice(),
            FunctionArguments::None => &[],
            FunctionArguments::Subquery(_) => return Ok(None),
        };
        let Some(call) = self.routine_call(&f.name, args)? else {
            return Ok(None);
        };
        refuse_per_row_body(&call)?;
        crate::routines::check_execute(self.scope, &call.routine)?;
        self.expanded_view = true;
        self.inlined_routine = true;
        crate::routines::inline::call_expression(self.scope, &call).map(Some)
    }

    /// The derived table a call of a user's SQL function in FROM becomes.
    fn inline_routine_in_from(&mut self, factor: &TableFactor) -> SqlResult<Option<TableFactor>> {
        let TableFactor::Table {
            name,
            args: Some(args),
            alias,
            ..
        } = factor
        else {
            return Ok(None);
        };
        let Some(call) = self.routine_call(name, &args.args)? else {
            return Ok(None);
        };
        refuse_per_row_body(&call)?;
        crate::routines::check_execute(self.scope, &call.routine)?;
        self.expanded_view = true;
        self.inlined_routine = true;
        crate::routines::inline::call_in_from(self.scope, &call, alias.clone()).map(Some)
    }
}

impl VisitorMut for Rewriter<'_> {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        match self.inline_routine_in_from(factor) {
            Ok(Some(derived)) => {
                *factor = derived;
                return ControlFlow::Continue(());
            }
            Ok(None) => {}
            Err(e) => {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
        }
        // `pg_catalog.pg_get_keywords()`: table functions are registered by their bare names.
        if let TableFactor::Table {
            name,
            args: Some(_),
            ..
        } = factor
        {
            if let [schema, function] = object_name_parts(name).as_slice() {
                if schema == "pg_catalog" {
                    *name = ObjectName::from(vec![Ident::new(function.clone())]);
                }
            }
        }
        unnest_with_ordinality(factor);
        name_scalar_function_column(factor);
        integer_series(factor);
        let TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } = factor
        else {
            return ControlFlow::Continue(());
        };
        let parts = object_name_parts(name);
        let (schema, rel) = match parts.as_slice() {
            [rel] => (None, rel.clone()),
            [schema, rel] => (Some(schema.clone()), rel.clone()),
            _ => return ControlFlow::Continue(()),
        };
        let Some((_, RelationKind::View, oid)) =
            self.scope.resolve_relation(schema.as_deref(), &rel)
        else {
            return ControlFlow::Continue(());
        };
        let Some(view) = self.scope.engine.catalog.read().views.get(&oid).cloned() else {
            return ControlFlow::Continue(());
        };
        let query = match Parser::new(&PostgreSqlDialect {})
            .try_with_sql(&view.query_sql)
            .and_then(|mut p| p.parse_query())
        {
            Ok(q) => q,
            Err(e) => {
                self.error = Some(SqlError::internal(format!(
                    "stored view \"{rel}\" does not parse: {e}"
                )));
                return ControlFlow::Break(());
            }
        };
        let view_columns: Vec<ast::TableAliasColumnDef> = view
            .column_names
            .iter()
            .map(|c| ast::TableAliasColumnDef::from_name(c.clone()))
            .collect();
        // An alias without a column list keeps the view's column names (`FROM v AS s`).
        let alias = match alias.clone() {
            Some(mut a) => {
                if a.columns.is_empty() {
                    a.columns = view_columns;
                }
                a
            }
            None => TableAlias {
                explicit: true,
                name: Ident::new(rel.clone()),
                columns: view_columns,
                at: None,
            },
        };
        *factor = TableFactor::Derived {
            lateral: false,
            subquery: query,
            alias: Some(alias),
            sample: None,
        };
        self.expanded_view = true;
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &mut ast::Query) -> ControlFlow<()> {
        // Names come from the expressions as written, before the rewrites below change them.
        crate::query::column_names::name_columns(&mut query.body);
        crate::query::lateral_srf::rewrite(query);
        self.query_depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, query: &mut ast::Query) -> ControlFlow<()> {
        if let ast::SetExpr::Values(values) = query.body.as_mut() {
            crate::query::values_types::numeric_values_columns(values);
            crate::query::values_types::integer_values(values);
            if let Some(selects) = values_with_subqueries_as_selects(values) {
                *query.body = selects;
            }
        }
        fetch_to_limit(query);
        quoted_limit_as_bigint(query);
        crate::query::select_srf::expand_in_select_list(query);
        distinct_on_positions(query);
        crate::query::natural_join::natural_to_using(query, self.scope);
        crate::query::join_using::merge_using_columns(query);
        if let Err(e) = crate::query::count_row::count_present_rows(query, self.scope) {
            self.error = Some(e);
            return ControlFlow::Break(());
        }
        self.query_depth -= 1;
        if self.query_depth == 0 {
            print_object_names(query);
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        crate::query::bit_casts::rewrite(expr);
        if let Expr::BinaryOp { left, op, right } = expr {
            match crate::query::row_compare::expand(left, op, right) {
                Some(Ok(expanded)) => *expr = Expr::Nested(Box::new(expanded)),
                Some(Err(e)) => self.error = Some(e),
                None => {}
            }
        }
        if let Some(expanded) = crate::query::row_compare::expand_in_list(expr) {
            match expanded {
                Ok(expanded) => *expr = Expr::Nested(Box::new(expanded)),
                Err(e) => self.error = Some(e),
            }
        }
        match expr {
            Expr::Value(v) => {
                if let ast::Value::Number(digits, _) = &mut v.value {
                    if let Some(plain) = pg_literals::without_exponent(digits) {
                        // A literal with an exponent is a numeric even when it is whole
                        // (`1e3`), where DataFusion would read `1000` as an integer.
                        if !plain.contains('.') {
                            let text = Expr::value(ast::Value::SingleQuotedString(plain));
                            *expr = function_call("pg_numeric", vec![text]);
                            return ControlFlow::Continue(());
                        }
                        *digits = plain;
                    }
                    // DataFusion reads a number into at most 38 digits; PostgreSQL's numeric
                    // holds more.
                    if digits.len() > LITERAL_DIGITS_MAX {
                        let text = Expr::value(ast::Value::SingleQuotedString(digits.clone()));
                        *expr = function_call("pg_numeric", vec![text]);
                    }
                }
            }
            // LIKE ... ESCAPE 'c': DataFusion knows only the backslash, so a literal pattern is
            // rewritten with backslashes (a backslash that is no escape becomes `\\`).
            Expr::Like {
                pattern,
                escape_char,
                ..
            }
            | Expr::ILike {
                pattern,
                escape_char,
                ..
            } => {
                let escape = escape_char.as_ref().and_then(|v| match &v.value {
                    ast::Value::SingleQuotedString(e) => Some(e.clone()),
                    _ => None,
                });
                if let Some(escape) = escape.filter(|e| e != "\\") {
                    match string_literal_mut(pattern) {
                        Some(text) => match like_pattern_with_backslash(text, &escape) {
                            Ok(rewritten) => {
                                *text = rewritten;
                                *escape_char = None;
                            }
                            Err(e) => self.error = Some(e),
                        },
                        // A computed pattern is rewritten when it is known.
                        None => {
                            let escape = Expr::value(ast::Value::SingleQuotedString(escape));
                            **pattern =
                                function_call("pg_like_escape", vec![(**pattern).clone(), escape]);
                            *escape_char = None;
                        }
                    }
                }
            }
            Expr::SimilarTo {
                negated,
                expr: subject,
                pattern,
                escape_char,
            } => match pg_literals::similar_to_regex(pattern, escape_char.as_ref()) {
                Ok(Some(regex)) => {
                    *expr = Expr::BinaryOp {
                        left: subject.clone(),
                        op: match negated {
                            true => BinaryOperator::PGRegexNotMatch,
                            false => BinaryOperator::PGRegexMatch,
                        },
                        right: Box::new(Expr::value(ast::Value::SingleQuotedString(regex))),
                    }
                }
                Ok(None) => {}
                Err(e) => self.error = Some(e),
            },
            Expr::TypedString(ts) => {
                let literal = Expr::Value(ts.value.clone());
                match numeric_cast(&literal, &ts.data_type) {
                    Ok(Some(call)) => *expr = call,
                    Ok(None) => {}
                    Err(e) => self.error = Some(e),
                }
            }
            Expr::AnyOp { right, .. } | Expr::AllOp { right, .. } => {
                if let Expr::Subquery(q) = right.as_mut() {
                    name_quantified_subquery_column(q);
                } else if let Err(e) = array_comparison(expr) {
                    self.error = Some(e);
                }
            }
            Expr::Cast {
                kind: CastKind::DoubleColon | CastKind::Cast,
                expr: inner,
                data_type,
                ..
            } => {
                normalize_type_name(data_type);
                // A user-defined enum: enum_in checks the label and marks the value's type.
                let search_path = self.scope.search_path.lock().clone();
                let user_type = crate::types::lookup_user_type(
                    data_type,
                    &self.scope.engine.catalog.read(),
                    &search_path,
                );
                if let Some(def) = user_type {
                    *expr = function_call(
                        crate::query::value_order::ENUM_IN,
                        vec![
                            cast_text(inner),
                            Expr::value(ast::Value::Number(def.oid.to_string(), false)),
                        ],
                    );
                    return ControlFlow::Continue(());
                }
                match numeric_cast(inner, data_type) {
                    Ok(Some(call)) => {
                        *expr = call;
                        return ControlFlow::Continue(());
                    }
                    Ok(None) => {}
                    Err(e) => {
                        self.error = Some(e);
                        return ControlFlow::Break(());
                    }
                }
                // json and jsonb are text to DataFusion; the cast reads (and for jsonb
                // normalizes) the text and marks the value's type.
                let json_cast = match data_type {
                    DataType::JSON => Some("shoal_to_json"),
                    DataType::JSONB => Some("shoal_to_jsonb"),
                    _ => match custom_type_name(data_type).as_deref() {
                        Some("json") => Some("shoal_to_json"),
                        Some("jsonb") => Some("shoal_to_jsonb"),
                        _ => None,
                    },
                };
                if let Some(function) = json_cast {
                    *expr = function_call(function, vec![(**inner).clone()]);
                    return ControlFlow::Continue(());
                }
                if matches!(data_type, DataType::Array(_)) {
                    if let Some(text) = string_literal_mut(inner) {
                        match crate::query::array_literal::to_expr(text, data_type) {
                            Ok(constructor) => *expr = constructor,
                            Err(e) => self.error = Some(e),
                        }
                        return ControlFlow::Continue(());
                    }
                }
                if let Some(text) = string_literal_mut(inner) {
                    if let Err(e) = pg_literals::read_scalar_literal(text, data_type) {
                        self.error = Some(e);
                        return ControlFlow::Continue(());
                    }
                    // bytea's text forms ('\x0102', escapes) are read as PostgreSQL reads them:
                    // DataFusion would take the text's own bytes.
                    if matches!(data_type, DataType::Bytea) {
                        match crate::pgtext::parse_bytea(text) {
                            Ok(bytes) => {
                                let hex = bytes.iter().map(|b| format!("{b:02x}")).collect();
                                // In parentheses: not a bare literal, so a cast to text around
                                // it goes through bytea's output function (see below).
                                *expr = Expr::Nested(Box::new(Expr::value(
                                    ast::Value::HexStringLiteral(hex),
                                )));
                            }
                            Err(e) => self.error = Some(e),
                        }
                        return ControlFlow::Continue(());
                    }
                }
                if let Some(name) = custom_type_name(data_type) {
                    let replacement = match name.as_str() {
                        "regclass" => {
                            Some(function_call("to_regclass_oid", vec![cast_text(inner)]))
                        }
                        "regtype" => Some(function_call("to_regtype_oid", vec![cast_text(inner)])),
                        "regnamespace" => {
                            Some(function_call("to_regnamespace_oid", vec![cast_text(inner)]))
                        }
                        // Shoal's catalogs hold functions (pg_type.typinput) by name, as
                        // regproc prints them: `'pg_catalog.array_in'::regproc` is that name.
                        "regproc" | "regprocedure" => match string_literal_mut(inner) {
                            Some(text) => {
                                let bare = text.strip_prefix("pg_catalog.").unwrap_or(text);
                                Some(Expr::value(ast::Value::SingleQuotedString(
                                    bare.to_string(),
                                )))
                            }
                            None => Some(Expr::Cast {
                                kind: CastKind::Cast,
                                expr: inner.clone(),
                                data_type: DataType::Text,
                                array: false,
                                format: None,
                            }),
                        },
                        // pg_operator.oprcode, a regproc, is the function's name here:
                        // as an oid it is the function's OID (pg_dump reads `oprcode::oid`).
                        "oid" if is_column_named(inner, "oprcode") => {
                            Some(function_call("shoal_regproc_oid", vec![(**inner).clone()]))
                        }
                        // `'f'::regproc::oid` (psql's `\sf f`): the regproc became the
                        // name; the cast to oid looks the function up.
                        "oid"
                            if string_literal_mut(inner)
                                .is_some_and(|t| t.parse::<u32>().is_err()) =>
                        {
                            Some(function_call("shoal_regproc_oid", vec![(**inner).clone()]))
                        }
                        // An oid is unsigned 32-bit, as the catalogs' OID columns.
                        "oid" => Some(Expr::Cast {
                            kind: CastKind::Cast,
                            expr: inner.clone(),
                            data_type: DataType::IntUnsigned(None),
                            array: false,
                            format: None,
                        }),
                        "regrole" | "xid" | "cid" => Some(Expr::Cast {
                            kind: CastKind::Cast,
                            expr: inner.clone(),
                            data_type: DataType::BigInt(None),
                            array: false,
                            format: None,
                        }),
                        "name" | "bpchar" | "char" | "citext" => Some(Expr::Cast {
                            kind: CastKind::Cast,
                            expr: inner.clone(),
                            data_type: DataType::Text,
                            array: false,
                            format: None,
                        }),
                        "int2" => Some(retype(inner, DataType::SmallInt(None))),
                        "int4" => Some(retype(inner, DataType::Int(None))),
                        "int8" => Some(retype(inner, DataType::BigInt(None))),
                        "float4" => Some(retype(inner, DataType::Real)),
                        "float8" => Some(retype(inner, DataType::DoublePrecision)),
                        "timestamptz" => Some(retype(
                            inner,
                            DataType::Timestamp(None, ast::TimezoneInfo::WithTimeZone),
                        )),
                        _ => None,
                    };
                    if let Some(r) = replacement {
                        *expr = r;
                    }
                } else if let Some(output) = is_text_type(data_type)
                    .then(|| object_name_output_function(inner))
                    .flatten()
                {
                    // regclass and regtype print as the object's name, not its OID.
                    *expr = function_call(output, vec![(**inner).clone()]);
                } else if matches!(
                    data_type,
                    DataType::Text | DataType::Varchar(None) | DataType::CharacterVarying(None)
                ) && !matches!(inner.as_ref(), Expr::Value(_))
                {
                    // PostgreSQL casts to text with the type's output function. (Literals and
                    // parameters keep the cast: it types a parameter, and literals print alike.)
                    *expr = function_call("pg_text_out", vec![(**inner).clone()]);
                } else if matches!(data_type, DataType::Uuid) {
                    // A uuid is text to DataFusion: check a literal now, and write it the way
                    // uuid output does (lower case, hyphenated).
                    if let Some(text) = string_literal_mut(inner) {
                        match crate::types::parse_uuid(text) {
                            Ok(u) => *text = crate::types::format_uuid(u),
                            Err(e) => {
                                self.error = Some(e);
                                return ControlFlow::Break(());
                            }
                        }
                    }
                    // Values are read by uuid's input (an error for what is not one) and
                    // marked as uuid, so Describe reports the type.
                    *expr = function_call("shoal_to_uuid", vec![(**inner).clone()]);
                } else if let Some(limit) = explicit_length_limit(data_type) {
                    // An explicit cast to varchar(n) or char(n) cuts a longer string to n
                    // characters (where storing it would fail). char(n) is text here, without
                    // its blank padding (`bpchar`): trailing blanks are insignificant to
                    // char(n), and text compares them.
                    let is_char = matches!(data_type, DataType::Char(_) | DataType::Character(_));
                    match data_type {
                        DataType::Char(_) | DataType::Character(_) => *data_type = DataType::Text,
                        // The same type by another name, which DataFusion does not know.
                        DataType::CharacterVarying(length) => {
                            *data_type = DataType::Varchar(length.take())
                        }
                        _ => {}
                    }
                    match string_literal_mut(inner) {
                        Some(text) => {
                            if let Some((cut, _)) = text.char_indices().nth(limit) {
                                text.truncate(cut);
                            }
                        }
                        None => {
                            let text = Expr::Cast {
                                kind: CastKind::Cast,
                                expr: inner.clone(),
                                data_type: DataType::Text,
                                array: false,
                                format: None,
                            };
                            let n = Expr::value(ast::Value::Number(limit.to_string(), false));
                            let one = Expr::value(ast::Value::Number("1".into(), false));
                            **inner = function_call("substr", vec![text, one, n]);
                        }
                    }
                    if is_char {
                        let length = Expr::value(ast::Value::Number(limit.to_string(), false));
                        *expr = function_call(
                            crate::query::bpchar::TO_BPCHAR,
                            vec![expr.clone(), length],
                        );
                    }
                } else if let DataType::Char(_) | DataType::Character(_) = data_type {
                    *data_type = DataType::Text;
                }
            }
            // SUBSTRING(x FROM a FOR b) and substr(x, a, b) become a call of the registered
            // `substr`, which knows bytea (`bytea.rs`); DataFusion would plan its own, for text
            // only. A FROM that is a string literal is the regular-expression form: left alone.
            Expr::Substring {
                expr: value,
                substring_from,
                substring_for,
                ..
            } if !substring_from
                .as_deref()
                .is_some_and(|e| string_literal_mut(&mut e.clone()).is_some()) =>
            {
                let one = Expr::value(ast::Value::Number("1".into(), false));
                let mut args = vec![
                    (**value).clone(),
                    substring_from.as_deref().cloned().unwrap_or(one),
                ];
                args.extend(substring_for.as_deref().cloned());
                *expr = function_call("substr", args);
            }
            // POSITION(a IN b) likewise becomes the registered strpos(b, a).
            Expr::Position { expr: needle, r#in } => {
                let args = vec![(**r#in).clone(), (**needle).clone()];
                *expr = function_call("strpos", args);
            }
            // EXTRACT is numeric in PostgreSQL (see `datetime::Extract`).
            Expr::Extract {
                field, expr: value, ..
            } => {
                let name = Expr::value(ast::Value::SingleQuotedString(
                    field.to_string().to_lowercase(),
                ));
                *expr = function_call("pg_extract", vec![name, (**value).clone()]);
            }
            Expr::AtTimeZone {
                timestamp,
                time_zone,
            } => {
                *expr = function_call(
                    "pg_at_time_zone",
                    vec![(**timestamp).clone(), (**time_zone).clone()],
                );
            }
            // DataFusion's planner reads interval literals itself, in fewer forms than
            // PostgreSQL: restated from Shoal's reading, whose errors are PostgreSQL's.
            Expr::Interval(interval) if interval.leading_field.is_none() => {
                if let Some(text) = string_literal_mut(&mut interval.value) {
                    match crate::query::datetime::interval_literal_for_datafusion(text) {
                        Ok(restated) => *text = restated,
                        Err(e) => {
                            self.error = Some(e);
                            return ControlFlow::Break(());
                        }
                    }
                }
            }
            // LOCALTIMESTAMP / LOCALTIME: the transaction's start time without a time zone.
            Expr::Identifier(ident)
                if ident.quote_style.is_none()
                    && matches!(
                        ident.value.to_lowercase().as_str(),
                        "localtimestamp" | "localtime"
                    ) =>
            {
                *expr = local_time_expr(ident.value.eq_ignore_ascii_case("localtime"));
            }
            // sqlparser reads LOCALTIMESTAMP like CURRENT_TIMESTAMP, as a call without parentheses.
            Expr::Function(f)
                if matches!(f.args, FunctionArguments::None)
                    && matches!(
                        object_name_parts(&f.name).as_slice(),
                        [n] if n == "localtimestamp" || n == "localtime"
                    ) =>
            {
                let time_only = object_name_parts(&f.name)[0] == "localtime";
                *expr = local_time_expr(time_only);
            }
            Expr::Function(f) if matches!(f.args, FunctionArguments::Subquery(_)) => {
                if let Some(aggregated) = array_subquery(f) {
                    *expr = aggregated;
                }
            }
            Expr::Function(f) => {
                match self.inline_routine_call(f) {
                    Ok(Some(body)) => {
                        *expr = body;
                        return ControlFlow::Continue(());
                    }
                    Ok(None) => {}
                    Err(e) => {
                        self.error = Some(e);
                        return ControlFlow::Break(());
                    }
                }
                let parts = object_name_parts(&f.name);
                if parts.len() == 2 && parts[0] == "pg_catalog" {
                    f.name = ObjectName(vec![ObjectNamePart::Identifier(Ident::new(
                        parts[1].clone(),
                    ))]);
                }
                if is_format_call(f) {
                    print_format_object_names(f);
                }
                if object_name_parts(&f.name).as_slice() == ["to_char"] {
                    if let FunctionArguments::List(list) = &mut f.args {
                        if let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(pattern))) =
                            list.args.get_mut(1)
                        {
                            if let Some(text) = string_literal_mut(pattern) {
                                *text = crate::query::datetime::to_char_pattern(text);
                            }
                        }
                    }
                }
                sibling_typed_literals(f);
                if let Some(renamed) = synonym_call(f) {
                    *expr = renamed;
                }
            }
            // `pg_current_wal_lsn() - '0/0'`: pg_lsn's minus, bytes between two positions.
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Minus,
                right,
            } if matches!(right.as_ref(), Expr::Value(v) if matches!(&v.value,
                    ast::Value::SingleQuotedString(s) if crate::query::wal_functions::parse_lsn(s).is_some())) =>
            {
                *expr = function_call("pg_wal_lsn_diff", vec![(**left).clone(), (**right).clone()]);
            }
            Expr::UnaryOp {
                op: ast::UnaryOperator::Minus,
                expr: operand,
            } => {
                if let Some(e) = negate_power_base(operand) {
                    *expr = e;
                } else if !matches!(operand.as_ref(), Expr::Value(_)) {
                    // DataFusion's planner refuses unary minus on types it does not know as
                    // numbers, numeric among them (see `crate::numeric::functions`). A number
                    // literal stays as it is: DataFusion reads `-5` as one negative literal.
                    *expr = function_call("pg_negate", vec![(**operand).clone()]);
                }
            }
            Expr::Collate { expr: inner, .. } => {
                *expr = (**inner).clone();
            }
            Expr::BinaryOp {
                op: BinaryOperator::PGCustomBinaryOperator(parts),
                ..
            } => {
                let mapped = match parts.last().map(|s| s.as_str()) {
                    Some("~") => Some(BinaryOperator::PGRegexMatch),
                    Some("~*") => Some(BinaryOperator::PGRegexIMatch),
                    Some("!~") => Some(BinaryOperator::PGRegexNotMatch),
                    Some("!~*") => Some(BinaryOperator::PGRegexNotIMatch),
                    Some("=") => Some(BinaryOperator::Eq),
                    Some("<>") => Some(BinaryOperator::NotEq),
                    Some("<") => Some(BinaryOperator::Lt),
                    Some(">") => Some(BinaryOperator::Gt),
                    _ => None,
                };
                if let (Some(m), Expr::BinaryOp { op, .. }) = (mapped, &mut *expr) {
                    *op = m;
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// The longest number literal left for DataFusion to read (a 128-bit decimal holds 38 digits).
const LITERAL_DIGITS_MAX: usize = 38;

/// When `e` is what a `::regclass`, `::regtype` or `::regnamespace` cast was rewritten to, the
/// function that prints its OID as a name.
/// A result column cast to regclass or regtype (`conrelid::pg_catalog.regclass AS ontable`,
/// which psql's `\d` prints) shows the object's name, as PostgreSQL's output function does.
/// Shoal keeps such values as OIDs, so the casts become name lookups in the outermost query's
/// select list only; inside, they stay OIDs for comparisons.
fn print_object_names(query: &mut ast::Query) {
    let ast::SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    for item in &mut select.projection {
        let (ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. }) =
            item
        else {
            continue;
        };
        if let Some(output) = object_name_output_function(e) {
            *e = function_call(output, vec![e.clone()]);
        }
    }
}

fn is_format_call(f: &Function) -> bool {
    matches!(object_name_parts(&f.name).last(), Some(n) if n == "format")
}

/// format() prints each argument with its type's output function, so an argument cast to
/// regclass, regtype or regnamespace prints as the object's name, as in PostgreSQL.
fn print_format_object_names(f: &mut Function) {
    let FunctionArguments::List(list) = &mut f.args else {
        return;
    };
    for arg in &mut list.args {
        let FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) = arg else {
            continue;
        };
        if let Some(output) = object_name_output_function(e) {
            *e = function_call(output, vec![e.clone()]);
        }
    }
}

fn object_name_output_function(e: &Expr) -> Option<&'static str> {
    let Expr::Function(f) = e else { return None };
    match object_name_parts(&f.name).as_slice() {
        [n] if n == "to_regclass_oid" || n == "to_regclass" => Some("regclass_out"),
        [n] if n == "to_regtype_oid" || n == "to_regtype" => Some("regtype_out"),
        [n] if n == "to_regnamespace_oid" => Some("regnamespace_out"),
        _ => None,
    }
}

fn cast_text(e: &Expr) -> Expr {
    Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(e.clone()),
        data_type: DataType::Text,
        array: false,
        format: None,
    }
}

fn retype(e: &Expr, t: DataType) -> Expr {
    Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(e.clone()),
        data_type: t,
        array: false,
        format: None,
    }
}

/// The text of a string literal, to rewrite in place; None for anything else.
/// The text of a string literal, also in parentheses (`('{a,b}')::text[]` is still an
/// untyped literal to PostgreSQL).
/// Whether `expr` is a reference to a column `name` (bare or qualified).
fn is_column_named(expr: &Expr, name: &str) -> bool {
    match expr {
        Expr::Identifier(i) => i.value == name,
        Expr::CompoundIdentifier(parts) => parts.last().is_some_and(|i| i.value == name),
        _ => false,
    }
}

fn string_literal_mut(e: &mut Expr) -> Option<&mut String> {
    match e {
        Expr::Value(v) => match &mut v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::EscapedStringLiteral(s) => Some(s),
            _ => None,
        },
        Expr::Nested(inner) => string_literal_mut(inner),
        _ => None,
    }
}

/// LOCALTIMESTAMP (or LOCALTIME): now() without its time zone (or date).
fn local_time_expr(time_only: bool) -> Expr {
    let data_type = if time_only {
        DataType::Time(None, ast::TimezoneInfo::None)
    } else {
        DataType::Timestamp(None, ast::TimezoneInfo::None)
    };
    Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(function_call("now", vec![])),
        data_type,
        array: false,
        format: None,
    }
}
