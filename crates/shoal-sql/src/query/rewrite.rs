//! Rewrites a parsed statement into something DataFusion can plan with PostgreSQL's meaning:
//! views become subqueries, `::regclass`-style casts become catalog lookups, `pg_catalog.`
//! function prefixes and COLLATE clauses are dropped, `OPERATOR(pg_catalog.~)` becomes the
//! plain operator, and PostgreSQL-only type names map to ones DataFusion knows.

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

/// Maximum depth of views referring to views, so a cycle cannot loop forever.
const VIEW_NESTING_MAX: usize = 32;

pub fn rewrite_statement(stmt: &mut ast::Statement, scope: &PlanScope) -> SqlResult<()> {
    for _ in 0..VIEW_NESTING_MAX {
        let mut v = Rewriter {
            scope,
            error: None,
            expanded_view: false,
            query_depth: 0,
        };
        let _ = stmt.visit(&mut v);
        if let Some(e) = v.error {
            return Err(e);
        }
        if !v.expanded_view {
            return Ok(());
        }
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

impl VisitorMut for Rewriter<'_> {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
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
                        "regproc" => match string_literal_mut(inner) {
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
                        "name" | "bpchar" | "char" | "citext" | "regprocedure" => {
                            Some(Expr::Cast {
                                kind: CastKind::Cast,
                                expr: inner.clone(),
                                data_type: DataType::Text,
                                array: false,
                                format: None,
                            })
                        }
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

/// A quoted argument of COALESCE, GREATEST, LEAST or NULLIF next to an argument that is not
/// one becomes `shoal_sibling_typed('...', sibling)`, which takes the sibling's type when it
/// is a date or time (`crate::query::unknown_literals`). Not when the sibling holds a subquery,
/// which the wrapper would plan twice.
fn sibling_typed_literals(f: &mut Function) {
    let name = object_name_parts(&f.name);
    if !matches!(name.as_slice(), [n] if matches!(n.as_str(), "coalesce" | "greatest" | "least" | "nullif"))
    {
        return;
    }
    let FunctionArguments::List(list) = &mut f.args else {
        return;
    };
    let is_quoted = |e: &Expr| matches!(e, Expr::Value(v) if matches!(v.value, ast::Value::SingleQuotedString(_)));
    let sibling = list.args.iter().find_map(|a| match a {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) if !is_quoted(e) => Some(e.clone()),
        _ => None,
    });
    let Some(sibling) = sibling else {
        return;
    };
    let has_subquery = ast::visit_expressions(&sibling, |e| match e {
        Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break();
    if matches!(sibling, Expr::Value(_)) || has_subquery {
        return;
    }
    for arg in list.args.iter_mut() {
        if let FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) = arg {
            if is_quoted(e) {
                *e = function_call(
                    crate::query::unknown_literals::SIBLING_TYPED,
                    vec![e.clone(), sibling.clone()],
                );
            }
        }
    }
}

/// `ARRAY(SELECT x FROM ... WHERE ... ORDER BY y)`, an array of the subquery's rows (psql's
/// `\du` reads role memberships so), becomes `(SELECT array_agg(x ORDER BY y) FROM ... WHERE
/// ...)`, an aggregate subquery DataFusion plans and decorrelates when it reads the outer row,
/// wrapped in `coalesce(..., make_array())`: without rows, ARRAY() is an empty array where
/// array_agg is NULL. Only a plain SELECT of one column is rewritten (no DISTINCT, GROUP BY,
/// LIMIT or set operation).
fn array_subquery(f: &Function) -> Option<Expr> {
    let FunctionArguments::Subquery(query) = &f.args else {
        return None;
    };
    if object_name_parts(&f.name).as_slice() != ["array"]
        || query.with.is_some()
        || query.limit_clause.is_some()
        || query.fetch.is_some()
    {
        return None;
    }
    let ast::SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    let plain = select.distinct.is_none()
        && select.having.is_none()
        && matches!(&select.group_by, ast::GroupByExpr::Expressions(e, _) if e.is_empty());
    let element = match select.projection.as_slice() {
        [ast::SelectItem::UnnamedExpr(e)] | [ast::SelectItem::ExprWithAlias { expr: e, .. }] => e,
        _ => return None,
    };
    if !plain {
        return None;
    }
    // ORDER BY 1 names the element by position.
    let order = match &query.order_by {
        Some(ast::OrderBy {
            kind: ast::OrderByKind::Expressions(keys),
            ..
        }) => {
            let keys: Vec<String> = keys
                .iter()
                .map(|k| {
                    let mut k = k.clone();
                    if matches!(&k.expr, Expr::Value(v) if v.to_string() == "1") {
                        k.expr = element.clone();
                    }
                    k.to_string()
                })
                .collect();
            format!(" ORDER BY {}", keys.join(", "))
        }
        _ => String::new(),
    };
    let mut aggregated = (**select).clone();
    let call = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&format!("array_agg({element}{order})"))
        .and_then(|mut p| p.parse_expr())
        .ok()?;
    aggregated.projection = vec![ast::SelectItem::UnnamedExpr(call)];
    let mut subquery = (**query).clone();
    subquery.body = Box::new(ast::SetExpr::Select(Box::new(aggregated)));
    subquery.order_by = None;
    Some(function_call(
        "coalesce",
        vec![
            Expr::Subquery(Box::new(subquery)),
            function_call("make_array", vec![]),
        ],
    ))
}

/// A cast to numeric is `pg_numeric(x)`, or `pg_numeric(x, precision, scale)` for numeric(p,s):
/// DataFusion's planner would make it a fixed-scale decimal (see `crate::numeric`). None for
/// casts to other types.
fn numeric_cast(inner: &Expr, t: &DataType) -> SqlResult<Option<Expr>> {
    let info = match t {
        DataType::Numeric(info) | DataType::Decimal(info) | DataType::Dec(info) => info,
        _ => return Ok(None),
    };
    let (precision, scale) = match info {
        ast::ExactNumberInfo::None => {
            return Ok(Some(function_call("pg_numeric", vec![inner.clone()])))
        }
        ast::ExactNumberInfo::Precision(p) => (*p, 0),
        ast::ExactNumberInfo::PrecisionAndScale(_, s) if *s < 0 => {
            return Err(SqlError::new(
                crate::error::code::FEATURE_NOT_SUPPORTED,
                "numeric with a negative scale is not supported",
            ))
        }
        ast::ExactNumberInfo::PrecisionAndScale(p, s) => (*p, *s as u64),
    };
    if !(1..=NUMERIC_CAST_PRECISION_MAX).contains(&precision) {
        return Err(SqlError::new(
            crate::error::code::INVALID_PARAMETER_VALUE,
            format!(
                "NUMERIC precision {precision} must be between 1 and {NUMERIC_CAST_PRECISION_MAX}"
            ),
        ));
    }
    if scale > precision {
        return Err(SqlError::new(
            crate::error::code::INVALID_PARAMETER_VALUE,
            format!("NUMERIC scale {scale} must be between 0 and precision {precision}"),
        ));
    }
    let number = |n: u64| Expr::value(ast::Value::Number(n.to_string(), false));
    Ok(Some(function_call(
        "pg_numeric",
        vec![inner.clone(), number(precision), number(scale)],
    )))
}

/// The longest number literal left for DataFusion to read (a 128-bit decimal holds 38 digits).
const LITERAL_DIGITS_MAX: usize = 38;

/// PostgreSQL's largest numeric precision in a type modifier.
const NUMERIC_CAST_PRECISION_MAX: u64 = 1000;

/// psql spells built-in types with their schema (`x::pg_catalog.text`, `pg_catalog.int2[]`);
/// those become the types sqlparser knows by name, so DataFusion can plan the cast.
fn normalize_type_name(t: &mut DataType) {
    if let DataType::Array(ast::ArrayElemTypeDef::SquareBracket(element, _)) = t {
        normalize_type_name(element);
        // The standard's spellings, which DataFusion plans only outside arrays
        // (`character varying(255)[]`, as format_type prints it).
        match element.as_ref() {
            DataType::CharacterVarying(n) | DataType::CharVarying(n) => {
                **element = DataType::Varchar(*n)
            }
            DataType::Character(n) => **element = DataType::Char(*n),
            _ => {}
        }
        // Object identifiers are bigints to Shoal; an array of them too (`$1::oid[]`).
        if matches!(
            custom_type_name(element).as_deref(),
            Some("oid" | "regproc" | "regrole" | "xid" | "cid" | "regclass" | "regtype")
        ) {
            **element = DataType::BigInt(None);
        }
        // Text to DataFusion, as their scalars are (`$1::uuid[]`, `'{...}'::jsonb[]`).
        if matches!(
            element.as_ref(),
            DataType::Uuid | DataType::JSON | DataType::JSONB
        ) || matches!(custom_type_name(element).as_deref(), Some("json" | "jsonb"))
        {
            **element = DataType::Text;
        }
        return;
    }
    let DataType::Custom(name, modifiers) = t else {
        return;
    };
    // A quoted name (`"numeric"`, as quote_ident and format_type print key words) is the same
    // type as the bare one.
    let parts = object_name_parts(name);
    let type_name = match parts.as_slice() {
        [type_name] => type_name,
        [schema, type_name] if schema == "pg_catalog" => type_name,
        _ => return,
    };
    if !modifiers.is_empty() {
        return;
    }
    *t = match type_name.as_str() {
        "text" => DataType::Text,
        "varchar" => DataType::Varchar(None),
        "bool" => DataType::Boolean,
        "int2" => DataType::SmallInt(None),
        "int4" => DataType::Int(None),
        "int8" => DataType::BigInt(None),
        "float4" => DataType::Real,
        "float8" => DataType::DoublePrecision,
        "numeric" => DataType::Numeric(ast::ExactNumberInfo::None),
        "date" => DataType::Date,
        "timestamp" => DataType::Timestamp(None, ast::TimezoneInfo::None),
        "time" => DataType::Time(None, ast::TimezoneInfo::None),
        "interval" => DataType::Interval {
            fields: None,
            precision: None,
        },
        // The remaining names (regclass, oid, name...) are handled by their bare name below.
        _ if parts.len() == 1 => return,
        other => DataType::Custom(
            ObjectName(vec![ObjectNamePart::Identifier(Ident::new(other))]),
            vec![],
        ),
    };
}

fn is_text_type(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Text | DataType::Varchar(_) | DataType::CharacterVarying(_)
    )
}

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

/// DISTINCT ON and ORDER BY may name output columns by position (`DISTINCT ON (1) ... ORDER BY
/// 1`), as PostgreSQL reads them. DataFusion resolves positions in ORDER BY but takes them for
/// constants in DISTINCT ON, and then finds the two lists different. Both get the output
/// column's expression written out.
fn distinct_on_positions(query: &mut ast::Query) {
    let ast::SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    let Some(ast::Distinct::On(distinct)) = &select.distinct else {
        return;
    };
    let output = |e: &Expr| -> Option<Expr> {
        let Expr::Value(v) = e else { return None };
        let ast::Value::Number(n, _) = &v.value else {
            return None;
        };
        let position: usize = n.parse().ok()?;
        match select.projection.get(position.checked_sub(1)?)? {
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                Some(e.clone())
            }
            _ => None,
        }
    };
    // An output column's alias stands for its expression.
    let aliased = |e: &Expr| -> Option<Expr> {
        let Expr::Identifier(name) = e else {
            return None;
        };
        select.projection.iter().find_map(|item| match item {
            ast::SelectItem::ExprWithAlias { expr, alias } if alias.value == name.value => {
                Some(expr.clone())
            }
            _ => None,
        })
    };
    let resolved = |e: &Expr| {
        output(e)
            .or_else(|| aliased(e))
            .unwrap_or_else(|| e.clone())
    };
    let mut distinct: Vec<Expr> = distinct
        .iter()
        .map(|e| output(e).unwrap_or_else(|| e.clone()))
        .collect();
    if let Some(ast::OrderBy {
        kind: ast::OrderByKind::Expressions(order),
        ..
    }) = &mut query.order_by
    {
        // The DISTINCT ON expressions are a set: PostgreSQL takes them in any order as long
        // as ORDER BY starts with them, where DataFusion wants them in ORDER BY's order.
        if order.len() >= distinct.len() {
            let leading: Vec<Expr> = order[..distinct.len()]
                .iter()
                .map(|item| resolved(&item.expr))
                .collect();
            let wanted: Vec<Expr> = distinct.iter().map(&resolved).collect();
            let same_set = leading.iter().all(|e| wanted.contains(e))
                && wanted.iter().all(|e| leading.contains(e));
            if same_set && leading != wanted {
                distinct = leading;
            }
        }
        for item in order.iter_mut() {
            // A constant stays a position: in ORDER BY a number is read as one.
            if let Some(e) = output(&item.expr).filter(|e| !matches!(e, Expr::Value(_))) {
                item.expr = e;
            }
        }
    }
    select.distinct = Some(ast::Distinct::On(distinct));
}

