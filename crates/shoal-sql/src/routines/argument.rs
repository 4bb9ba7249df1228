//! The check that a routine's argument has a type PostgreSQL would pass to its parameter.
//! A call's argument whose type the call's text does not show (a column, an expression) is
//! rewritten as `CAST(shoal_routine_arg(value, CAST(NULL AS type), 'name', position) AS type)`:
//! planning asks `shoal_routine_arg` for its result type, which fails with 42883 when the
//! value's type does not convert implicitly (`routines::implicitly_castable`), as PostgreSQL
//! finds no such function. Otherwise it passes the value on unchanged and is simplified away.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, FieldRef};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    TypeSignature, Volatility,
};
use datafusion::sql::sqlparser::ast::{self, Expr};

use crate::error::{code, SqlError};
use crate::query::functions::sql_error;
use crate::query::rewrite::function_call;

const NAME: &str = "shoal_routine_arg";

/// `value` checked as argument `position` (from 1) of routine `routine`, of type `target`.
pub(super) fn checked(value: Expr, target: ast::DataType, routine: &str, position: usize) -> Expr {
    let text = |s: String| Expr::value(ast::Value::SingleQuotedString(s));
    let typed_null = super::cast(Expr::value(ast::Value::Null), target.clone());
    let check = function_call(
        NAME,
        vec![
            value,
            typed_null,
            text(routine.to_string()),
            Expr::value(ast::Value::Number(position.to_string(), false)),
        ],
    );
    super::cast(check, target)
}

/// The argument without its plan-time check, cast to the parameter's type: for a call that
/// runs its body, whose arguments are evaluated on their own (DataFusion types an integer
/// constant such as `n - 1` as bigint, PostgreSQL as integer, so the check would refuse it).
pub(super) fn unchecked(e: Expr) -> Expr {
    if let Expr::Cast {
        expr, data_type, ..
    } = &e
    {
        // A variadic parameter's array of arguments (`routines::variadic_array`).
        if let Expr::Array(array) = expr.as_ref() {
            let elem = array.elem.iter().cloned().map(unchecked).collect();
            let array = Expr::Array(ast::Array {
                elem,
                named: array.named,
            });
            return super::cast(array, data_type.clone());
        }
        if let Expr::Function(f) = expr.as_ref() {
            if crate::query::rewrite::object_name_parts(&f.name)
                .last()
                .map(String::as_str)
                == Some(NAME)
            {
                if let ast::FunctionArguments::List(list) = &f.args {
                    if let Some(ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(value))) =
                        list.args.first()
                    {
                        return super::cast(
                            Expr::Nested(Box::new(value.clone())),
                            data_type.clone(),
                        );
                    }
                }
            }
        }
    }
    e
}

pub fn register(state: &mut datafusion::execution::SessionState) {
    use datafusion::execution::FunctionRegistry;
    state
        .register_udf(Arc::new(ScalarUDF::new_from_impl(RoutineArgument {
            signature: Signature::new(TypeSignature::Any(4), Volatility::Immutable),
        })))
        .expect("function registration cannot fail");
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct RoutineArgument {
    signature: Signature,
}

impl ScalarUDFImpl for RoutineArgument {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(arg_types[0].clone())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let (value, target) = (&args.arg_fields[0], &args.arg_fields[1]);
        if !super::implicitly_castable(value.data_type(), target.data_type()) {
            let literal = |i: usize| match args.scalar_arguments.get(i).copied().flatten() {
                Some(ScalarValue::Utf8(Some(s))) => s.clone(),
                Some(v) => v.to_string(),
                None => String::new(),
            };
            let type_name = |f: &FieldRef| crate::dml::pg_type_name_of_arrow(f.data_type());
            return Err(sql_error(
                SqlError::new(
                    code::UNDEFINED_FUNCTION,
                    format!(
                        "function {}() does not exist for argument {} of type {}: its parameter is {}",
                        literal(2),
                        literal(3),
                        type_name(value),
                        type_name(target),
                    ),
                )
                .with_hint(
                    "No function matches the given name and argument types. You might need to add explicit type casts.",
                ),
            ));
        }
        Ok(value.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        Ok(args.args[0].clone())
    }

    fn simplify(
        &self,
        mut args: Vec<datafusion::prelude::Expr>,
        _info: &SimplifyContext,
    ) -> DfResult<ExprSimplifyResult> {
        Ok(ExprSimplifyResult::Simplified(args.swap_remove(0)))
    }
}
