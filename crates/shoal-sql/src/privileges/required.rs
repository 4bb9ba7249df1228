//! What a statement needs, read off its syntax tree: the relations it reads (every table in a
//! FROM, at any depth, CTE names aside) need SELECT; a write's target needs INSERT, UPDATE or
//! DELETE, and SELECT too when the statement reads its columns (a WHERE, a SET value or
//! RETURNING that names one, as PostgreSQL asks); row locks need UPDATE; TRUNCATE needs
//! TRUNCATE; COPY needs what the statement it stands for needs; DDL needs ownership of what it
//! changes and CREATE on the schema it creates in; a foreign key needs REFERENCES on the table
//! it references. Names resolve as the statement will resolve them (`PlanScope`), and objects
//! that do not exist need nothing here: the statement itself reports them.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self, Expr, ObjectName, ObjectType, Query, SelectItem, Statement, TableFactor, Visit, Visitor,
};
use shoal_storage::catalog::{Oid, RelationKind};
use shoal_storage::catalog_privileges::{ObjectClass, Privileges, DATABASE_OID};

use super::{Need, Wanted};
use crate::error::{code, SqlError, SqlResult};
use crate::session::Session;

/// What `stmt` needs of the acting role (and of the owners of the views it reads).
pub fn required(session: &Session, stmt: &Statement) -> SqlResult<Vec<Need>> {
    let mut needs = Needs {
        session,
        list: Vec::new(),
    };
    needs.statement(stmt)?;
    Ok(needs.list)
}

struct Needs<'a> {
    session: &'a Session,
    list: Vec<Need>,
}