/// `FETCH FIRST n ROWS ONLY` is the standard spelling of `LIMIT n`, which DataFusion plans.
pub(crate) fn fetch_to_limit(query: &mut ast::Query) {
    let Some(fetch) = &query.fetch else { return };
    if fetch.with_ties || fetch.percent {
        return;
    }
    let quantity = fetch
        .quantity
        .clone()
        .unwrap_or_else(|| Expr::value(ast::Value::Number("1".into(), false)));
    match &mut query.limit_clause {
        None => {
            query.limit_clause = Some(ast::LimitClause::LimitOffset {
                limit: Some(quantity),
                offset: None,
                limit_by: vec![],
            });
        }
        Some(ast::LimitClause::LimitOffset {
            limit: limit @ None,
            ..
        }) => *limit = Some(quantity),
        Some(_) => return,
    }
    query.fetch = None;
}

/// DataFusion compares `x > ALL (SELECT c FROM t)` by pushing `x > c` into the subquery; when
/// the subquery reads the same table as the outer query without an alias, the two sides of that
/// comparison end up with the same qualified name and the outer one is lost. Naming the
/// subquery's column keeps them apart.
fn name_quantified_subquery_column(query: &mut ast::Query) {
    let ast::SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    if let [item @ ast::SelectItem::UnnamedExpr(_)] = select.projection.as_mut_slice() {
        let ast::SelectItem::UnnamedExpr(e) = item else {
            return;
        };
        *item = ast::SelectItem::ExprWithAlias {
            expr: e.clone(),
            alias: Ident::new("__shoal_quantified"),
        };
    }
}

