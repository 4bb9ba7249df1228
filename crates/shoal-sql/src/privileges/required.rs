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
    self, ObjectName, ObjectType, Query, Statement, TableFactor, Visit, Visitor,
};
use shoal_storage::catalog::{Oid, RelationKind};
use shoal_storage::catalog_privileges::{ObjectClass, Privileges, DATABASE_OID};

use super::columns::{column_refs, columns_named, select_list_refs};
use super::{Columns, Need, Wanted};
use crate::ddl::ident;
use crate::error::{code, SqlError, SqlResult};
use crate::session::Session;

/// How many inlined function bodies (and views) one statement's check follows.
const INLINED_DEPTH_MAX: usize = 256;

/// What `stmt` needs of the acting role (and of the owners of the views it reads).
pub fn required(session: &Session, stmt: &Statement) -> SqlResult<Vec<Need>> {
    let mut needs = Needs {
        session,
        list: Vec::new(),
    };
    needs.statement(stmt)?;
    // Statements that run queries now (DDL such as CREATE VIEW only records them).
    if matches!(
        stmt,
        Statement::Query(_)
            | Statement::Insert(_)
            | Statement::Update(_)
            | Statement::Delete(_)
            | Statement::Declare { .. }
            | Statement::Explain { .. }
            | Statement::Copy { .. }
    ) {
        needs.inlined_bodies(stmt, &mut HashSet::new())?;
    }
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
                    // FOR UPDATE / FOR SHARE: UPDATE on the tables of the top FROM (on any
                    // one of their columns, PostgreSQL's rule for a statement that names none).
                    if let ast::SetExpr::Select(select) = q.body.as_ref() {
                        for t in &select.from {
                            for name in joined_tables(t) {
                                self.relation(name, Privileges::UPDATE, Columns::Any);
                            }
                        }
                    }
                }
            }
            Statement::Insert(insert) => {
                if let ast::TableObject::TableName(name) = &insert.table {
                    let all = self.columns_of(name);
                    let inserted = if !insert.columns.is_empty() {
                        insert.columns.iter().filter_map(last_ident).collect()
                    } else if let Some(ast::SetExpr::Values(v)) =
                        insert.source.as_ref().map(|q| q.body.as_ref())
                    {
                        let width = v.rows.iter().map(|r| r.len()).max().unwrap_or(0);
                        all.iter().take(width).cloned().collect()
                    } else if insert.source.is_some() {
                        all.clone()
                    } else {
                        Vec::new()
                    };
                    self.relation(name, Privileges::INSERT, each_or_any(inserted));
                    let label = match &insert.table_alias {
                        Some(a) => ident(&a.alias),
                        None => crate::ddl::split_name(name).1,
                    };
                    if let Some(ast::OnInsert::OnConflict(c)) = &insert.on {
                        if let ast::OnConflictAction::DoUpdate(u) = &c.action {
                            let updated = assigned_columns(&u.assignments);
                            self.relation(name, Privileges::UPDATE, each_or_any(updated));
                            let mut refs = column_refs(&u.assignments);
                            refs.extend(column_refs(&u.selection));
                            let read = columns_named(&refs, &label, &all, false);
                            if !read.is_empty() {
                                self.relation(name, Privileges::SELECT, Columns::Each(read));
                            }
                        }
                    }
                    if let Some(returning) = &insert.returning {
                        let refs = select_list_refs(returning);
                        let read = columns_named(&refs, &label, &all, false);
                        self.relation(name, Privileges::SELECT, each_or_any(read));
                    }
                }
                self.reads(&insert.source);
                self.reads(&insert.on);
                self.reads(&insert.returning);
            }
            Statement::Update(update) => {
                if let TableFactor::Table { name, alias, .. } = &update.table.relation {
                    let all = self.columns_of(name);
                    let updated = assigned_columns(&update.assignments);
                    self.relation(name, Privileges::UPDATE, each_or_any(updated));
                    let mut refs = column_refs(&update.assignments);
                    refs.extend(column_refs(&update.selection));
                    refs.extend(select_list_refs(update.returning.as_deref().unwrap_or(&[])));
                    let read = columns_named(&refs, &label_of(name, alias.as_ref()), &all, false);
                    if !read.is_empty() {
                        self.relation(name, Privileges::SELECT, Columns::Each(read));
                    }
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
                let mut refs = column_refs(&delete.selection);
                refs.extend(select_list_refs(delete.returning.as_deref().unwrap_or(&[])));
                for t in from {
                    if let TableFactor::Table { name, alias, .. } = &t.relation {
                        self.relation(name, Privileges::DELETE, Columns::Relation);
                        let all = self.columns_of(name);
                        let read =
                            columns_named(&refs, &label_of(name, alias.as_ref()), &all, false);
                        if !read.is_empty() {
                            self.relation(name, Privileges::SELECT, Columns::Each(read));
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
                    self.relation(&target.name, Privileges::TRUNCATE, Columns::Relation);
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
                    ast::CopySource::Table {
                        table_name,
                        columns,
                    } => {
                        let wanted = match to {
                            true => Privileges::SELECT,
                            false => Privileges::INSERT,
                        };
                        let columns = match columns.is_empty() {
                            true => self.columns_of(table_name),
                            false => columns.iter().map(ident).collect(),
                        };
                        self.relation(table_name, wanted, Columns::Each(columns));
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
                        self.references(fk);
                    }
                }
                for column in &create.columns {
                    for option in &column.options {
                        if let ast::ColumnOption::ForeignKey(fk) = &option.option {
                            self.references(fk);
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
            // Replacing or dropping a routine needs its ownership, which `routines::define`
            // checks.
            Statement::CreateFunction(f) => self.create_in_schema(&f.name),
            Statement::CreateProcedure { name, .. } => self.create_in_schema(name),
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
                        self.references(fk);
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
                columns: Columns::Relation,
            }),
            // LOCK TABLE in ACCESS SHARE mode, the one Shoal takes, needs SELECT.
            Statement::Lock(lock) => {
                for target in &lock.tables {
                    self.relation(&target.name, Privileges::SELECT, Columns::Relation);
                }
            }
            Statement::Comment {
                object_type,
                object_name,
                ..
            } => {
                let mut name = object_name.clone();
                match object_type {
                    ast::CommentObject::Table
                    | ast::CommentObject::View
                    | ast::CommentObject::Sequence
                    | ast::CommentObject::Index => self.owner_if_exists(&name),
                    ast::CommentObject::Schema => {
                        self.owner_of_schema(&crate::ddl::ident_of(&name.to_string()))
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

    /// SELECT on every relation `node` reads, on the columns it uses of each.
    fn reads<V: Visit>(&mut self, node: &V) {
        let mut visitor = ReadRelations {
            ctes: Vec::new(),
            read: Vec::new(),
        };
        let _ = node.visit(&mut visitor);
        if visitor.read.is_empty() {
            return;
        }
        let refs = column_refs(node);
        for (name, label, renamed) in visitor.read {
            let all = self.columns_of(&name);
            let used = columns_named(&refs, &label, &all, renamed);
            self.relation(&name, Privileges::SELECT, each_or_any(used));
        }
    }

    /// REFERENCES on the columns a foreign key references.
    fn references(&mut self, fk: &ast::ForeignKeyConstraint) {
        let columns = match fk.referred_columns.is_empty() {
            // The referenced table's primary key: the table's privilege is asked for.
            true => Columns::Relation,
            false => Columns::Each(fk.referred_columns.iter().map(ident).collect()),
        };
        self.relation(&fk.foreign_table, Privileges::REFERENCES, columns);
    }

    /// The columns of the table or view `name` resolves to.
    fn columns_of(&self, name: &ObjectName) -> Vec<String> {
        match self.resolve(name) {
            Some((_, _, oid)) => self
                .session
                .engine
                .catalog
                .read()
                .relation_column_names(oid),
            None => Vec::new(),
        }
    }

    /// `wanted` on the relation `name` resolves to (nothing when it does not resolve), or
    /// on the columns `columns` names.
    fn relation(&mut self, name: &ObjectName, wanted: Privileges, columns: Columns) {
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
            columns,
        });
        if kind == RelationKind::View && wanted == Privileges::SELECT {
            self.view_owner_reads(oid);
        }
    }

    /// A view's query runs with its owner's privileges: the owner needs SELECT on what it reads,
    /// and a view it reads runs with that view's owner's, down the chain.
    /// The SQL functions `node` calls that are inlined into the calling statement (see
    /// `routines::inline`) read what their bodies read as part of it, with the caller's
    /// privileges, as PostgreSQL checks the query it inlines: their bodies need what they
    /// would need as statements, and so do the functions they call in turn, and those called
    /// in the views the statement reads. Other routines check their statements as they run
    /// them (`Session::run_embedded`), SECURITY DEFINER ones as their owner.
    fn inlined_bodies<V: Visit>(&mut self, node: &V, seen: &mut HashSet<Oid>) -> SqlResult<()> {
        if self.session.engine.catalog.read().routines.is_empty() {
            return Ok(());
        }
        let mut calls: Vec<(ObjectName, Vec<ast::FunctionArg>)> = Vec::new();
        let mut views: Vec<ObjectName> = Vec::new();
        let _ = ast::visit_expressions(node, |e| {
            if let ast::Expr::Function(f) = e {
                let args = match &f.args {
                    ast::FunctionArguments::List(list) => list.args.clone(),
                    _ => Vec::new(),
                };
                calls.push((f.name.clone(), args));
            }
            ControlFlow::<()>::Continue(())
        });
        let _ = ast::visit_relations(node, |name| {
            views.push(name.clone());
            ControlFlow::<()>::Continue(())
        });
        struct TableCalls<'a>(&'a mut Vec<(ObjectName, Vec<ast::FunctionArg>)>);
        impl Visitor for TableCalls<'_> {
            type Break = ();
            fn pre_visit_table_factor(&mut self, t: &TableFactor) -> ControlFlow<()> {
                if let TableFactor::Table {
                    name,
                    args: Some(args),
                    ..
                } = t
                {
                    self.0.push((name.clone(), args.args.clone()));
                }
                ControlFlow::Continue(())
            }
        }
        let _ = node.visit(&mut TableCalls(&mut calls));
        let schemas = self.session.scope.lookup_schemas();
        let mut bodies = Vec::new();
        // A view's own reads are its owner's to have (`view_owner_reads`); only the functions
        // it calls run with the caller's privileges.
        let mut view_queries = Vec::new();
        {
            let catalog = self.session.engine.catalog.read();
            for (name, args) in &calls {
                let parts = crate::query::rewrite::object_name_parts(name);
                // A call that does not resolve is the statement's own error to report.
                let Ok(Some(call)) =
                    crate::routines::resolve_call(&catalog, &schemas, &parts, args)
                else {
                    continue;
                };
                let def = call.routine;
                if crate::routines::call::runs_body(&def) || !seen.insert(def.oid) {
                    continue;
                }
                bodies.extend(crate::routines::body_statements(&def).unwrap_or_default());
            }
            for name in &views {
                let Some((_, RelationKind::View, oid)) = self.resolve(name) else {
                    continue;
                };
                if let Some(view) = catalog.views.get(&oid) {
                    if seen.insert(oid) {
                        view_queries
                            .extend(crate::session::parse_sql(&view.query_sql).unwrap_or_default());
                    }
                }
            }
        }
        for body in &bodies {
            if !matches!(body, Statement::Query(_)) || seen.len() > INLINED_DEPTH_MAX {
                continue;
            }
            self.statement(body)?;
            self.inlined_bodies(body, seen)?;
        }
        for query in &view_queries {
            if seen.len() <= INLINED_DEPTH_MAX {
                self.inlined_bodies(query, seen)?;
            }
        }
        Ok(())
    }

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
                    columns: Columns::Relation,
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
                columns: Columns::Relation,
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
                columns: Columns::Relation,
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
                columns: Columns::Relation,
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
            columns: Columns::Relation,
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
                columns: Columns::Relation,
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

/// The columns an UPDATE's SET list assigns.
fn assigned_columns(assignments: &[ast::Assignment]) -> Vec<String> {
    assignments
        .iter()
        .flat_map(|a| match &a.target {
            ast::AssignmentTarget::ColumnName(c) => vec![c],
            ast::AssignmentTarget::Tuple(cs) => cs.iter().collect(),
        })
        .filter_map(last_ident)
        .collect()
}

fn last_ident(name: &ObjectName) -> Option<String> {
    name.0.last().and_then(|p| p.as_ident()).map(ident)
}

/// What a relation is called in its statement: its alias, else its name.
fn label_of(name: &ObjectName, alias: Option<&ast::TableAlias>) -> String {
    match alias {
        Some(a) => ident(&a.name),
        None => crate::ddl::split_name(name).1,
    }
}

/// The columns a statement names, or any one when it names none.
fn each_or_any(columns: Vec<String>) -> Columns {
    match columns.is_empty() {
        true => Columns::Any,
        false => Columns::Each(columns),
    }
}

/// Collects the relations read by FROM items at any depth, leaving out names that refer to a
/// CTE of an enclosing query.
struct ReadRelations {
    ctes: Vec<HashSet<String>>,
    /// Each relation with what the statement calls it, and whether its alias renames its
    /// columns.
    read: Vec<(ObjectName, String, bool)>,
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
        if let TableFactor::Table {
            name, args, alias, ..
        } = factor
        {
            // A set-returning function in FROM (generate_series(...)) reads no relation.
            if args.is_some() {
                return ControlFlow::Continue(());
            }
            let cte = name.0.len() == 1 && {
                let bare = crate::ddl::ident_of(&name.to_string());
                self.ctes.iter().any(|level| level.contains(&bare))
            };
            if !cte {
                let renamed = alias.as_ref().is_some_and(|a| !a.columns.is_empty());
                self.read
                    .push((name.clone(), label_of(name, alias.as_ref()), renamed));
            }
        }
        ControlFlow::Continue(())
    }
}
