//! CREATE TRIGGER: the triggers of a table, kept in its definition (so that they are logged,
//! checkpointed, undone and dropped with it), as pg_trigger lists them.

use serde::{Deserialize, Serialize};

use crate::catalog::Oid;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TriggerTiming {
    Before,
    After,
    /// On views, for each row: the trigger does the write instead.
    InsteadOf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TriggerEvent {
    Insert,
    Update,
    Delete,
    /// Statement triggers only, as in PostgreSQL.
    Truncate,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TriggerDef {
    pub oid: Oid,
    pub name: String,
    /// The trigger function (a routine's OID).
    pub function: Oid,
    pub timing: TriggerTiming,
    pub events: Vec<TriggerEvent>,
    /// `UPDATE OF columns`: fires only when the UPDATE sets one of these (empty: any).
    pub update_columns: Vec<String>,
    /// FOR EACH ROW (else FOR EACH STATEMENT).
    pub for_each_row: bool,
    /// The WHEN condition's SQL text, over NEW and OLD.
    pub when_sql: Option<String>,
    /// The arguments written after the function's name (TG_ARGV).
    pub args: Vec<String>,
    /// ALTER TABLE ... DISABLE TRIGGER turns this off.
    pub enabled: bool,
    /// `REFERENCING OLD TABLE AS name`: the statement's old rows, as a table of that name.
    #[serde(default)]
    pub old_table: Option<String>,
    /// `REFERENCING NEW TABLE AS name`: the statement's new rows.
    #[serde(default)]
    pub new_table: Option<String>,
}

impl TriggerDef {
    /// Whether the trigger reads the statement's rows as transition tables.
    pub fn has_transition_tables(&self) -> bool {
        self.old_table.is_some() || self.new_table.is_some()
    }

    pub fn fires_on(&self, event: TriggerEvent) -> bool {
        self.enabled && self.events.contains(&event)
    }
}