/// PostgreSQL functions that are another name for a DataFusion function or operator.
fn synonym_call(f: &Function) -> Option<Expr> {
    let parts = object_name_parts(&f.name);
    let [name] = parts.as_slice() else {
        return None;
    };
    if f.over.is_some() {
        return None;
    }
    let renamed = match name.as_str() {
        "ceiling" => "ceil",
        "sign" => "signum",
        "transaction_timestamp" => "now",
        // PostgreSQL's array_remove removes every element equal to the value; DataFusion's
        // removes the first.
        "array_remove" => "array_remove_all",
        // The SQL standard's name for bool_and.
        "every" => "bool_and",
        "to_timestamp" => return to_timestamp_from_epoch(f),
        "mod" => {
            let FunctionArguments::List(list) = &f.args else {
                return None;
            };
            let [FunctionArg::Unnamed(FunctionArgExpr::Expr(a)), FunctionArg::Unnamed(FunctionArgExpr::Expr(b))] =
                list.args.as_slice()
            else {
                return None;
            };
            return Some(Expr::Nested(Box::new(Expr::BinaryOp {
                left: Box::new(a.clone()),
                op: BinaryOperator::Modulo,
                right: Box::new(b.clone()),
            })));
        }
        _ => return None,
    };
    let mut f = f.clone();
    f.name = ObjectName(vec![ObjectNamePart::Identifier(Ident::new(renamed))]);
    Some(Expr::Function(f))
}

