//! `taxi-gen`: writes synthetic NYC taxi trips as CSV for the taxi benchmark
//! (`bench/taxi/run.py`), deterministically for a seed, on several threads.

use clap::Parser;
use shoal_taxi_gen::{generate, GenOptions, ROWS_PER_CHUNK};
use std::fs::File;
use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(
    about = "Synthetic NYC taxi trips as CSV in the 51-column layout of bench/taxi/schema.sql"
)]
struct Args {
    /// Number of rows to write.
    #[arg(long)]
    rows: u64,
    /// Seed of the random streams; the same seed and row count give the same bytes.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Output file, or `-` for standard output.
    #[arg(long, default_value = "-")]
    out: String,
    /// Generator threads (default: the number of CPUs). Does not change the output.
    #[arg(long)]
    threads: Option<usize>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let options = GenOptions {
        rows: args.rows,
        seed: args.seed,
        threads,
        rows_per_chunk: ROWS_PER_CHUNK,
    };
    let started = Instant::now();
    let result = if args.out == "-" {
        generate(&options, &mut io::stdout().lock())
    } else {
        File::create(&args.out).and_then(|mut f| {
            generate(&options, &mut f)?;
            f.flush()
        })
    };
    match result {
        Ok(()) => {
            let elapsed_s = started.elapsed().as_secs_f64();
            eprintln!(
                "taxi-gen: {} rows in {:.2} s ({:.0} rows/s, {} threads)",
                args.rows,
                elapsed_s,
                args.rows as f64 / elapsed_s,
                threads
            );
            ExitCode::SUCCESS
        }
        // A reader such as `head` that has seen enough is not an error.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("taxi-gen: writing {}: {e}", args.out);
            ExitCode::FAILURE
        }
    }
}
