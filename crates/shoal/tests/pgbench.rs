//! pgbench, unmodified, against Shoal: initialisation with the default steps (client-side COPY
//! with `freeze on`, primary keys added afterwards) and with server-side generation, then short
//! tpcb-like runs in the three query modes with several clients. After the runs the balances
//! must agree: every transaction adds the same delta to one account, one teller, one branch and
//! one history row, so the four sums are equal unless a write was lost or half-applied.
//! Needs pgbench (Debian's postgresql-15 package; `.ci/run` installs it).

mod support;

use std::process::Command;

use support::ShoalServer;

const SCALE: &str = "1";
const CLIENTS: &str = "4";
const TRANSACTIONS_PER_CLIENT: &str = "150";

fn pgbench_binary() -> &'static str {
    let debian = "/usr/lib/postgresql/15/bin/pgbench";
    if std::path::Path::new(debian).exists() {
        debian
    } else {
        "pgbench"
    }
}

fn pgbench(server: &ShoalServer, args: &[&str]) -> String {
    let out = Command::new(pgbench_binary())
        .args(["-h", "127.0.0.1", "-U", "postgres"])
        .args(["-p", &server.port().to_string()])
        .args(args)
        .output()
        .expect("run pgbench (install postgresql-15)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "pgbench {args:?} failed:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stdout
}

fn psql_value(server: &ShoalServer, sql: &str) -> String {
    let out = Command::new("psql")
        .args(["-X", "-h", "127.0.0.1", "-U", "postgres", "-d", "postgres"])
        .args(["-p", &server.port().to_string(), "-Atc", sql])
        .output()
        .expect("run psql");
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The four sums a tpcb-like run keeps equal.
fn balance_sums(server: &ShoalServer) -> [String; 4] {
    [
        "SELECT sum(abalance) FROM pgbench_accounts",
        "SELECT sum(tbalance) FROM pgbench_tellers",
        "SELECT sum(bbalance) FROM pgbench_branches",
        "SELECT coalesce(sum(delta), 0) FROM pgbench_history",
    ]
    .map(|sql| psql_value(server, sql))
}

fn assert_row_counts(server: &ShoalServer) {
    assert_eq!(
        psql_value(server, "SELECT count(*) FROM pgbench_accounts"),
        "100000"
    );
    assert_eq!(
        psql_value(server, "SELECT count(*) FROM pgbench_tellers"),
        "10"
    );
    assert_eq!(
        psql_value(server, "SELECT count(*) FROM pgbench_branches"),
        "1"
    );
}

#[test]
fn tpcb_like_runs_keep_balances_consistent_in_every_query_mode() {
    let server = ShoalServer::start();
    pgbench(&server, &["-i", "-q", "-s", SCALE]);
    assert_row_counts(&server);
    for mode in ["simple", "extended", "prepared"] {
        // -n skips pgbench's start-of-run VACUUM and TRUNCATE of pgbench_history, so history
        // accumulates over the three runs as the balances do.
        let out = pgbench(
            &server,
            &[
                "-n",
                "-M",
                mode,
                "-c",
                CLIENTS,
                "-j",
                "2",
                "-t",
                TRANSACTIONS_PER_CLIENT,
            ],
        );
        assert!(
            out.contains("number of failed transactions: 0"),
            "-M {mode}:\n{out}"
        );
        let sums = balance_sums(&server);
        assert!(sums.iter().all(|s| *s == sums[0]), "-M {mode}: {sums:?}");
        assert_ne!(sums[0], "0", "the runs changed no balance");
    }
    let expected = 3 * 4 * 150;
    assert_eq!(
        psql_value(&server, "SELECT count(*) FROM pgbench_history"),
        expected.to_string()
    );
}

#[test]
fn server_side_generation_with_foreign_keys_and_select_only() {
    let server = ShoalServer::start();
    pgbench(&server, &["-i", "-q", "-s", SCALE, "-I", "dtGvpf"]);
    assert_row_counts(&server);
    let out = pgbench(&server, &["-S", "-M", "prepared", "-c", "2", "-t", "200"]);
    assert!(out.contains("number of failed transactions: 0"), "{out}");
    // With foreign keys in place, tpcb-like still runs (on the general path), its clients
    // updating the same branch: an account's or teller's UPDATE leaves its branch id alone, so
    // it takes no lock on the branch row (which would deadlock two transactions that each
    // then update that branch).
    let out = pgbench(&server, &["-c", CLIENTS, "-j", "2", "-t", "100"]);
    assert!(out.contains("number of failed transactions: 0"), "{out}");
    let sums = balance_sums(&server);
    assert!(sums.iter().all(|s| *s == sums[0]), "{sums:?}");
}

/// `pgbench -i --partitions` fails with PostgreSQL's "not supported" error instead of creating
/// plain tables that ignore the partitioning, and the server stays usable.
#[test]
fn partitions_are_refused_with_a_clear_error() {
    let server = ShoalServer::start();
    let out = Command::new(pgbench_binary())
        .args(["-h", "127.0.0.1", "-U", "postgres"])
        .args(["-p", &server.port().to_string()])
        .args(["-i", "-q", "-s", "1", "--partitions", "2"])
        .output()
        .expect("run pgbench (install postgresql-15)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "pgbench -i --partitions succeeded");
    assert!(
        stderr.contains("partitioned tables are not supported"),
        "{stderr}"
    );
    assert_eq!(psql_value(&server, "SELECT 1"), "1");
}

/// pgbench -i -s 10, a short tpcb-like run, kill -9, restart: every row and the balance
/// invariant are intact (the data comes back from the redo log alone, then from a checkpoint
/// plus the log).
#[test]
fn initialised_database_survives_kill_9() {
    let server = ShoalServer::start();
    pgbench(&server, &["-i", "-q", "-s", "10"]);
    pgbench(
        &server,
        &["-n", "-M", "prepared", "-c", "4", "-j", "2", "-t", "50"],
    );
    let sums_before = balance_sums(&server);
    let server = ShoalServer::start_in(server.crash(), &[]).expect("restart after kill -9");
    assert_eq!(
        psql_value(&server, "SELECT count(*) FROM pgbench_accounts"),
        "1000000"
    );
    assert_eq!(balance_sums(&server), sums_before);
    assert_eq!(psql_value(&server, "CHECKPOINT"), "CHECKPOINT");
    pgbench(
        &server,
        &["-n", "-M", "simple", "-c", "2", "-j", "2", "-t", "50"],
    );
    let sums_before = balance_sums(&server);
    let server = ShoalServer::start_in(server.crash(), &[]).expect("restart after kill -9");
    let sums = balance_sums(&server);
    assert_eq!(sums, sums_before);
    assert!(sums.iter().all(|s| *s == sums[0]), "{sums:?}");
    assert_eq!(
        psql_value(&server, "SELECT count(*) FROM pgbench_history"),
        "300"
    );
}