/// PostgreSQL's one-argument to_timestamp takes seconds since the epoch (a double precision);
/// DataFusion's reads text. A number literal is passed as a double, as PostgreSQL's argument
/// type makes it, so that `1e300` is not first read as a numeric.
fn to_timestamp_from_epoch(f: &Function) -> Option<Expr> {
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    let [FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))] = list.args.as_slice() else {
        return None;
    };
    let arg = match arg {
        Expr::Value(v) if matches!(v.value, ast::Value::Number(..)) => Expr::Cast {
            kind: CastKind::Cast,
            expr: Box::new(Expr::value(ast::Value::SingleQuotedString(
                v.value.to_string(),
            ))),
            data_type: DataType::DoublePrecision,
            array: false,
            format: None,
        },
        other => other.clone(),
    };
    Some(function_call("pg_to_timestamp_epoch", vec![arg]))
}

/// In PostgreSQL unary minus binds tighter than `^`, so `-2 ^ 2` is `(-2) ^ 2`; sqlparser
/// parses it as `-(2 ^ 2)`.
fn negate_power_base(operand: &Expr) -> Option<Expr> {
    let Expr::BinaryOp {
        left,
        op: BinaryOperator::PGExp,
        right,
    } = operand
    else {
        return None;
    };
    let negated = Expr::UnaryOp {
        op: ast::UnaryOperator::Minus,
        expr: left.clone(),
    };
    let base = negate_power_base(left).unwrap_or(negated);
    Some(Expr::BinaryOp {
        left: Box::new(base),
        op: BinaryOperator::PGExp,
        right: right.clone(),
    })
}

