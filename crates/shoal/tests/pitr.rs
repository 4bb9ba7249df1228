//! Point-in-time recovery: a server archives its completed log segments (`archive_mode`,
//! `archive_command`); a backup taken with `shoal backup`, plus `recovery.signal`,
//! `restore_command` and `recovery_target_time`, restores to the state at that time: rows
//! committed after the backup and before the target are there, rows and DDL after it are not.
//! The restored server then takes writes and keeps them across a restart (the log past the
//! target is never replayed). Without a target, recovery goes to the end of the archive.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use support::{connect, ShoalServer};

async fn count(client: &tokio_postgres::Client, phase: &str) -> i64 {
    client
        .query_one("SELECT count(*) FROM events WHERE phase = $1", &[&phase])
        .await
        .unwrap()
        .get(0)
}

fn segments(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.ends_with(".wal"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn copy_dir(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Sets a backup up for archive recovery.
fn prepare_restore(backup: &Path, archive: &Path, target: Option<&str>) {
    std::fs::write(backup.join("recovery.signal"), b"").unwrap();
    let mut conf = std::fs::read_to_string(backup.join("postgresql.conf")).unwrap_or_default();
    conf.push_str(&format!(
        "\nrestore_command = 'cp {}/%f %p'\n",
        archive.display()
    ));
    if let Some(target) = target {
        conf.push_str(&format!("recovery_target_time = '{target}'\n"));
    }
    std::fs::write(backup.join("postgresql.conf"), conf).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_and_archived_log_restore_to_a_point_in_time() {
    let archive: PathBuf = std::env::temp_dir().join(format!(
        "shoal-archive-{}-{}",
        std::process::id(),
        support::free_port()
    ));
    std::fs::create_dir_all(&archive).unwrap();
    let archive_command = format!("archive_command=cp %p {}/%f", archive.display());
    let server = ShoalServer::start_with(&["-c", "archive_mode=on", "-c", &archive_command]);
    let client = connect(&server).await;
    client
        .batch_execute(
            "CREATE TABLE events (n int PRIMARY KEY, phase text NOT NULL);
             INSERT INTO events SELECT g, 'before-backup' FROM generate_series(1, 100) g;
             CHECKPOINT;",
        )
        .await
        .unwrap();

    let backup = server.data_dir().with_extension("backup");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shoal"))
        .arg("backup")
        .arg("--to")
        .arg(&backup)
        .arg("--data-dir")
        .arg(server.data_dir())
        .args(["--port", &server.port().to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    for n in 101..=200 {
        client
            .execute("INSERT INTO events VALUES ($1, 'after-backup')", &[&n])
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(30)).await;
    let target: String = client
        .query_one("SELECT clock_timestamp()::text", &[])
        .await
        .unwrap()
        .get(0);
    tokio::time::sleep(Duration::from_millis(30)).await;
    client
        .batch_execute(
            "INSERT INTO events SELECT g, 'after-target' FROM generate_series(201, 300) g;
             CREATE TABLE later (x int);",
        )
        .await
        .unwrap();
    client
        .query_one("SELECT pg_switch_wal()", &[])
        .await
        .unwrap();

    // Every segment but the one being written reaches the archive, the newest last.
    let wal_dir = server.data_dir().join("wal");
    let mut archived = false;
    for _ in 0..100 {
        let local = segments(&wal_dir);
        let in_archive = segments(&archive);
        let last: Option<String> = client
            .query_one("SELECT last_archived_wal FROM pg_stat_archiver", &[])
            .await
            .unwrap()
            .get(0);
        if local.len() > 1
            && local[..local.len() - 1]
                .iter()
                .all(|s| in_archive.contains(s))
            && last.as_ref() == local.get(local.len() - 2)
        {
            archived = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(archived, "completed segments were archived");
    let row = client
        .query_one(
            "SELECT archived_count, failed_count, last_archived_wal FROM pg_stat_archiver",
            &[],
        )
        .await
        .unwrap();
    assert!(row.get::<_, i64>(0) >= 1);
    assert_eq!(row.get::<_, i64>(1), 0);
    assert!(row.get::<_, Option<String>>(2).is_some());
    drop(client);
    let (_, original_dir) = server.terminate();

    // To the end of the archive: everything.
    let whole = backup.with_extension("whole");
    copy_dir(&backup, &whole);
    prepare_restore(&whole, &archive, None);
    let restored = ShoalServer::start_in(whole.clone(), &[]).expect("start the full restore");
    let c = connect(&restored).await;
    assert_eq!(count(&c, "after-target").await, 100);
    drop(c);
    drop(restored);

    // To the target time.
    prepare_restore(&backup, &archive, Some(&target));
    let restored = ShoalServer::start_in(backup.clone(), &[]).expect("start the restore");
    assert!(
        !backup.join("recovery.signal").exists(),
        "recovery.signal is removed once recovery is complete"
    );
    let c = connect(&restored).await;
    assert_eq!(count(&c, "before-backup").await, 100);
    assert_eq!(count(&c, "after-backup").await, 100);
    assert_eq!(count(&c, "after-target").await, 0);
    let later = c.query("SELECT * FROM later", &[]).await.unwrap_err();
    assert_eq!(later.as_db_error().unwrap().code().code(), "42P01");
    c.batch_execute("INSERT INTO events VALUES (1000, 'restored')")
        .await
        .unwrap();
    drop(c);
    let (_, dir) = restored.terminate();

    let again = ShoalServer::start_in(dir, &[]).expect("restart the restored server");
    let c = connect(&again).await;
    assert_eq!(count(&c, "restored").await, 1);
    assert_eq!(count(&c, "after-target").await, 0);
    assert_eq!(count(&c, "after-backup").await, 100);
    drop(c);
    drop(again);
    let _ = std::fs::remove_dir_all(&archive);
    let _ = std::fs::remove_dir_all(&original_dir);
}
