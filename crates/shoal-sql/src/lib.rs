//! Shoal's SQL layer: a statement's way from text to results. `session` receives it and runs
//! transaction control and settings; DDL goes to `ddl`, writes to `dml` (with `constraints`),
//! bulk loads to `copy`, and queries to `query` (DataFusion over the storage engine). `types`
//! and `pgtext` translate values between storage, Arrow and PostgreSQL's text formats.

pub mod advisory;
pub mod allocator;
pub mod backends;
pub mod config;
pub mod constraints;
pub mod copy;
pub mod database_stats;
pub mod ddl;
pub mod dml;
pub mod durability;
pub mod engine;
pub mod error;
pub mod fastpath;
pub mod interrupt;
pub mod interval;
pub mod kept_plan;
pub mod lock_waits;
pub mod memory_limit;
pub mod metrics;
pub mod notify;
pub mod numeric;
pub mod params;
pub mod parse;
pub mod pgtext;
pub mod privileges;
pub mod query;
pub mod redis_host;
pub mod routines;
pub mod session;
pub mod settings;
mod shape_cache;
pub mod statement_stats;
pub mod timezone;
pub mod timezone_abbreviations;
pub mod types;

pub use engine::Engine;
pub use error::{SqlError, SqlResult};
pub use session::{Prepared, ResultColumn, Session, StatementResult};