/// `LIMIT '5'`: a quoted count is read as a bigint, as PostgreSQL reads LIMIT's `unknown`
/// (drivers' simple protocol sends their parameters so).
fn quoted_limit_as_bigint(query: &mut ast::Query) {
    let Some(ast::LimitClause::LimitOffset { limit, offset, .. }) = &mut query.limit_clause else {
        return;
    };
    let counts = limit
        .iter_mut()
        .chain(offset.iter_mut().map(|o| &mut o.value));
    for count in counts {
        if matches!(count, Expr::Value(v) if matches!(v.value, ast::Value::SingleQuotedString(_))) {
            *count = Expr::Cast {
                kind: ast::CastKind::Cast,
                expr: Box::new(count.clone()),
                data_type: DataType::BigInt(None),
                array: false,
                format: None,
            };
        }
    }
}

/// Set-returning functions whose rows are one scalar value each.
const SCALAR_SET_FUNCTIONS: [&str; 3] = ["generate_series", "unnest", "pg_catalog.generate_series"];

/// In PostgreSQL a function in FROM that returns a scalar type names its one column after the
/// alias: `FROM generate_series(1, 3) AS n` has a column `n` (pgbench's server-side data
/// generation relies on it). DataFusion names it after the function, so the alias gets a
/// column list.
/// `generate_series` of integers is a series of integers (int4) in PostgreSQL; DataFusion's
/// gives bigints. Over integer literals (the usual `generate_series(1, 10)`), the series is
/// read through a cast to integer, under the name PostgreSQL gives its column.
fn integer_series(factor: &mut TableFactor) {
    let TableFactor::Table {
        name,
        alias,
        args: Some(args),
        ..
    } = factor
    else {
        return;
    };
    if !matches!(object_name_parts(name).as_slice(), [n] if n == "generate_series") {
        return;
    }
    // Integer literals, and beside one, the parameters, quoted literals and computed bounds
    // PostgreSQL then reads as integers (`generate_series(1, $1)`, `generate_series(1, '5')`,
    // pgJDBC's `generate_series(1, array_upper(current_schemas(false), 1))`). A series of
    // timestamps has no integer literal and stays as it is.
    let mut all_literals = true;
    let mut any_literal = false;
    // A computed bound may be a bigint (`1::bigint`): the series stays bigint then.
    let mut computed = false;
    let bounds: Option<Vec<String>> = args
        .args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => {
                if let Some(v) = crate::query::select_srf::int4_literal(e) {
                    any_literal = true;
                    return Some(format!("CAST({v} AS bigint)"));
                }
                all_literals = false;
                let unknown = matches!(
                    e,
                    Expr::Value(v) if matches!(
                        v.value,
                        ast::Value::Placeholder(_) | ast::Value::SingleQuotedString(_)
                    )
                );
                if unknown {
                    return Some(format!("CAST(CAST({e} AS integer) AS bigint)"));
                }
                computed = true;
                (!names_a_column(e)).then(|| format!("CAST({e} AS bigint)"))
            }
            _ => None,
        })
        .collect();
    let Some(bounds) = bounds.filter(|b| (2..=3).contains(&b.len()) && any_literal) else {
        return;
    };
    let column = match alias {
        Some(a) if !a.columns.is_empty() => a.columns[0].name.value.clone(),
        Some(a) => a.name.value.clone(),
        None => "generate_series".to_string(),
    };
    let column = crate::query::functions::quote_ident_if_needed(&column);
    // The table function takes literals only; the list-returning one takes any expression.
    let sql = if all_literals {
        format!(
            "SELECT CAST(value AS integer) AS {column} FROM generate_series({})",
            bounds.join(", ")
        )
    } else if computed {
        format!(
            "SELECT unnest(generate_series({})) AS {column}",
            bounds.join(", ")
        )
    } else {
        format!(
            "SELECT CAST(unnest(generate_series({})) AS integer) AS {column}",
            bounds.join(", ")
        )
    };
    let Ok(query) = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
    else {
        return;
    };
    let alias = alias.clone().unwrap_or(TableAlias {
        explicit: false,
        name: Ident::new("generate_series"),
        columns: vec![],
        at: None,
    });
    *factor = TableFactor::Derived {
        lateral: false,
        subquery: query,
        alias: Some(alias),
        sample: None,
    };
}

