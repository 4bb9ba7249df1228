//! The user documentation says what is true: the README's tour runs on a fresh server, every
//! statement of it, and docs/configuration.md describes every flag `shoal serve --help` prints.

mod support;

use std::path::Path;

use support::{connect, ShoalServer};

fn repository_file(path: &str) -> String {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()))
}

/// The statements of the README's fenced block whose info string is `sql tour`.
fn tour_statements() -> Vec<String> {
    let readme = repository_file("README.md");
    let (_, rest) = readme
        .split_once("```sql tour\n")
        .expect("README.md has a ```sql tour block");
    let (block, _) = rest.split_once("\n```").expect("the tour block ends");
    block
        .split(";\n")
        .map(|s| s.trim().trim_end_matches(';').to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_tour_runs_on_a_fresh_server() {
    let statements = tour_statements();
    assert!(statements.len() >= 10, "the tour: {statements:?}");
    let server = ShoalServer::start();
    let client = connect(&server).await;
    for statement in &statements {
        if let Err(e) = client.simple_query(statement).await {
            panic!("the README's tour fails at\n{statement}\n{e:?}");
        }
    }
    // The tour's transaction moved 25 from alice to bob.
    let balances = client
        .query("SELECT balance::text FROM accounts ORDER BY id", &[])
        .await
        .unwrap();
    let balances: Vec<String> = balances.iter().map(|r| r.get(0)).collect();
    assert_eq!(balances, ["75.00", "75.00"]);
}

#[test]
fn every_flag_of_serve_is_in_the_configuration_doc() {
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_shoal"))
        .args(["serve", "--help"])
        .output()
        .expect("run shoal serve --help");
    assert!(help.status.success());
    let help = String::from_utf8(help.stdout).unwrap();
    let doc = repository_file("docs/configuration.md");
    let flags: Vec<&str> = help
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|word| word.starts_with("--") && word.len() > 2)
        .collect();
    assert!(flags.contains(&"--listen"), "{help}");
    for flag in flags {
        assert!(
            doc.contains(&format!("`{flag}")),
            "docs/configuration.md does not describe {flag}"
        );
    }
}
