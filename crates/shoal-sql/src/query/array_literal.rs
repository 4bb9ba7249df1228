//! PostgreSQL's array literals: the text `'{1,2,NULL}'`, `'{"a b",c}'` or `'{{1,2},{3,4}}'` cast to
//! an array type. DataFusion would cast such a string to a one-element list holding the whole
//! text, so the rewrite (see `rewrite.rs`) turns a literal cast to an array type into an ARRAY
//! constructor of its elements, each cast to the element type, following array_in's rules:
//! braces, commas, double quotes and backslash escapes, white space around unquoted elements
//! dropped, an unquoted NULL for a null, and sub-arrays of matching lengths.

use datafusion::sql::sqlparser::ast::{Array, CastKind, DataType, Expr, Value};

use crate::error::{code, SqlError, SqlResult};

/// One element of an array literal.
#[derive(Debug, PartialEq)]
pub enum Element {
    Null,
    Text(String),
    Array(Vec<Element>),
}

/// The ARRAY constructor that `text` cast to `array_type` (an array type) means.
pub fn to_expr(text: &str, array_type: &DataType) -> SqlResult<Expr> {
    let DataType::Array(element) = array_type else {
        return Err(SqlError::internal("array literal cast to a non-array type"));
    };
    let element_type = match element {
        datafusion::sql::sqlparser::ast::ArrayElemTypeDef::AngleBracket(t)
        | datafusion::sql::sqlparser::ast::ArrayElemTypeDef::SquareBracket(t, _)
        | datafusion::sql::sqlparser::ast::ArrayElemTypeDef::Parenthesis(t) => Some(&**t),
        datafusion::sql::sqlparser::ast::ArrayElemTypeDef::None => None,
    };
    let elements = parse(text)?;
    let nested = matches!(elements.first(), Some(Element::Array(_)));
    let constructor = constructor(&elements, element_type);
    // The elements carry their type already; the cast types an empty or all-NULL array. A
    // PostgreSQL array type covers every number of dimensions, DataFusion's list type one, so
    // a nested literal keeps the type its elements give it.
    if nested {
        return Ok(constructor);
    }
    Ok(Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(constructor),
        data_type: array_type.clone(),
        array: false,
        format: None,
    })
}

/// The ARRAY constructor of `text`'s elements as untyped literals: the array of `x = ANY
/// ('{1,2}')`, whose element type comes from the other operand.
pub fn untyped_constructor(text: &str) -> SqlResult<Expr> {
    Ok(constructor(&parse(text)?, None))
}

fn constructor(elements: &[Element], element_type: Option<&DataType>) -> Expr {
    let elem = elements
        .iter()
        .map(|e| match e {
            Element::Null => Expr::value(Value::Null),
            Element::Text(s) => {
                let literal = Expr::value(Value::SingleQuotedString(s.clone()));
                match element_type {
                    Some(t) => Expr::Cast {
                        kind: CastKind::Cast,
                        expr: Box::new(literal),
                        data_type: t.clone(),
                        array: false,
                        format: None,
                    },
                    None => literal,
                }
            }
            Element::Array(inner) => constructor(inner, element_type),
        })
        .collect();
    Expr::Array(Array { elem, named: true })
}

/// Parses an array literal into its elements.
pub fn parse(text: &str) -> SqlResult<Vec<Element>> {
    let malformed = |detail: &str| {
        SqlError::new(
            code::INVALID_TEXT_REPRESENTATION,
            format!("malformed array literal: \"{text}\""),
        )
        .with_detail(detail)
    };
    let chars: Vec<char> = text.chars().collect();
    let mut pos = skip_space(&chars, 0);
    if chars.get(pos) == Some(&'[') {
        return Err(SqlError::unsupported(
            "array literals with dimension decorations ([1:3]={...})",
        ));
    }
    if chars.get(pos) != Some(&'{') {
        return Err(malformed(
            "Array value must start with \"{\" or dimension information.",
        ));
    }
    let elements = parse_braces(&chars, &mut pos).map_err(|detail| malformed(&detail))?;
    if skip_space(&chars, pos) != chars.len() {
        return Err(malformed("Junk after closing right brace."));
    }
    check_dimensions(&elements).map_err(|detail| malformed(detail))?;
    Ok(elements)
}

fn skip_space(chars: &[char], mut pos: usize) -> usize {
    while chars.get(pos).is_some_and(|c| c.is_ascii_whitespace()) {
        pos += 1;
    }
    pos
}

