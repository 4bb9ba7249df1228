//! The `shoal` binary: `shoal serve` starts the database server.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "shoal",
    version,
    about = "Shoal: an in-memory SQL database that speaks PostgreSQL"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the server.
    Serve {
        /// Address to listen on. Loopback by default: Shoal has no authentication yet, so it
        /// must not be reachable from other machines.
        #[arg(long, default_value = "127.0.0.1:5432")]
        listen: SocketAddr,
        /// Data directory (created if missing). Nothing is persisted yet: see the README.
        #[arg(long, default_value = "./shoal-data")]
        data_dir: PathBuf,
    },
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve { listen, data_dir } => {
            if !listen.ip().is_loopback() {
                eprintln!(
                    "shoal: refusing to listen on {listen}: Shoal has no authentication yet, so it only listens on loopback addresses"
                );
                std::process::exit(2);
            }
            if let Err(e) = std::fs::create_dir_all(&data_dir) {
                eprintln!(
                    "shoal: cannot create data directory {}: {e}",
                    data_dir.display()
                );
                std::process::exit(1);
            }
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("tokio runtime");
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::bind(listen).await {
                    Ok(l) => l,
                    Err(e) => {
                        eprintln!("shoal: cannot listen on {listen}: {e}");
                        std::process::exit(1);
                    }
                };
                tracing::info!(
                    "Shoal {} listening on {listen}, data directory {}",
                    env!("CARGO_PKG_VERSION"),
                    data_dir.display()
                );
                let engine = shoal_sql::Engine::new();
                if let Err(e) = shoal_server::serve(listener, engine).await {
                    eprintln!("shoal: server stopped: {e}");
                    std::process::exit(1);
                }
            });
        }
    }
}
