//! `shoal backup`: an online backup of a running server, taken on the server's machine. Over a
//! client connection it asks for a checkpoint and `pg_backup_start` (which keeps the
//! checkpoint and the log after it from being deleted), copies them from the data directory
//! (`shoal_wal::copy_for_backup`: the log up to its last whole batch) with the settings files,
//! and ends with `pg_backup_stop`, whose label it writes as `backup_label`. The server goes
//! on serving writes meanwhile. The copy is a data directory: `shoal serve --data-dir` on it
//! recovers the checkpoint and replays the log, as after a crash, to the state of the last
//! commit copied.

use std::path::{Path, PathBuf};

/// Files of the data directory that are not the checkpoint or the log, copied as they are.
const SETTINGS_FILES: &[&str] = &[
    "postgresql.conf",
    "postgresql.auto.conf",
    "pg_hba.conf",
    "system_identifier",
];

pub struct BackupRequest {
    pub to: PathBuf,
    pub data_dir: PathBuf,
    pub host: String,
    pub port: u16,
    pub user: String,
    pub checkpoint: bool,
}

pub fn run(request: BackupRequest) -> Result<String, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?
        .block_on(backup(request))
}

async fn backup(r: BackupRequest) -> Result<String, String> {
    prepare_target(&r.to)?;
    let mut config = tokio_postgres::Config::new();
    config
        .host(&r.host)
        .port(r.port)
        .user(&r.user)
        .dbname("postgres")
        .application_name("shoal backup");
    if let Ok(password) = std::env::var("PGPASSWORD") {
        config.password(password);
    }
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("cannot connect to {}:{}: {e}", r.host, r.port))?;
    let connection = tokio::spawn(connection);
    let sql_error = |what: &str, e: tokio_postgres::Error| match e.as_db_error() {
        Some(db) => format!("{what}: {}", db.message()),
        None => format!("{what}: {e}"),
    };
    // The server's data directory is the one named: the same database identity.
    let server_identity: String = client
        .query_one(
            "SELECT system_identifier::text FROM pg_control_system()",
            &[],
        )
        .await
        .map_err(|e| sql_error("cannot read the server's identity", e))?
        .get(0);
    let local_identity = std::fs::read_to_string(r.data_dir.join("system_identifier"))
        .map_err(|e| format!("{} is no data directory: {e}", r.data_dir.display()))?;
    if local_identity.trim() != server_identity {
        return Err(format!(
            "{} is not the data directory of the server at {}:{} (`shoal backup` runs on the server's machine)",
            r.data_dir.display(),
            r.host,
            r.port
        ));
    }
    if r.checkpoint {
        client
            .batch_execute("CHECKPOINT")
            .await
            .map_err(|e| sql_error("CHECKPOINT failed", e))?;
    }
    client
        .query_one("SELECT pg_backup_start('shoal backup', true)", &[])
        .await
        .map_err(|e| sql_error("pg_backup_start failed", e))?;
    let (data_dir, to) = (r.data_dir.clone(), r.to.clone());
    let copied = tokio::task::spawn_blocking(move || copy_files(&data_dir, &to))
        .await
        .map_err(|e| format!("the copy failed: {e}"))??;
    let stop = client
        .query_one("SELECT lsn, labelfile FROM pg_backup_stop()", &[])
        .await
        .map_err(|e| sql_error("pg_backup_stop failed", e))?;
    let label: String = stop.get(1);
    std::fs::write(r.to.join("backup_label"), label)
        .map_err(|e| format!("cannot write backup_label: {e}"))?;
    drop(client);
    let _ = connection.await;
    let checkpoint = copied
        .checkpoint_id
        .map_or("no checkpoint".to_string(), |id| format!("checkpoint {id}"));
    Ok(format!(
        "backup written to {}: {checkpoint} and the log up to {}, {:.1} MB. \
         Start a server on it with `shoal serve --data-dir {}`.",
        r.to.display(),
        shoal_sql::query::wal_functions::format_lsn(copied.end_lsn),
        copied.bytes as f64 / 1e6,
        r.to.display()
    ))
}

/// The backup goes into a new directory, or an empty one.
fn prepare_target(to: &Path) -> Result<(), String> {
    match std::fs::read_dir(to) {
        Ok(entries) => match entries.count() {
            0 => Ok(()),
            _ => Err(format!(
                "directory {} exists but is not empty",
                to.display()
            )),
        },
        Err(_) => std::fs::create_dir_all(to)
            .map_err(|e| format!("cannot create directory {}: {e}", to.display())),
    }
}

fn copy_files(data_dir: &Path, to: &Path) -> Result<shoal_wal::BackupCopy, String> {
    let copied = shoal_wal::copy_for_backup(data_dir, to).map_err(|e| e.to_string())?;
    for name in SETTINGS_FILES {
        let from = data_dir.join(name);
        if from.exists() {
            std::fs::copy(&from, to.join(name))
                .map_err(|e| format!("cannot copy {}: {e}", from.display()))?;
        }
    }
    Ok(copied)
}