impl Needs<'_> {
    fn statement(&mut self, stmt: &Statement) -> SqlResult<()> {
        match stmt {
            Statement::Query(q) => {
                self.reads(q.as_ref());
                if !q.locks.is_empty() {
                    // FOR UPDATE / FOR SHARE: UPDATE on the tables of the top FROM.
                    if let ast::SetExpr::Select(select) = q.body.as_ref() {
                        for t in &select.from {
                            for name in joined_tables(t) {
                                self.relation(name, Privileges::UPDATE);
                            }
                        }
                    }
                }
            }
            Statement::Insert(insert) => {
                if let ast::TableObject::TableName(name) = &insert.table {
                    self.relation(name, Privileges::INSERT);
                    if let Some(ast::OnInsert::OnConflict(c)) = &insert.on {
                        if let ast::OnConflictAction::DoUpdate(u) = &c.action {
                            self.relation(name, Privileges::UPDATE);
                            let reads = u.assignments.iter().any(|a| names_a_column(&a.value))
                                || u.selection.as_ref().is_some_and(names_a_column);
                            if reads {
                                self.relation(name, Privileges::SELECT);
                            }
                        }
                    }
                    if insert.returning.is_some() {
                        self.relation(name, Privileges::SELECT);
                    }
                }
                self.reads(insert);
            }
            Statement::Update(update) => {
                let mut target = None;
                if let TableFactor::Table { name, .. } = &update.table.relation {
                    self.relation(name, Privileges::UPDATE);
                    target = Some(name);
                }
                let reads = update.assignments.iter().any(|a| names_a_column(&a.value))
                    || update.selection.as_ref().is_some_and(names_a_column)
                    || returning_reads(update.returning.as_deref());
                if let (Some(name), true) = (target, reads) {
                    self.relation(name, Privileges::SELECT);
                }
                for j in &update.table.joins {
                    self.reads(j);
                }
                for a in &update.assignments {
                    self.reads(&a.value);
                }
                match &update.from {
                    Some(ast::UpdateTableFromKind::BeforeSet(from))
                    | Some(ast::UpdateTableFromKind::AfterSet(from)) => self.reads(from),
                    None => {}
                }
                self.reads(&update.selection);
                self.reads(&update.returning);
            }
            Statement::Delete(delete) => {
                let from = match &delete.from {
                    ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
                };
                let reads = delete.selection.as_ref().is_some_and(names_a_column)
                    || returning_reads(delete.returning.as_deref());
                for t in from {
                    if let TableFactor::Table { name, .. } = &t.relation {
                        self.relation(name, Privileges::DELETE);
                        if reads {
                            self.relation(name, Privileges::SELECT);
                        }
                    }
                    self.reads(&t.joins);
                }
                self.reads(&delete.using);
                self.reads(&delete.selection);
                self.reads(&delete.returning);
            }
            Statement::Truncate(t) => {
                for target in &t.table_names {
                    self.relation(&target.name, Privileges::TRUNCATE);
                }
            }
            Statement::Copy {
                source, to, target, ..
            } => {
                if !matches!(target, ast::CopyTarget::Stdin | ast::CopyTarget::Stdout) {
                    return Err(SqlError::new(
                        code::INSUFFICIENT_PRIVILEGE,
                        match to {
                            true => "must be superuser or have privileges of the pg_write_server_files role to COPY to a file",
                            false => "must be superuser or have privileges of the pg_read_server_files role to COPY from a file",
                        },
                    ));
                }
                match source {
                    ast::CopySource::Table { table_name, .. } => {
                        let wanted = match to {
                            true => Privileges::SELECT,
                            false => Privileges::INSERT,
                        };
                        self.relation(table_name, wanted);
                    }
                    ast::CopySource::Query(q) => self.reads(q.as_ref()),
                }
            }
            Statement::Explain { statement, .. } => self.statement(statement)?,
            Statement::Declare { stmts } => {
                for d in stmts {
                    self.reads(&d.for_query);
                }
            }
            Statement::CreateTable(create) => {
                self.create_in_schema(&create.name);
                if let Some(q) = &create.query {
                    self.reads(q.as_ref());
                }
                for c in &create.constraints {
                    if let ast::TableConstraint::ForeignKey(fk) = c {
                        self.relation(&fk.foreign_table, Privileges::REFERENCES);
                    }
                }
                for column in &create.columns {
                    for option in &column.options {
                        if let ast::ColumnOption::ForeignKey(fk) = &option.option {
                            self.relation(&fk.foreign_table, Privileges::REFERENCES);
                        }
                    }
                }
            }
            Statement::CreateView(view) => {
                self.create_in_schema(&view.name);
                if view.or_replace {
                    self.owner_if_exists(&view.name);
                }
            }
            Statement::CreateSequence { name, .. } => self.create_in_schema(name),
            Statement::CreateType { name, .. } => self.create_in_schema(name),
            Statement::CreateIndex(index) => self.owner_if_exists(&index.table_name),
            Statement::AlterTable(alter) => {
                self.owner_if_exists(&alter.name);
                for op in &alter.operations {
                    if let ast::AlterTableOperation::AddConstraint {
                        constraint: ast::TableConstraint::ForeignKey(fk),
                        ..
                    } = op
                    {
                        self.relation(&fk.foreign_table, Privileges::REFERENCES);
                    }
                }
            }
            Statement::AlterIndex { name, .. } | Statement::AlterView { name, .. } => {
                self.owner_if_exists(name)
            }
            Statement::Drop {
                object_type, names, ..
            } => {
                if matches!(
                    object_type,
                    ObjectType::Table | ObjectType::View | ObjectType::Sequence | ObjectType::Index
                ) {
                    for name in names {
                        self.drop_relation(name);
                    }
                }
                if matches!(object_type, ObjectType::Schema) {
                    for name in names {
                        self.owner_of_schema(&crate::ddl::ident_of(&name.to_string()));
                    }
                }
            }
            Statement::CreateSchema { .. } => self.list.push(Need {
                object: (ObjectClass::Database, DATABASE_OID),
                kind: None,
                what: Wanted::All(Privileges::CREATE),
                name: crate::query::schema::DATABASE_NAME.to_string(),
                on_behalf_of: None,
            }),
            Statement::Comment {
                object_type,
                object_name,
                ..
            } => {
                let mut name = object_name.clone();
                match object_type {
                    ast::CommentObject::Table | ast::CommentObject::View => {
                        self.owner_if_exists(&name)
                    }
                    // COMMENT ON COLUMN t.c: the table's owner.
                    ast::CommentObject::Column if name.0.len() > 1 => {
                        name.0.pop();
                        self.owner_if_exists(&name);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// SELECT on every relation `node` reads.
    fn reads<V: Visit>(&mut self, node: &V) {
        let mut visitor = ReadRelations {
            ctes: Vec::new(),
            names: Vec::new(),
        };
        let _ = node.visit(&mut visitor);
        for name in visitor.names {
            self.relation(&name, Privileges::SELECT);
        }
    }

    /// `wanted` on the relation `name` resolves to (nothing when it does not resolve).
    fn relation(&mut self, name: &ObjectName, wanted: Privileges) {
        let Some((schema, kind, oid)) = self.resolve(name) else {
            return;
        };
        self.schema_usage(&schema);
        let relation = crate::ddl::split_name(name).1;
        self.list.push(Need {
            object: (ObjectClass::Relation, oid),
            kind: Some(kind),
            what: Wanted::All(wanted),
            name: relation.clone(),
            on_behalf_of: None,
        });
        if kind == RelationKind::View && wanted == Privileges::SELECT {
            self.view_owner_reads(oid);
        }
    }

    /// A view's query runs with its owner's privileges: the owner needs SELECT on what it reads,
    /// and a view it reads runs with that view's owner's, down the chain.
    fn view_owner_reads(&mut self, view: Oid) {
        let catalog = self.session.engine.catalog.read();
        let mut pending = vec![view];
        let mut seen = vec![view];
        while let Some(view) = pending.pop() {
            let Some(def) = catalog.views.get(&view) else {
                continue;
            };
            let owner = catalog.owner_of((ObjectClass::Relation, view));
            for oid in &def.depends_on {
                let (kind, name) = if let Some(t) = catalog.tables.get(oid) {
                    (RelationKind::Table, t.name.clone())
                } else if let Some(v) = catalog.views.get(oid) {
                    if !seen.contains(oid) {
                        seen.push(*oid);
                        pending.push(*oid);
                    }
                    (RelationKind::View, v.name.clone())
                } else {
                    continue;
                };
                self.list.push(Need {
                    object: (ObjectClass::Relation, *oid),
                    kind: Some(kind),
                    what: Wanted::All(Privileges::SELECT),
                    name,
                    on_behalf_of: Some(owner),
                });
            }
        }
    }

    fn resolve(&self, name: &ObjectName) -> Option<(String, RelationKind, Oid)> {
        let (schema, relation) = crate::ddl::split_name(name);
        if matches!(
            schema.as_deref(),
            Some("pg_catalog") | Some("information_schema")
        ) {
            return None;
        }
        let (schema, kind, oid) = self
            .session
            .scope
            .resolve_relation(schema.as_deref(), &relation)?;
        // The system catalogs' virtual tables are readable by everyone.
        (schema != "pg_catalog" && schema != "information_schema").then_some((schema, kind, oid))
    }

    /// USAGE on a schema whose objects the statement uses.
    fn schema_usage(&mut self, schema: &str) {
        if let Some(oid) = self.schema_oid(schema) {
            self.list.push(Need {
                object: (ObjectClass::Schema, oid),
                kind: None,
                what: Wanted::All(Privileges::USAGE),
                name: schema.to_string(),
                on_behalf_of: None,
            });
        }
    }

    fn schema_oid(&self, schema: &str) -> Option<Oid> {
        self.session
            .engine
            .catalog
            .read()
            .schemas
            .get(schema)
            .map(|s| s.oid)
    }

    /// CREATE on the schema a new object named `name` goes into.
    fn create_in_schema(&mut self, name: &ObjectName) {
        let schema = match crate::ddl::split_name(name).0 {
            Some(schema) => Some(schema),
            None => self.session.scope.creation_schema(),
        };
        let Some(schema) = schema else {
            return;
        };
        if let Some(oid) = self.schema_oid(&schema) {
            self.list.push(Need {
                object: (ObjectClass::Schema, oid),
                kind: None,
                what: Wanted::All(Privileges::CREATE),
                name: schema,
                on_behalf_of: None,
            });
        }
    }

    /// Ownership of the relation `name` names, when it exists.
    fn owner_if_exists(&mut self, name: &ObjectName) {
        if let Some((_, kind, oid)) = self.resolve(name) {
            self.list.push(Need {
                object: (ObjectClass::Relation, oid),
                kind: Some(kind),
                what: Wanted::Owner,
                name: crate::ddl::split_name(name).1,
                on_behalf_of: None,
            });
        }
    }

    /// DROP: the relation's owner or its schema's owner may drop it (PostgreSQL's rule).
    fn drop_relation(&mut self, name: &ObjectName) {
        let Some((schema, kind, oid)) = self.resolve(name) else {
            return;
        };
        let catalog = self.session.engine.catalog.read();
        let role = match super::acting_role(self.session) {
            Ok(role) => role.oid,
            Err(_) => return,
        };
        let schema_owner = catalog
            .schemas
            .get(&schema)
            .map(|s| catalog.owner_of((ObjectClass::Schema, s.oid)));
        if schema_owner.is_some_and(|owner| catalog.has_privileges_of_role(role, owner)) {
            return;
        }
        drop(catalog);
        self.list.push(Need {
            object: (ObjectClass::Relation, oid),
            kind: Some(kind),
            what: Wanted::Owner,
            name: crate::ddl::split_name(name).1,
            on_behalf_of: None,
        });
    }

    fn owner_of_schema(&mut self, schema: &str) {
        if let Some(oid) = self.schema_oid(schema) {
            self.list.push(Need {
                object: (ObjectClass::Schema, oid),
                kind: None,
                what: Wanted::Owner,
                name: schema.to_string(),
                on_behalf_of: None,
            });
        }
    }
}

/// The tables named in one FROM item and its joins (not in subqueries).
fn joined_tables(t: &ast::TableWithJoins) -> Vec<&ObjectName> {
    std::iter::once(&t.relation)
        .chain(t.joins.iter().map(|j| &j.relation))
        .filter_map(|f| match f {
            TableFactor::Table { name, .. } => Some(name),
            _ => None,
        })
        .collect()
}

/// Whether an expression reads a column (names one, outside a subquery's own FROM).
fn names_a_column(e: &Expr) -> bool {
    let mut found = false;
    let _ = ast::visit_expressions(e, |e| {
        if matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) {
            found = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    found
}

fn returning_reads(returning: Option<&[SelectItem]>) -> bool {
    returning.is_some_and(|items| {
        items.iter().any(|item| match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                names_a_column(e)
            }
            _ => true,
        })
    })
}

/// Collects the relations read by FROM items at any depth, leaving out names that refer to a
/// CTE of an enclosing query.
struct ReadRelations {
    ctes: Vec<HashSet<String>>,
    names: Vec<ObjectName>,
}

impl Visitor for ReadRelations {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        let names = query
            .with
            .iter()
            .flat_map(|w| w.cte_tables.iter())
            .map(|c| crate::ddl::ident_of(&c.alias.name.to_string()))
            .collect();
        self.ctes.push(names);
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &Query) -> ControlFlow<()> {
        self.ctes.pop();
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, args, .. } = factor {
            // A set-returning function in FROM (generate_series(...)) reads no relation.
            if args.is_some() {
                return ControlFlow::Continue(());
            }
            let cte = name.0.len() == 1 && {
                let bare = crate::ddl::ident_of(&name.to_string());
                self.ctes.iter().any(|level| level.contains(&bare))
            };
            if !cte {
                self.names.push(name.clone());
            }
        }
        ControlFlow::Continue(())
    }
}