/// `unnest(a, b) WITH ORDINALITY` numbers the rows from 1: DataFusion has no ordinality, but
/// its unnest of several arrays runs them side by side as PostgreSQL's does (the shorter padded
/// with NULLs), so the numbers become one more array, `generate_series(1, n)` for the longest
/// array's length n. A NULL or empty array gives no rows either way.
fn unnest_with_ordinality(factor: &mut TableFactor) {
    let TableFactor::UNNEST {
        array_exprs,
        with_ordinality,
        with_offset: false,
        ..
    } = factor
    else {
        return;
    };
    if !*with_ordinality || array_exprs.is_empty() {
        return;
    }
    let lengths: Vec<Expr> = array_exprs
        .iter()
        .map(|a| function_call("cardinality", vec![a.clone()]))
        .collect();
    let longest = if lengths.len() == 1 {
        lengths.into_iter().next().expect("one length")
    } else {
        function_call("greatest", lengths)
    };
    let one = Expr::value(ast::Value::Number("1".into(), false));
    array_exprs.push(function_call("generate_series", vec![one, longest]));
    *with_ordinality = false;
}

/// Whether `e` reads a column (an identifier that is not a function's name).
fn names_a_column(e: &Expr) -> bool {
    ast::visit_expressions(e, |e| match e {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

fn name_scalar_function_column(factor: &mut TableFactor) {
    if let TableFactor::UNNEST {
        alias: Some(alias),
        array_exprs,
        with_offset: false,
        with_ordinality: false,
        ..
    } = factor
    {
        if alias.columns.is_empty() && array_exprs.len() == 1 {
            alias.columns = vec![ast::TableAliasColumnDef::from_name(
                alias.name.value.clone(),
            )];
        }
        return;
    }
    let TableFactor::Table {
        name,
        alias: Some(alias),
        args: Some(_),
        ..
    } = factor
    else {
        return;
    };
    let function = name.to_string().to_lowercase();
    if alias.columns.is_empty() && SCALAR_SET_FUNCTIONS.contains(&function.as_str()) {
        alias.columns = vec![ast::TableAliasColumnDef::from_name(
            alias.name.value.clone(),
        )];
    }
}

/// A LIKE pattern written with escape character `escape` (empty: none), rewritten for the
/// backslash: `a#_b` with `#` is `a\_b`, and a backslash that escapes nothing is doubled.
/// (PostgreSQL checks a trailing escape character only when the match reaches it.)
pub(crate) fn like_pattern_with_backslash(pattern: &str, escape: &str) -> SqlResult<String> {
    let invalid = |message: &str| SqlError::new("22025", message);
    let mut escape_chars = escape.chars();
    let escape = match (escape_chars.next(), escape_chars.next()) {
        (None, _) => None,
        (Some(c), None) => Some(c),
        _ => {
            return Err(invalid("invalid escape string")
                .with_hint("Escape string must be empty or one character."))
        }
    };
    let mut out = String::with_capacity(pattern.len() + 2);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            // PostgreSQL reports a trailing escape only when matching reaches it; here it is
            // read as a literal backslash, which gives its answer wherever the match fails
            // before that point.
            let Some(next) = chars.next() else {
                out.push_str("\\\\");
                break;
            };
            out.push('\\');
            out.push(next);
        } else if c == '\\' {
            out.push_str("\\\\");
        } else {
            out.push(c);
        }
    }
    Ok(out)
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

/// n of an explicit cast to varchar(n) or char(n) (char alone is char(1)).
fn explicit_length_limit(t: &DataType) -> Option<usize> {
    match t {
        DataType::Varchar(Some(length)) | DataType::CharacterVarying(Some(length)) => {
            character_length_limit(length)
        }
        DataType::Char(length) | DataType::Character(length) => match length {
            Some(length) => character_length_limit(length),
            None => Some(1),
        },
        _ => None,
    }
}

/// n of varchar(n), when it is a plain character count.
fn character_length_limit(length: &ast::CharacterLength) -> Option<usize> {
    match length {
        ast::CharacterLength::IntegerLength { length, .. } => usize::try_from(*length).ok(),
        ast::CharacterLength::Max => None,
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

/// Most rows of a VALUES list with subqueries rewritten into SELECTs.
const VALUES_SUBQUERY_ROWS_MAX: usize = 64;

/// `VALUES (e1, e2), ...` whose expressions hold a subquery, as `SELECT e1 AS column1, e2 AS
/// column2 UNION ALL ...`: DataFusion cannot evaluate a scalar subquery inside VALUES
/// (`INSERT INTO t VALUES (1, (SELECT max(id) FROM u))` failed with an internal error).
fn values_with_subqueries_as_selects(values: &ast::Values) -> Option<ast::SetExpr> {
    // The UNION ALL nests a level per row: a long list would nest deeper than planning can.
    if values.rows.len() > VALUES_SUBQUERY_ROWS_MAX {
        return None;
    }
    let mut has_subquery = false;
    let _ = ast::Visit::visit(
        values,
        &mut SubqueryFinder {
            found: &mut has_subquery,
        },
    );
    if !has_subquery {
        return None;
    }
    // A parsed `SELECT NULL` as the template of each row's SELECT.
    let mut template = crate::parse::parse_statements("SELECT NULL").ok()?;
    let ast::Statement::Query(template) = template.pop()? else {
        return None;
    };
    let ast::SetExpr::Select(template) = *template.body else {
        return None;
    };
    let mut selects = values.rows.iter().map(|row| {
        let mut select = template.clone();
        select.projection = row
            .iter()
            .enumerate()
            .map(|(i, e)| ast::SelectItem::ExprWithAlias {
                expr: e.clone(),
                alias: Ident::new(format!("column{}", i + 1)),
            })
            .collect();
        ast::SetExpr::Select(select)
    });
    let first = selects.next()?;
    Some(
        selects.fold(first, |left, right| ast::SetExpr::SetOperation {
            op: ast::SetOperator::Union,
            set_quantifier: ast::SetQuantifier::All,
            left: Box::new(left),
            right: Box::new(right),
        }),
    )
}

struct SubqueryFinder<'a> {
    found: &'a mut bool,
}

impl ast::Visitor for SubqueryFinder<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        if matches!(
            expr,
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. }
        ) {
            *self.found = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod values_subquery_tests {
    use super::*;

    #[test]
    fn values_with_a_subquery_become_selects() {
        let mut statements =
            crate::parse::parse_statements("VALUES (1, (SELECT 10)), (2, 3)").unwrap();
        let ast::Statement::Query(q) = statements.pop().unwrap() else {
            panic!("a query")
        };
        let ast::SetExpr::Values(values) = q.body.as_ref() else {
            panic!("values")
        };
        let selects = values_with_subqueries_as_selects(values).expect("rewritten");
        assert_eq!(
            selects.to_string(),
            "SELECT 1 AS column1, (SELECT 10) AS column2 UNION ALL SELECT 2 AS column1, 3 AS column2"
        );
    }
}
