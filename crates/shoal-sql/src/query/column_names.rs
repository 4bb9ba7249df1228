//! Result column names as PostgreSQL chooses them. An unnamed select-list item is named after
//! its function (`count`), the column it reads, the type it is cast to (`text`), `case`, or
//! `?column?`; several items may share a name. DataFusion names items after their whole
//! expression and refuses duplicates, so every item gets PostgreSQL's name as an alias, and a
//! repeated name carries a hidden suffix that `output_name` strips before clients see it.

use std::collections::HashMap;

use datafusion::sql::sqlparser::ast::{
    CastKind, DataType, Expr, Ident, ObjectNamePart, Select, SelectItem, SetExpr,
};

/// Separates a repeated column name from the suffix that keeps it unique inside the plan.
const DUPLICATE_MARK: char = '\u{0}';

/// The name a client sees for a plan's output field.
pub fn output_name(field_name: &str) -> &str {
    field_name
        .split_once(DUPLICATE_MARK)
        .map_or(field_name, |(name, _)| name)
}

/// An alias clients see as `name`, unique inside the plan thanks to a hidden `tag`; for a
/// column added after `name_columns` ran that may meet a column of the same name.
pub fn hidden_alias(name: &str, tag: &str) -> Ident {
    Ident::with_quote('"', format!("{name}{DUPLICATE_MARK}{tag}"))
}

/// Names the select-list items of the SELECTs directly in `body`.
pub fn name_columns(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => name_select_items(select),
        SetExpr::SetOperation { left, right, .. } => {
            name_columns(left);
            name_columns(right);
        }
        _ => {}
    }
}

fn name_select_items(select: &mut Select) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for item in &mut select.projection {
        let (expr, alias) = match item {
            SelectItem::UnnamedExpr(e) => {
                let name = figure_name(e);
                (e.clone(), Ident::new(name))
            }
            SelectItem::ExprWithAlias { expr, alias } => (expr.clone(), alias.clone()),
            _ => continue,
        };
        let key = if alias.quote_style.is_some() {
            alias.value.clone()
        } else {
            alias.value.to_lowercase()
        };
        let count = seen.entry(key.clone()).or_insert(0);
        *count += 1;
        let needs_alias = !matches!(
            item,
            SelectItem::UnnamedExpr(Expr::Identifier(_) | Expr::CompoundIdentifier(_))
        );
        if *count > 1 {
            let unique = format!("{key}{DUPLICATE_MARK}{count}");
            *item = SelectItem::ExprWithAlias {
                expr,
                alias: Ident::with_quote('"', unique),
            };
        } else if needs_alias && !alias.value.is_empty() {
            *item = SelectItem::ExprWithAlias { expr, alias };
        }
    }
}

/// PostgreSQL's FigureColname: the name an expression gives its result column.
fn figure_name(e: &Expr) -> String {
    figure(e).0
}

/// How sure a name is, as FigureColnameInternal ranks it: a cast's type name gives way to the
/// name of what it casts when that is a column or a function, and a CASE takes its ELSE's name
/// when that is such a name.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Strength {
    /// `?column?`.
    None,
    /// A type name of a cast, or `case`.
    Weak,
    /// A column, a function, a keyword construct.
    Strong,
}

