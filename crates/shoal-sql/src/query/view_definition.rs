//! A view's definition as pg_get_viewdef and pg_views show it. A view stores its query with
//! every relation it reads qualified by schema (CREATE VIEW binds the names then, as
//! PostgreSQL does); the definition drops the schema where the current search path finds the
//! same relation by its bare name, and ends with a semicolon, as PostgreSQL prints it (pg_dump
//! cuts that last character off).

use datafusion::sql::sqlparser::ast::{self, ObjectName, ObjectNamePart};
use shoal_storage::catalog::ViewDef;

use crate::query::scope::PlanScope;

pub fn view_definition(scope: &PlanScope, view: &ViewDef) -> String {
    let sql = match crate::parse::parse_statements(&view.query_sql) {
        Ok(mut statements) if statements.len() == 1 => {
            let mut changed = false;
            let _ = ast::visit_relations_mut(&mut statements[0], |name| {
                if let Some(bare) = visible_bare_name(scope, name) {
                    *name = bare;
                    changed = true;
                }
                std::ops::ControlFlow::<()>::Continue(())
            });
            match changed {
                true => statements[0].to_string(),
                false => view.query_sql.clone(),
            }
        }
        _ => view.query_sql.clone(),
    };
    format!("{};", crate::dml::restore_locking_syntax(&sql))
}

/// `schema.name` as the bare `name`, when the search path finds the same relation by it.
fn visible_bare_name(scope: &PlanScope, name: &ObjectName) -> Option<ObjectName> {
    let [ObjectNamePart::Identifier(_), ObjectNamePart::Identifier(bare)] = name.0.as_slice()
    else {
        return None;
    };
    let (schema, relation) = crate::ddl::split_name(name);
    let qualified = scope.resolve_relation(schema.as_deref(), &relation)?;
    let found = scope.resolve_relation(None, &relation)?;
    (found.2 == qualified.2).then(|| ObjectName(vec![ObjectNamePart::Identifier(bare.clone())]))
}
