//! The DataFusion catalog tree over Shoal's catalog: one catalog ("postgres", the only
//! database), with a schema provider per SQL schema plus a virtual default schema that resolves
//! unqualified names through pg_catalog and the session's search_path, as PostgreSQL does.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, CatalogProviderList, SchemaProvider};
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::datasource::TableProvider;
use shoal_storage::catalog::RelationKind;

use crate::query::column_provider::ColumnTableProvider;
use crate::query::provider::RowTableProvider;
use crate::query::scope::PlanScope;
use crate::query::{information_schema, pg_catalog};

pub const DATABASE_NAME: &str = "postgres";
/// The name DataFusion uses for the default schema; it stands for "the search_path".
pub const SEARCH_PATH_SCHEMA: &str = "$search_path";

// DataFusion 55's catalog traits have `Any` as a supertrait (downcasting goes through
// `dyn CatalogProvider::downcast_ref`), so none of these impls has an `as_any` method.
#[derive(Debug)]
pub struct ShoalCatalogList {
    catalog: Arc<ShoalCatalog>,
}

impl ShoalCatalogList {
    pub fn new(scope: Arc<PlanScope>) -> Self {
        ShoalCatalogList {
            catalog: Arc::new(ShoalCatalog { scope }),
        }
    }
}

impl CatalogProviderList for ShoalCatalogList {
    fn register_catalog(
        &self,
        _name: String,
        _catalog: Arc<dyn CatalogProvider>,
    ) -> Option<Arc<dyn CatalogProvider>> {
        None
    }

    fn catalog_names(&self) -> Vec<String> {
        vec![DATABASE_NAME.to_string()]
    }

    fn catalog(&self, name: &str) -> Option<Arc<dyn CatalogProvider>> {
        (name == DATABASE_NAME).then(|| self.catalog.clone() as Arc<dyn CatalogProvider>)
    }
}

#[derive(Debug)]
pub struct ShoalCatalog {
    scope: Arc<PlanScope>,
}

impl CatalogProvider for ShoalCatalog {
    fn schema_names(&self) -> Vec<String> {
        self.scope
            .engine
            .catalog
            .read()
            .schemas
            .keys()
            .cloned()
            .collect()
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        let known = name == SEARCH_PATH_SCHEMA
            || self.scope.engine.catalog.read().schemas.contains_key(name);
        known.then(|| {
            Arc::new(ShoalSchema {
                scope: self.scope.clone(),
                name: (name != SEARCH_PATH_SCHEMA).then(|| name.to_string()),
            }) as Arc<dyn SchemaProvider>
        })
    }
}

#[derive(Debug)]
pub struct ShoalSchema {
    scope: Arc<PlanScope>,
    /// None: the search_path.
    name: Option<String>,
}

#[async_trait]
impl SchemaProvider for ShoalSchema {
    fn table_names(&self) -> Vec<String> {
        let catalog = self.scope.engine.catalog.read();
        let schemas = match &self.name {
            Some(n) => vec![n.clone()],
            None => self.scope.lookup_schemas(),
        };
        catalog
            .tables
            .values()
            .filter(|t| schemas.contains(&t.schema))
            .map(|t| t.name.clone())
            .collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        if self.name.is_none() {
            if let Some(transition) = self.scope.transition_table(name) {
                return Ok(Some(transition));
            }
        }
        let schemas = match &self.name {
            Some(n) => vec![n.clone()],
            None => self.scope.lookup_schemas(),
        };
        for schema in schemas {
            if let Some(t) = table_in_schema(&self.scope, &schema, name)? {
                return Ok(Some(t));
            }
        }
        Ok(None)
    }

    fn table_exist(&self, name: &str) -> bool {
        if self.name.is_none() && self.scope.transition_table(name).is_some() {
            return true;
        }
        let schemas = match &self.name {
            Some(n) => vec![n.clone()],
            None => self.scope.lookup_schemas(),
        };
        let catalog = self.scope.engine.catalog.read();
        schemas.iter().any(|s| catalog.lookup(s, name).is_some())
    }
}

fn table_in_schema(
    scope: &Arc<PlanScope>,
    schema: &str,
    name: &str,
) -> DfResult<Option<Arc<dyn TableProvider>>> {
    match schema {
        "pg_catalog" => return Ok(pg_catalog::table(scope, name)),
        "information_schema" => return Ok(information_schema::table(scope, name)),
        _ => {}
    }
    if let Some(view) = crate::statement_stats::views::table(scope, schema, name) {
        return Ok(Some(view));
    }
    let catalog = scope.engine.catalog.read();
    let Some((kind, oid)) = catalog.lookup(schema, name) else {
        return Ok(None);
    };
    match kind {
        RelationKind::Table => {
            let def = catalog.tables.get(&oid).cloned().ok_or_else(|| {
                DataFusionError::Plan(format!("relation \"{name}\" does not exist"))
            })?;
            let capture = scope.capture_for(oid).is_some();
            if def.access_method == shoal_storage::catalog::AccessMethod::Columnar {
                let table = scope.engine.db.column_table(oid as u64).ok_or_else(|| {
                    DataFusionError::Plan(format!("relation \"{name}\" does not exist"))
                })?;
                return Ok(Some(Arc::new(ColumnTableProvider::new(
                    def,
                    table,
                    scope.clone(),
                    capture,
                ))));
            }
            let table = scope.engine.db.table(oid as u64).ok_or_else(|| {
                DataFusionError::Plan(format!("relation \"{name}\" does not exist"))
            })?;
            Ok(Some(Arc::new(RowTableProvider::new(
                def,
                table,
                scope.clone(),
                capture,
            ))))
        }
        RelationKind::Sequence => Ok(catalog
            .sequences
            .get(&oid)
            .map(|s| pg_catalog::sequence_relation(s))),
        // Views are expanded into subqueries before planning; indexes are not readable.
        RelationKind::View | RelationKind::Index => Ok(None),
    }
}