fn figure(e: &Expr) -> (String, Strength) {
    let strong = |name: &str| (name.to_string(), Strength::Strong);
    match e {
        Expr::Identifier(i) => strong(&i.value),
        Expr::CompoundIdentifier(parts) => match parts.last() {
            Some(i) => strong(&i.value),
            None => ("?column?".into(), Strength::None),
        },
        Expr::Function(f) => match f.name.0.last() {
            Some(ObjectNamePart::Identifier(i)) => strong(&i.value.to_lowercase()),
            _ => ("?column?".into(), Strength::None),
        },
        Expr::Cast {
            kind: CastKind::Cast | CastKind::DoubleColon,
            expr,
            data_type,
            ..
        } => match figure(expr) {
            (name, Strength::Strong) => (name, Strength::Strong),
            _ => (type_name(data_type), Strength::Weak),
        },
        Expr::TypedString(ts) => (type_name(&ts.data_type), Strength::Weak),
        Expr::Interval(_) => ("interval".into(), Strength::Weak),
        Expr::Nested(inner) => figure(inner),
        Expr::Case { else_result, .. } => match else_result.as_deref().map(figure) {
            Some((name, Strength::Strong)) => (name, Strength::Strong),
            _ => ("case".into(), Strength::Weak),
        },
        Expr::Exists { .. } => strong("exists"),
        Expr::Array(_) => strong("array"),
        Expr::Extract { .. } => strong("extract"),
        Expr::Substring { shorthand, .. } => {
            strong(if *shorthand { "substr" } else { "substring" })
        }
        Expr::Position { .. } => strong("position"),
        Expr::Trim { .. } => strong("btrim"),
        Expr::Ceil { .. } => strong("ceil"),
        Expr::Floor { .. } => strong("floor"),
        Expr::Subquery(q) => match q.body.as_ref() {
            SetExpr::Select(s) => match s.projection.as_slice() {
                [SelectItem::ExprWithAlias { alias, .. }] => strong(&alias.value),
                [SelectItem::UnnamedExpr(inner)] => figure(inner),
                _ => ("?column?".into(), Strength::None),
            },
            _ => ("?column?".into(), Strength::None),
        },
        _ => ("?column?".into(), Strength::None),
    }
}

/// The internal type name PostgreSQL uses for a cast's column name.
fn type_name(t: &DataType) -> String {
    match t {
        DataType::Int(_) | DataType::Integer(_) | DataType::Int4(_) => "int4".into(),
        DataType::BigInt(_) | DataType::Int8(_) => "int8".into(),
        DataType::SmallInt(_) | DataType::Int2(_) => "int2".into(),
        DataType::Text => "text".into(),
        DataType::Varchar(_) | DataType::CharacterVarying(_) => "varchar".into(),
        DataType::Char(_) | DataType::Character(_) => "bpchar".into(),
        DataType::Boolean | DataType::Bool => "bool".into(),
        DataType::Real | DataType::Float4 => "float4".into(),
        DataType::DoublePrecision | DataType::Float8 | DataType::Double(_) => "float8".into(),
        DataType::Numeric(_) | DataType::Decimal(_) | DataType::Dec(_) => "numeric".into(),
        DataType::Date => "date".into(),
        DataType::Timestamp(_, tz) => match tz {
            datafusion::sql::sqlparser::ast::TimezoneInfo::WithTimeZone
            | datafusion::sql::sqlparser::ast::TimezoneInfo::Tz => "timestamptz".into(),
            _ => "timestamp".into(),
        },
        DataType::Interval { .. } => "interval".into(),
        DataType::Bytea => "bytea".into(),
        DataType::Uuid => "uuid".into(),
        DataType::Time(_, tz) => match tz {
            datafusion::sql::sqlparser::ast::TimezoneInfo::WithTimeZone
            | datafusion::sql::sqlparser::ast::TimezoneInfo::Tz => "timetz".into(),
            _ => "time".into(),
        },
        DataType::JSON => "json".into(),
        DataType::JSONB => "jsonb".into(),
        // An array cast names the column after the element type (`'{}'::int[]` is "int4").
        DataType::Array(
            datafusion::sql::sqlparser::ast::ArrayElemTypeDef::SquareBracket(element, _)
            | datafusion::sql::sqlparser::ast::ArrayElemTypeDef::AngleBracket(element),
        ) => type_name(element),
        // A quoted type name (`"char"`) names the column without its quotes.
        DataType::Custom(name, _) => match name.0.last() {
            Some(ObjectNamePart::Identifier(ident)) if ident.quote_style.is_some() => {
                ident.value.clone()
            }
            _ => t.to_string().to_lowercase(),
        },
        other => other.to_string().to_lowercase(),
    }
}
