//! The generator's promises: the bytes depend on the seed and row count only, every line has
//! the schema's 51 columns, and the distributions the benchmark queries look at are shaped like
//! the public data.

use shoal_taxi_gen::{generate, GenOptions, COLUMN_COUNT, ROWS_PER_CHUNK};
use std::collections::HashMap;

fn csv(rows: u64, seed: u64, threads: usize, rows_per_chunk: u64) -> Vec<u8> {
    let mut out = Vec::new();
    generate(
        &GenOptions {
            rows,
            seed,
            threads,
            rows_per_chunk,
        },
        &mut out,
    )
    .unwrap();
    out
}

/// Small chunks, so that a few thousand rows (fast enough in a debug build) make many chunks;
/// the chunk size is a parameter of the same code path that `ROWS_PER_CHUNK` takes.
#[test]
fn same_seed_same_bytes_for_any_thread_count() {
    let one = csv(5_003, 9, 1, 500);
    assert_eq!(one, csv(5_003, 9, 2, 500));
    assert_eq!(one, csv(5_003, 9, 3, 500));
    assert_eq!(one, csv(5_003, 9, 16, 500));
    assert_ne!(
        one,
        csv(5_003, 10, 2, 500),
        "another seed gave the same data"
    );
}

#[test]
fn the_default_chunk_size_is_fixed() {
    // The output's bytes depend on it: a change must be deliberate.
    assert_eq!(ROWS_PER_CHUNK, 65_536);
}

#[test]
fn zero_rows_is_empty() {
    assert!(csv(0, 1, 2, 1_000).is_empty());
}

const CAB_TYPE: usize = 24;
const PASSENGER_COUNT: usize = 10;
const PICKUP_DATETIME: usize = 2;
const FARE_AMOUNT: usize = 12;
const TOTAL_AMOUNT: usize = 19;
const PICKUP: usize = 22;

fn cents(field: &str) -> i64 {
    let (units, fraction) = field.split_once('.').unwrap();
    let sign = if units.starts_with('-') { -1 } else { 1 };
    units.parse::<i64>().unwrap() * 100 + sign * fraction.parse::<i64>().unwrap()
}

#[test]
fn lines_have_the_schema_columns_and_sane_values() {
    let data = String::from_utf8(csv(100_000, 42, 2, 8_192)).unwrap();
    let mut cab_types: HashMap<&str, u64> = HashMap::new();
    let (mut rows, mut passengers_known, mut one_passenger) = (0u64, 0u64, 0u64);
    for (i, line) in data.lines().enumerate() {
        let fields: Vec<&str> = line.split(',').collect();
        assert_eq!(fields.len(), COLUMN_COUNT, "line {i}: {line}");
        assert_eq!(fields[0], (i + 1).to_string());
        let pickup_year: i32 = fields[PICKUP_DATETIME][..4].parse().unwrap();
        assert!((2009..=2016).contains(&pickup_year), "{line}");
        assert_eq!(fields[PICKUP_DATETIME].len(), 19);
        assert!(
            fields[PICKUP].is_empty() || fields[PICKUP].len() == 50,
            "{line}"
        );
        *cab_types.entry(fields[CAB_TYPE]).or_default() += 1;
        if !fields[PASSENGER_COUNT].is_empty() {
            passengers_known += 1;
            one_passenger += (fields[PASSENGER_COUNT] == "1") as u64;
            assert!(fields[PASSENGER_COUNT].parse::<u8>().is_ok());
        }
        if !fields[FARE_AMOUNT].is_empty() {
            let parts: i64 = fields[FARE_AMOUNT..TOTAL_AMOUNT]
                .iter()
                .filter(|f| !f.is_empty())
                .map(|f| cents(f))
                .sum();
            assert_eq!(parts, cents(fields[TOTAL_AMOUNT]), "{line}");
        }
        rows += 1;
    }
    assert_eq!(rows, 100_000);
    let yellow = cab_types["yellow"];
    assert!(
        yellow > cab_types["green"] && yellow > cab_types["uber"],
        "{cab_types:?}"
    );
    assert!(yellow as f64 / rows as f64 > 0.85, "{cab_types:?}");
    let one_share = one_passenger as f64 / passengers_known as f64;
    assert!(
        (0.68..0.71).contains(&one_share),
        "passenger_count = 1 in {one_share} of trips"
    );
}