/// Parses `{...}` starting at `pos` (on the `{`), leaving `pos` after the `}`. Errors are
/// PostgreSQL's details.
fn parse_braces(chars: &[char], pos: &mut usize) -> Result<Vec<Element>, String> {
    debug_assert_eq!(chars.get(*pos), Some(&'{'));
    *pos += 1;
    let mut elements = Vec::new();
    *pos = skip_space(chars, *pos);
    if chars.get(*pos) == Some(&'}') {
        *pos += 1;
        return Ok(elements);
    }
    loop {
        *pos = skip_space(chars, *pos);
        let element = match chars.get(*pos) {
            None => return Err("Unexpected end of input.".into()),
            Some('{') => Element::Array(parse_braces(chars, pos)?),
            Some('"') => Element::Text(parse_quoted(chars, pos)?),
            Some(&c) if c == ',' || c == '}' => {
                return Err(format!("Unexpected \"{c}\" character."));
            }
            Some(_) => parse_unquoted(chars, pos)?,
        };
        elements.push(element);
        *pos = skip_space(chars, *pos);
        match chars.get(*pos) {
            Some(',') => *pos += 1,
            Some('}') => {
                *pos += 1;
                return Ok(elements);
            }
            None => return Err("Unexpected end of input.".into()),
            Some(c) => return Err(format!("Unexpected \"{c}\" character.")),
        }
    }
}

fn parse_quoted(chars: &[char], pos: &mut usize) -> Result<String, String> {
    *pos += 1;
    let mut out = String::new();
    loop {
        match chars.get(*pos) {
            None => return Err("Unexpected end of input.".into()),
            Some('"') => {
                *pos += 1;
                return Ok(out);
            }
            Some('\\') => {
                *pos += 1;
                let Some(&c) = chars.get(*pos) else {
                    return Err("Unexpected end of input.".into());
                };
                out.push(c);
                *pos += 1;
            }
            Some(&c) => {
                out.push(c);
                *pos += 1;
            }
        }
    }
}

/// An unquoted element runs to the next `,` or `}`; white space at its ends is dropped, and
/// NULL (any case, not escaped) is a null.
fn parse_unquoted(chars: &[char], pos: &mut usize) -> Result<Element, String> {
    let mut out = String::new();
    let mut escaped_any = false;
    // Length of `out` up to its last character that is not trailing white space.
    let mut kept = 0;
    loop {
        match chars.get(*pos) {
            None => return Err("Unexpected end of input.".into()),
            Some(',' | '}') => break,
            Some(&c) if c == '{' || c == '"' => {
                return Err(format!("Unexpected \"{c}\" character."));
            }
            Some('\\') => {
                *pos += 1;
                let Some(&c) = chars.get(*pos) else {
                    return Err("Unexpected end of input.".into());
                };
                out.push(c);
                kept = out.len();
                escaped_any = true;
                *pos += 1;
            }
            Some(&c) => {
                out.push(c);
                if !c.is_ascii_whitespace() {
                    kept = out.len();
                }
                *pos += 1;
            }
        }
    }
    out.truncate(kept);
    if !escaped_any && out.eq_ignore_ascii_case("null") {
        return Ok(Element::Null);
    }
    Ok(Element::Text(out))
}

/// An array holds either sub-arrays or values, and its sub-arrays all have the same shape.
/// The error is PostgreSQL's detail.
fn check_dimensions(elements: &[Element]) -> Result<(), &'static str> {
    fn shape(e: &Element) -> Vec<usize> {
        let mut dims = Vec::new();
        let mut current = e;
        while let Element::Array(inner) = current {
            dims.push(inner.len());
            match inner.first() {
                Some(first) => current = first,
                None => break,
            }
        }
        dims
    }
    let Some(first) = elements.first() else {
        return Ok(());
    };
    let nested = matches!(first, Element::Array(_));
    let first_shape = shape(first);
    for e in elements {
        if matches!(e, Element::Array(_)) != nested {
            return Err("Unexpected array element.");
        }
        if shape(e) != first_shape {
            return Err("Multidimensional arrays must have sub-arrays with matching dimensions.");
        }
        if let Element::Array(inner) = e {
            check_dimensions(inner)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Element {
        Element::Text(s.into())
    }

    #[test]
    fn elements_quotes_escapes_and_nulls() {
        assert_eq!(parse("{}").unwrap(), vec![]);
        assert_eq!(parse(" { } ").unwrap(), vec![]);
        assert_eq!(
            parse("{1, 2 ,NULL,\"NULL\",\"a \\\"b\\\"\",c\\,d, e f }").unwrap(),
            vec![
                text("1"),
                text("2"),
                Element::Null,
                text("NULL"),
                text("a \"b\""),
                text("c,d"),
                text("e f"),
            ]
        );
        assert_eq!(
            parse("{{1,2},{3,4}}").unwrap(),
            vec![
                Element::Array(vec![text("1"), text("2")]),
                Element::Array(vec![text("3"), text("4")]),
            ]
        );
    }

    #[test]
    fn malformed_literals_are_refused_with_postgresql_details() {
        for (literal, detail) in [
            ("{1,2", "Unexpected end of input."),
            (
                "1,2}",
                "Array value must start with \"{\" or dimension information.",
            ),
            ("{1,,2}", "Unexpected \",\" character."),
            ("{1,2}x", "Junk after closing right brace."),
            ("{{1},2}", "Unexpected array element."),
            (
                "{{1},{2,3}}",
                "Multidimensional arrays must have sub-arrays with matching dimensions.",
            ),
        ] {
            let e = parse(literal).unwrap_err();
            assert_eq!(e.code, code::INVALID_TEXT_REPRESENTATION, "{literal}");
            assert_eq!(e.detail.as_deref(), Some(detail), "{literal}");
        }
    }
}
